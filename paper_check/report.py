"""Run the claims and figures, write the report (Markdown for people, JSON for machines), and check the ledger.

Layout.  Every output goes under an output root laid out like the repository: ``figures/`` and
``paper_check/{report.md, report.json, counterexamples/}``.  The default root is the repository itself (the main job
rebuilds the committed files); ``--out DIR`` makes ``DIR`` the root.  Every path the report prints is relative to
that root, so the report's bytes do not depend on where it was written.

Atomicity.  A run writes into a staging directory inside the root and, only when everything is built, moves each file
to its place (``os.replace``) with SIGINT held back, then removes the staging directory.  An interrupted run leaves
the previous outputs as they were -- never a truncated file, never a mix of two runs or two profiles.

The ledger (``paper_check/ledger.json``, committed) locks, per claim, the quick profile's verdict, its values and
what the source states, and the full profile's verdict.  A run whose verdict or values differ (tolerances in
``VERDICTS.md``), a claim the ledger lacks, or a ledger entry whose claim did not run, exits 1 and names it.
Reports hold no timestamps or timings (those go to stderr), so two runs write the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable

from kvcore.atomic import write_text
from kvcore.errors import ParameterError
from kvcore.numbers import is_real
from theorems.claims import CLAIMS, ClaimResult, dumps, to_jsonable
from theorems.profile import Profile

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
LEDGER = PACKAGE_DIR / "ledger.json"
REL_TOL, ABS_TOL = 1e-6, 1e-9


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check_out_dir(path: Path) -> Path:
    """Create ``path`` if needed and prove it is writable, or raise a one-line ParameterError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ParameterError(f"output directory {path}: not writable ({exc.strerror or exc})") from None
    return path


@contextmanager
def sigint_held():
    """Hold Ctrl-C back while a sequence of renames runs, so that it is never cut in half: a SIGINT arriving inside
    the block is remembered and raised as KeyboardInterrupt when the block ends.  (A Python-level handler, not a
    signal mask: the mask of one thread does not stop the kernel from delivering SIGINT to another.)"""
    received = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    except ValueError:   # not the main thread: nothing to hold
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


class Staging:
    """Outputs of one run, built in ``root/.paper_check-staging-*`` and moved into ``root`` by :meth:`commit` (as a
    context manager: on leaving the block, unless it raised).

    ``replace_dirs`` are directories (relative to the root) replaced as a whole, so a file an earlier run left there
    and this run did not write (an old counterexample) disappears with the commit."""

    def __init__(self, root: Path, replace_dirs: Iterable[str] = ()):
        self.root = check_out_dir(root)
        self.dir = Path(tempfile.mkdtemp(dir=self.root, prefix=".paper_check-staging-"))
        self.replace_dirs = list(replace_dirs)

    def path(self, rel: str) -> Path:
        p = self.dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Commit when the block ran through, discard when it raised (Ctrl-C included); a commit that is itself
        interrupted is discarded too."""
        try:
            if exc_type is None:
                self.commit()
        finally:
            self.discard()

    def commit(self) -> list[Path]:
        files = sorted(p for p in self.dir.rglob("*") if p.is_file())
        with sigint_held():
            for rel in self.replace_dirs:
                target = self.root / rel
                if target.is_dir():
                    shutil.rmtree(target)
            moved = []
            for f in files:
                dest = self.root / f.relative_to(self.dir)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(f, dest)
                moved.append(dest)
            shutil.rmtree(self.dir, ignore_errors=True)
        return moved

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def claim_record(cid: str, res: ClaimResult, profile: Profile) -> dict:
    c = CLAIMS[cid]
    return to_jsonable({"id": cid, "source": c.source, "claim": c.claim, "verdict": res.verdict,
                        "summary": res.summary, "correction": res.correction, "readings": res.readings,
                        **({"models": res.models} if res.models else {}),
                        "values": res.values, "expected": res.expected, "evidence": res.evidence,
                        "sizes": c.sizes_at(profile)})


# ---------------------------------------------------------------------------------------------------------------------
# the ledger: verdicts and values locked
# ---------------------------------------------------------------------------------------------------------------------


def load_ledger(path: Path | None = None) -> dict[str, dict]:
    """The ledger's entries; an entry in an older format (a bare verdict) counts as missing."""
    path = path or LEDGER
    if not path.exists():
        return {}
    return {cid: e for cid, e in json.loads(path.read_text())["claims"].items() if isinstance(e, dict)}


def ledger_policies(path: Path | None = None) -> list[str] | None:
    """The policy registry the ledger was written with (``None`` for a ledger that did not record it)."""
    path = path or LEDGER
    return json.loads(path.read_text()).get("policies") if path.exists() else None


def registered_policies() -> list[str]:
    """Names of the registered policies, sorted: what a claim that runs "every policy" runs."""
    import policies

    return sorted(info.name for info in policies.all_policies())


def _strings(value: Any):
    """Every key and string inside a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def names_policy(values: Any, name: str) -> bool:
    """True when a key or string of ``values`` is the policy ``name`` or starts with it (``"GD-A (rm)"``)."""
    return any(s == name or s.startswith(name + " ") for s in _strings(values))


def write_ledger(results: dict[str, ClaimResult], profile: Profile, path: Path | None = None) -> Path:
    """Record this run as the expected one (``--write-ledger``): the quick profile locks verdicts and values, the
    full profile its verdicts (beside the quick entries already there)."""
    path = path or LEDGER
    ledger = load_ledger(path)
    for cid, r in results.items():
        entry = ledger.setdefault(cid, {})
        if profile.name == "full":
            entry["full_verdict"] = r.verdict
        else:
            entry.update(verdict=r.verdict, values=to_jsonable(r.values), expected=to_jsonable(r.expected))
    for cid in [c for c in ledger if c not in CLAIMS]:
        del ledger[cid]
    write_text(path, dumps({"about": "expected verdict of every claim (quick: verdict, values, expected; full: "
                                       "full_verdict); python -m paper_check exits 1 and names any difference "
                                       "(rules: VERDICTS.md; regenerate with --write-ledger after review); "
                                       "policies: the registry these values were computed with",
                              "policies": registered_policies(),
                              "claims": dict(sorted(ledger.items()))}) + "\n")
    return path


def value_differences(fresh: Any, locked: Any, where: str = "") -> list[str]:
    """Where two JSON values differ: numbers beyond a relative ``REL_TOL`` (absolute ``ABS_TOL`` near 0), anything
    else exactly (keys, strings, booleans, list lengths)."""
    if isinstance(fresh, dict) and isinstance(locked, dict):
        out = [f"{where}/{k}: only in the ledger" for k in locked if k not in fresh]
        out += [f"{where}/{k}: not in the ledger" for k in fresh if k not in locked]
        for k in fresh:
            if k in locked:
                out += value_differences(fresh[k], locked[k], f"{where}/{k}")
        return out
    if isinstance(fresh, list) and isinstance(locked, list):
        if len(fresh) != len(locked):
            return [f"{where or '/'}: {len(locked)} entries -> {len(fresh)}"]
        return [d for i, (a, b) in enumerate(zip(fresh, locked)) for d in value_differences(a, b, f"{where}/{i}")]
    numbers = is_real(fresh) and is_real(locked)
    same = math.isclose(fresh, locked, rel_tol=REL_TOL, abs_tol=ABS_TOL) if numbers else fresh == locked
    return [] if same else [f"{where or '/'}: {locked!r} -> {fresh!r}"]


def ledger_changes(results: dict[str, ClaimResult], profile: Profile, complete: bool = True,
                   ledger: dict | None = None, known_policies: list[str] | None = None) -> list[str]:
    """Every difference between this run and the ledger, one line each.  ``complete``: the run was meant to cover
    every claim, so a ledger entry that did not run is a difference too.

    Why a claim moved, where the registry says: a policy registered since the ledger was written (``known_policies``,
    by default the ledger's own list) that the claim's values name is given at the end of the claim's line."""
    if ledger is None:
        ledger, known_policies = load_ledger(), ledger_policies()
    added = sorted(set(registered_policies()) - set(known_policies)) if known_policies is not None else []
    key = "full_verdict" if profile.name == "full" else "verdict"
    out = []
    for cid, res in results.items():
        entry = ledger.get(cid)
        if entry is None or key not in entry:
            out.append(f"{cid}: verdict {res.verdict!r} has no ledger entry ({key})")
            continue
        named = [p for p in added if names_policy(res.values, p)]
        why = f" (values name {', '.join(named)}, registered since the ledger was written)" if named else ""
        if entry[key] != res.verdict:
            out.append(f"{cid}: verdict changed from {entry[key]!r} to {res.verdict!r}{why}")
        if profile.name != "full":
            diffs = value_differences(to_jsonable(res.values), entry.get("values"))
            if diffs:
                out.append(f"{cid}: {len(diffs)} values changed, first: {diffs[0]}{why}")
    if complete:
        out += [f"{cid}: in the ledger but did not run" for cid in ledger if cid not in results]
    return out


# ---------------------------------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------------------------------


def real_trace_section(profile: Profile, staging: Staging | None = None) -> dict:
    """Measurements on real attention traces.  The quick profile always reads the committed trace set (so the
    committed report does not depend on the installation); the full profile captures a fresh one into the staging
    directory when the ``[real]`` extra is installed, and says which it used.  The capture loads the model from the
    quality cache's de-quantized copy when that cache is usable (the quality steps of ``--full`` make and use the
    same copy), from the GGUF file otherwise."""
    from realtrace import COMMITTED, COMMITTED_NAME, load_default_traces, load_traceset, real_extra_available
    from realtrace.report import format_report, real_trace_report

    t0 = time.perf_counter()
    if profile.name == "full":
        # the capture lands in the output root as real_traces/; the report names it so, relative to that root
        converted = _model_copy() if staging and real_extra_available() else None
        ts, note = load_default_traces(staging.path("real_traces") if staging else None, shown="real_traces",
                                       converted=converted)
        budgets = (32, 64, 128)
    else:
        ts = load_traceset(COMMITTED)
        note = (f"the committed trace set {COMMITTED_NAME} (the quick profile always reads it; "
                "--full captures a fresh set when the [real] extra is installed), two heads of layers 9 and 19 at "
                "k = 64 (--full: every head, k = 32, 64, 128)")
        keep = [n for n in ts.names() if ts.layers[n] in (9, 19) and ts.heads[n] == "kv0"]
        ts = type(ts)({n: ts.traces[n] for n in keep}, {n: ts.layers[n] for n in keep},
                      {n: ts.heads[n] for n in keep}, ts.segments, ts.meta, COMMITTED_NAME)
        budgets = (64,)
    rep = real_trace_report(ts, note, budgets=budgets)
    progress(f"[real traces] {len(ts.traces)} traces, k = {list(budgets)} ({time.perf_counter() - t0:.1f} s)")
    return {"report": rep, "text": format_report(rep)}


def _model_copy():
    """The quality cache's de-quantized model copy (:meth:`realtrace.quality.cache.Store.model_copy`, made if
    missing), or ``None`` where that cache is unusable (the GGUF file is read then)."""
    from kvcore.errors import ParameterError
    from realtrace.quality.cache import Store, cache_dir

    try:
        return Store(cache_dir()).model_copy()
    except ParameterError:
        return None


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _figure_paths(evidence: dict) -> list[str]:
    fig = evidence.get("figure") or []
    return [p for p in (fig if isinstance(fig, list) else [fig]) if str(p).endswith(".png")]


def render_markdown(profile: Profile, records: list[dict], figures: dict[str, list[str]], changes: list[str],
                    real: dict | None = None) -> str:
    lines = ["# paper_check report", "",
             "Every claim of *KV-Cache Eviction as an Online Caching Problem* (seed 000) and of the block-eviction "
             "figure page (seed 002), recomputed by this toolkit.  Verdicts (rules: `VERDICTS.md`): **holds**, "
             "**holds-with-correction** (the correction is stated), **refuted** (with the counterexample), "
             "**not-reproduced** (with its positive control), **not-checkable** (the missing input is named).  Where "
             "the source reads two ways, the verdict under each reading is given.  Paths are relative to the "
             "repository root (or to the `--out` directory, laid out the same way).", "",
             f"Profile `{profile.name}`: {profile.description}; each claim's sizes are listed with it.", ""]
    counts: dict[str, int] = {}
    for r in records:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines += ["Totals: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), ""]
    if changes:
        lines += ["## Differences from the ledger", ""] + [f"- {c}" for c in changes] + [""]
    lines += ["## Summary", "", "| id | verdict | finding | correction |", "|---|---|---|---|"]
    for r in records:
        lines.append(f"| [{r['id']}](#{r['id']}) | {r['verdict']} | {_cell(r['summary'])} | "
                     f"{_cell(r['correction'])} |")
    lines += ["", "## Details", ""]
    for r in records:
        lines += [f"### {r['id']}", "", f"*Source:* {r['source']}.  *Claim:* {r['claim']}", "",
                  f"**Verdict: {r['verdict']}.** {r['summary']}", ""]
        if r.get("correction"):
            lines += [f"*Correction:* {r['correction']}", ""]
        if r.get("models"):
            names = r["evidence"].get("models", {})
            lines += ["| model | verdict | finding |", "|---|---|---|"]
            lines += [f"| {_cell(names.get(m, m))} | {x['verdict']} | {_cell(x['summary'])} |"
                      for m, x in r["models"].items()]
            lines.append("")
        if r.get("readings"):
            lines += ["| reading | verdict | finding |", "|---|---|---|"]
            lines += [f"| {_cell(name)} | {x['verdict']} | {_cell(x['finding'])} |" for name, x in r["readings"].items()]
            lines.append("")
        if r.get("sizes"):
            lines += ["Sizes: " + ", ".join(f"{k} = {v}" for k, v in r["sizes"].items()), ""]
        for png in _figure_paths(r["evidence"]):
            lines += [f"![{Path(png).stem}](../{png})", ""]
        lines += ["Expected (as the source states it):", "", "```json", dumps(r["expected"]), "```", "",
                  "Computed:", "", "```json", dumps(r["values"]), "```", ""]
        if r["evidence"]:
            lines += ["Evidence: " + "; ".join(f"{k}: `{v}`" for k, v in sorted(r["evidence"].items())), ""]
    if real:
        lines += ["## Real attention traces", "", real["report"]["source"], "", "```", real["text"], "```", ""]
    if figures:
        lines += ["## Figures", ""]
        for fid, paths in figures.items():
            lines.append(f"- {fid}: " + ", ".join(f"`{p}`" for p in paths))
        lines.append("")
    return "\n".join(lines)


def write_report(staging: Staging, profile: Profile, results: dict[str, ClaimResult], figures: dict[str, list[str]],
                 changes: list[str], real: dict | None = None) -> None:
    records = [claim_record(cid, res, profile) for cid, res in results.items()]
    doc = {"profile": profile.as_dict(), "claims": records, "figures": figures, "ledger_changes": changes,
           "real_traces": real["report"] if real else None}
    write_text(staging.path("paper_check/report.json"), dumps(doc) + "\n")
    write_text(staging.path("paper_check/report.md"), render_markdown(profile, records, figures, changes, real))
