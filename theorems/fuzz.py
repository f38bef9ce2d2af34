"""Fuzz a policy for competitiveness: targeted hypothesis search plus the known constructions (issue 6).

``fuzz_policy`` searches traces on which a policy's ratio to the exact optimum (RM) or its NM regret is as large as
possible.  Search is *targeted*: every example reports its ratio to ``hypothesis.target``, so generation climbs
toward the worst case instead of sampling blindly (MacIver & Donaldson, "Test-Case Reduction via Test-Case
Generation: Insights from the Hypothesis Reducer", ECOOP 2020; Löscher & Sagonas, "Targeted property-based
testing", ISSTA 2017).  When a bound is exceeded, hypothesis shrinks the trace to a minimal one, which is saved as a
trace file that ``python -m paper_check simulate`` replays.

Bounds checked (:func:`theorems.check.promised_bound`):
    RM:  the policy's declared guarantee (policy metadata), or by its kind: ratio <= k/(k-h+1) with h = k, i.e.
         <= k, for a deterministic policy (Eq. 8 / Sleator-Tarjan); the seed mean <= 2H_k - 1 for a randomized one,
         judged at the lower end of its 95% interval (:mod:`kvcore.measure`);
    NM:  regret may not grow with the length of the trace on which OPT's regret is 0 (decoy-and-sleeper, Theorem 2
         vs Lemma 1): the search maximizes the tracking gap per step (:func:`theorems.check.gap_growth`).
The known constructions come from the registry :data:`adversary.CONSTRUCTIONS`, every ratio from
:func:`kvcore.measure.measure`.
A policy that breaks the engine contract is reported as a contract violation, never as a ratio.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings, target
from hypothesis import strategies as st

import policies
from adversary import constructions
from kvcore.errors import ContractViolation, ParameterError
from kvcore.measure import measure, within
from kvcore.traces import AttentionTrace, PagingTrace, save_trace

from .check import assert_prefix_consistent, describe_trace, gap_growth, promised_bound


@dataclass
class FuzzReport:
    target: str
    model: str
    capacity: int
    bound: float
    bound_name: str
    examples: int = 0
    seconds: float = 0.0
    search_worst: float = 0.0
    worst: float = 0.0
    worst_trace: PagingTrace | AttentionTrace | None = None
    worst_source: str = ""
    violation: bool = False
    contract_violation: str | None = None
    trace_file: str | None = None
    constructions: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if self.contract_violation:
            return "contract violation"
        return "violates" if self.violation else "no violation found"

    def as_dict(self) -> dict:
        w = self.worst
        return {"target": self.target, "model": self.model, "capacity": self.capacity, "bound": self.bound,
                "bound_name": self.bound_name, "examples": self.examples, "seconds": round(self.seconds, 2),
                "search_worst": "inf" if math.isinf(self.search_worst) else self.search_worst,
                "worst": "inf" if math.isinf(w) else w, "worst_source": self.worst_source,
                "verdict": self.verdict, "contract_violation": self.contract_violation,
                "trace_file": self.trace_file,
                "constructions": {k: ("inf" if math.isinf(v) else v) for k, v in self.constructions.items()}}


class _Exceeded(Exception):
    """Raised inside the property when a bound is exceeded, so that hypothesis shrinks the trace."""


def _rm_value(make, trace: PagingTrace, k: int, seeds: int) -> float:
    """The ratio whose excess over the bound counts as a violation (kvcore.measure's rule for randomized policies)."""
    return measure(make, trace, k, seeds=range(seeds)).judged("ratio")


def _construction_values(make, k: int, model: str, seeds: int) -> dict[str, tuple]:
    """Every registered construction of ``model`` (:data:`adversary.CONSTRUCTIONS`) run against the policy:
    name -> (measure, trace)."""
    out = {}
    for c in constructions(model):
        built = c.build(k, make)
        if model == "rm":
            out[c.name] = (_rm_value(make, built, k, seeds), built)
        else:
            out[c.name] = (gap_growth(make, built, k)[0], built[-1])
    return out


def fuzz_policy(target_spec: str, k: int, model: str = "rm", examples: int = 300, seconds: float = 60.0,
                seed: int = 0, out_dir: str | Path = ".", nm_growth_bound: float = 0.05) -> FuzzReport:
    """Search for a trace on which the policy exceeds its bound (see module docstring); save the shrunk trace."""
    make = policies.resolve(target_spec)
    seeds = 8
    if model == "rm":
        g = promised_bound(make, k)
        bound, bound_name = g.value(k), (f"{g.name} with h = k" + (" in expectation" if g.expectation else "")
                                         + f" ({g.source})")
    else:
        bound, bound_name = nm_growth_bound, "NM tracking-gap growth per suffix step (bounded regret, Lemma 1)"
    rep = FuzzReport(target_spec, model, k, bound, bound_name)
    t_start = time.monotonic()
    deadline = t_start + seconds
    failing: list = []

    def consider(value: float, trace, source: str) -> None:
        if value > rep.worst or rep.worst_trace is None:
            rep.worst, rep.worst_trace, rep.worst_source = value, trace, source

    try:
        for name, (value, trace) in _construction_values(make, k, model, seeds).items():
            rep.constructions[name] = value
            consider(value, trace, f"construction: {name}")
            # the information rule: decisions may not depend on the future (checked by cutting the trace)
            assert_prefix_consistent(make, trace, k, model)
    except ContractViolation as exc:
        rep.contract_violation = str(exc)
        rep.seconds = time.monotonic() - t_start
        return rep
    except Exception as exc:  # a user's policy crashing is a finding about the policy, reported in one line
        rep.contract_violation = f"the policy raised {type(exc).__name__}: {exc}"
        rep.seconds = time.monotonic() - t_start
        return rep

    if model == "rm":
        from adversary.strategies import paging_traces, repeated_motif_traces

        strategy = st.one_of(repeated_motif_traces(k + 2, max_repeat=2 * k * k),
                             paging_traces(max_items=k + 2, min_steps=k + 1, max_steps=10 * (k + 2)))

        def evaluate(trace):
            return _rm_value(make, trace, k, seeds), trace
    else:
        from adversary.strategies import repeated_suffix_families

        strategy = repeated_suffix_families(min_prefix=k + 1, max_prefix=3 * k + 3, max_support=k + 1,
                                            suffix_lengths=(4 * k, 8 * k))

        def evaluate(family):
            return gap_growth(make, list(family), k)[0], family[-1]

    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate, Phase.target, Phase.shrink], suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False, print_blob=False)
    @given(strategy)
    def prop(drawn):
        if time.monotonic() > deadline and not failing:
            return
        rep.examples += 1
        value, trace = evaluate(drawn)
        target(value if math.isfinite(value) else 1e9, label="ratio" if model == "rm" else "growth")
        rep.search_worst = max(rep.search_worst, value)
        consider(value, trace, "targeted search")
        if not within(value, bound):
            failing.append((value, trace))
            raise _Exceeded()

    try:
        hyp_seed(seed)(prop)()
    except _Exceeded:
        pass
    except ContractViolation as exc:
        rep.contract_violation = str(exc)
    rep.seconds = time.monotonic() - t_start
    if rep.contract_violation:
        return rep
    if failing:
        # hypothesis replays the shrunk example last: that is the minimal counterexample
        value, trace = failing[-1]
        rep.violation = True
        rep.worst, rep.worst_trace, rep.worst_source = value, trace, "targeted search, shrunk to a minimal trace"
    elif not within(rep.worst, bound):
        rep.violation = True
    if rep.worst_trace is not None:
        rep.trace_file = str(_save_worst(rep, Path(out_dir)))
    return rep


def _save_worst(rep: FuzzReport, out_dir: Path) -> Path:
    from kvcore.errors import TraceError

    if not out_dir.is_dir():
        raise ParameterError(f"--out {out_dir}: not a directory")
    stem = "".join(c if c.isalnum() else "_" for c in rep.target) + f"-k{rep.capacity}-{rep.model}"
    trace = rep.worst_trace
    suffix = ".npy" if isinstance(trace, PagingTrace) and trace.is_unit_single else ".npz"
    try:
        return save_trace(trace, out_dir / f"fuzz-{stem}{suffix}")
    except (TraceError, OSError) as exc:
        raise ParameterError(f"cannot write the counterexample to {out_dir}: {exc}") from None


def format_report(rep: FuzzReport) -> str:
    lines = [f"target:        {rep.target} (model {rep.model}, capacity k = {rep.capacity})",
             f"bound checked: {rep.bound_name} = {rep.bound:.6g}"]
    if rep.contract_violation:
        lines += ["verdict:       contract violation", f"               {rep.contract_violation}"]
        return "\n".join(lines)
    for name, v in rep.constructions.items():
        lines.append(f"construction:  {name}: {v:.6g}")
    lines.append(f"search:        {rep.examples} targeted examples in {rep.seconds:.1f} s, "
                 f"largest value {rep.search_worst:.6g}")
    worst = "inf" if math.isinf(rep.worst) else f"{rep.worst:.6g}"
    lines.append(f"reported:      {worst} ({rep.worst_source})")
    if rep.worst_trace is not None:
        lines.append(f"worst trace:   {describe_trace(rep.worst_trace, 40)}")
    if rep.trace_file:
        lines.append(f"trace file:    {rep.trace_file}")
    lines.append(f"verdict:       {rep.verdict}")
    return "\n".join(lines)
