"""A fuzz report for the user: the output folder (checked before any search), the counterexample files and the JSON
report written into it through :mod:`kvcore.atomic`, and the text report printed by ``python -m verify``.

Files are named ``<target>-k<k>-<question>-seed<seed>-{worst,shrunk,failing,report}`` (:func:`output_stem`), so runs
asking different questions do not overwrite each other; a unit-cost paging trace is a ``.npy`` file, anything else
``.npz`` (:func:`kvcore.trace_files.save_trace`), and each replays to the value reported.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from kvcore.atomic import write_text
from kvcore.errors import ParameterError, TraceError
from kvcore.trace_files import save_trace
from kvcore.traces import PagingTrace

from .check import describe_trace
from .report import POLICY_FINDINGS, FuzzReport


def prepare_out_dir(path: str | Path, create: bool = True) -> Path:
    """Check (and create, with ``create``) the output folder before any search: one ParameterError line if it
    is not a writable directory."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ParameterError(f"--out {p}: not a directory")
    try:
        if create:
            p.mkdir(parents=True, exist_ok=True)
        if not p.is_dir():
            raise ParameterError(f"--out {p}: not a directory")
        fd, probe = tempfile.mkstemp(dir=p, prefix=".fuzz-write-probe-")
        os.close(fd)
        os.unlink(probe)
    except ParameterError:
        raise
    except OSError as exc:
        raise ParameterError(f"--out {p}: cannot write there ({exc.strerror or exc})") from None
    return p


def output_stem(rep: FuzzReport) -> str:
    """``<target>-k<k>-<question>-seed<seed>``: one name per question asked, so runs do not overwrite each other."""
    def clean(s):
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)

    question = {"bound": "rm", "premise": "nm-premise"}.get(rep.mode, f"{rep.model}-vs-{clean(rep.reference or '')}")
    return f"{clean(rep.target)}-k{rep.capacity}-{question}-seed{rep.seed}"


def write_outputs(rep: FuzzReport, out_dir: Path) -> list[str]:
    """Write the counterexample traces (worst found, shrunk, failing) and the JSON report into ``out_dir``,
    atomically and with the permissions of the user's umask; record and return the paths."""
    stem = output_stem(rep)
    written = []
    traces = [("failing", rep.finding_trace)] if rep.finding in POLICY_FINDINGS else []
    if rep.violation:
        traces += [("worst", rep.worst_trace), ("shrunk", rep.shrunk_trace)]
    try:
        for label, trace in traces:
            if trace is None:
                continue
            unit = isinstance(trace, PagingTrace) and trace.is_unit_single
            written.append(str(save_trace(trace, out_dir / f"{stem}-{label}{'.npy' if unit else '.npz'}")))
        rep.files = written + [str(out_dir / f"{stem}-report.json")]
        write_text(out_dir / f"{stem}-report.json", json.dumps(rep.as_dict(), indent=2, sort_keys=True) + "\n")
    except (TraceError, OSError) as exc:
        raise ParameterError(f"cannot write the counterexample to {out_dir}: {exc}") from None
    return rep.files


def _fmt(x: float | None) -> str:
    if x is None or x == -math.inf:
        return "-"
    return "inf" if math.isinf(x) else f"{x:.6g}"


def _short(trace) -> str:
    return describe_trace(trace, 30 if isinstance(trace, PagingTrace) else 8)


def format_report(rep: FuzzReport) -> str:
    """The report as printed by ``fuzz`` (without ``--json``)."""
    who = rep.policy or rep.target
    params = ", ".join(f"{k}={v}" for k, v in rep.policy_params.items())
    lines = [f"target:        {rep.target}" + (f" ({who})" if who != rep.target else "")
             + (f" with {params} (the premise's)" if params else "")
             + f"; model {rep.model}, capacity k = {rep.capacity}, seed {rep.seed}"]
    if rep.bound_name:
        lines.append(f"question:      {rep.bound_name}" + (f" = {rep.bound:.6g}" if rep.mode == "bound" else ""))
    if rep.value_name:
        lines.append(f"value:         {rep.value_name}")
    for name, v in rep.constructions.items():
        lines.append(f"construction:  {name}: {v if isinstance(v, str) else _fmt(v)}")
    lines.append(f"search:        {rep.examples} targeted examples, largest value {_fmt(rep.search_worst)}; "
                 f"{rep.measured} traces measured in {rep.seconds:.1f} s")
    lines.append(f"depth:         longest trace measured {rep.longest_trace} steps"
                 + (f" (deepening reached {rep.deepest_scale}x the constructions' base length)"
                    if rep.deepest_scale else " (no deepening: a violation was found first, or no time was left)"))
    if rep.first_violation_seconds is not None:
        lines.append(f"first found:   {rep.first_violation_seconds:.1f} s after the start")
    if rep.worst_trace is not None:
        lines.append(f"worst found:   {_fmt(rep.worst)} ({rep.worst_source}) on {_short(rep.worst_trace)}")
    if rep.shrunk_trace is not None:
        lines.append(f"shrunk:        {_fmt(rep.shrunk)} on {_short(rep.shrunk_trace)}")
        if rep.shrunk_minimal is not None:
            lines.append(f"               {rep.shrunk_trace.T} steps, from {rep.shrunk_from}: " + (
                "locally minimal (removing any one step loses the violation)" if rep.shrunk_minimal else
                "the budget ran out before it was locally minimal (the smallest trace so far is reported)"))
        for step in rep.shrunk_how:
            lines.append(f"               {step}")
    if rep.finding:
        text = rep.message if rep.message.startswith(rep.finding) else f"{rep.finding}: {rep.message}"
        lines.append(f"finding:       {text}")
        if rep.finding_trace is not None:
            lines.append(f"               on {_short(rep.finding_trace)}")
    if len(rep.violations) > 1:     # each kind with its counterexample (one kind is the verdict line's)
        for v in rep.violations:
            what = f"{_fmt(v['value'])} ({v['found_by']})" if "value" in v else v["message"]
            lines.append(f"violation:     {v['kind']}: {what} on {_short(v['trace'])}" if v["trace"] is not None
                         else f"violation:     {v['kind']}: {what}")
    for note in rep.notes:
        lines.append(f"note:          {note}")
    lines.append("budget:        " + ("it cut short " + "; ".join(rep.cut_short) if rep.budget_ran_out else
                                      "nothing was cut short"))
    for f in rep.files:
        lines.append(f"file:          {f}")
    lines.append(f"verdict:       {rep.verdict}")
    return "\n".join(lines)
