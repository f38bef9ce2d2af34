"""Run the claims and figures and write the report (Markdown for people, JSON for machines) and check the ledger.

The ledger (``paper_check/ledger.json``, committed) holds the expected verdict of every claim; a run whose verdict
differs for any claim exits non-zero and names it, so ``python -m paper_check`` is itself a regression check.
Reports hold no timestamps or timings, so two runs with the same inputs write the same bytes; timings go to stderr.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable

from kvcore.errors import ParameterError
from theorems.claims import CLAIMS, ClaimResult, Context, dumps, to_jsonable
from theorems.profile import Profile

PACKAGE_DIR = Path(__file__).resolve().parent
LEDGER = PACKAGE_DIR / "ledger.json"


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


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def run_claims(ids: Iterable[str], ctx: Context) -> dict[str, ClaimResult]:
    results = {}
    ids = list(ids)
    for n, cid in enumerate(ids, 1):
        c = CLAIMS[cid]
        t0 = time.perf_counter()
        res = c.run(ctx)
        progress(f"[claim {n}/{len(ids)}] {cid}: {res.verdict} ({time.perf_counter() - t0:.1f} s)")
        results[cid] = res
    return results


def claim_record(cid: str, res: ClaimResult, profile: Profile) -> dict:
    c = CLAIMS[cid]
    return to_jsonable({"id": cid, "source": c.source, "claim": c.claim, "verdict": res.verdict,
                        "summary": res.summary, "values": res.values, "expected": res.expected,
                        "evidence": res.evidence, "correction": res.correction, "sizes": c.sizes_at(profile)})


def write_ledger(results: dict[str, ClaimResult]) -> Path:
    """Record the verdicts of this run as the expected ones (``--write-ledger``)."""
    write_atomic(LEDGER, dumps({"about": "expected verdict of every claim; python -m paper_check exits 1 and names "
                                         "the claim when a run disagrees (regenerate with --write-ledger)",
                                "claims": {cid: r.verdict for cid, r in results.items()}}) + "\n")
    return LEDGER


def display_path(p: str | Path, out_dir: Path) -> str:
    """A path as the report shows it: relative to the repository or to the output directory, never absolute, so
    the report does not depend on where the checkout lives."""
    p = Path(p).resolve()
    for base in (PACKAGE_DIR.parent, out_dir.resolve()):
        try:
            return str(p.relative_to(base))
        except ValueError:
            continue
    return p.name


def load_ledger() -> dict[str, str]:
    import json

    if not LEDGER.exists():
        return {}
    return json.loads(LEDGER.read_text())["claims"]


def ledger_changes(results: dict[str, ClaimResult]) -> list[str]:
    expected = load_ledger()
    out = []
    for cid, res in results.items():
        want = expected.get(cid)
        if want is None:
            out.append(f"{cid}: verdict {res.verdict!r} has no ledger entry")
        elif want != res.verdict:
            out.append(f"{cid}: verdict changed from {want!r} to {res.verdict!r}")
    return out


def real_trace_section(profile: Profile, out_dir: Path) -> dict:
    """Measurements on real attention traces (issue 7).  The quick profile reads the committed trace set; the full
    profile captures a fresh one into ``out_dir/real_traces`` when the ``[real]`` extra is installed.  Which source
    was used is stated in the section ("FALLBACK: ..." when it is the committed set)."""
    from realtrace import load_default_traces
    from realtrace.report import format_report, real_trace_report

    t0 = time.perf_counter()
    if profile.name == "full":
        ts, note = load_default_traces(out_dir / "real_traces")
        budgets = (32, 64, 128)
    else:
        ts, note = load_default_traces()
        note += "; the quick profile uses two heads of layers 9 and 19 at k = 64 (--full: every head, k = 32, 64, 128)"
        keep = [n for n in ts.names() if ts.layers[n] in (9, 19) and ts.heads[n] == "kv0"]
        ts = type(ts)({n: ts.traces[n] for n in keep}, {n: ts.layers[n] for n in keep},
                      {n: ts.heads[n] for n in keep}, ts.segments, ts.meta, ts.source)
        budgets = (64,)
    rep = real_trace_report(ts, note, budgets=budgets)
    progress(f"[real traces] {len(ts.traces)} traces, k = {list(budgets)} ({time.perf_counter() - t0:.1f} s)")
    return {"report": rep, "text": format_report(rep)}


def render_markdown(profile: Profile, records: list[dict], figures: dict[str, list[str]], changes: list[str],
                    real: dict | None = None) -> str:
    lines = ["# paper_check report", "",
             "Every claim of *KV-Cache Eviction as an Online Caching Problem* (seed 000) and of the block-eviction "
             "figure page (seed 002), recomputed by this toolkit.  Verdicts: **holds**, **holds-with-correction** "
             "(the correction is stated), **refuted** (with the counterexample), **not-checkable** (the missing "
             "input is named).", "",
             f"Profile `{profile.name}`: {profile.description}; each claim's sizes are listed with it.", ""]
    counts: dict[str, int] = {}
    for r in records:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines += ["Totals: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), ""]
    if changes:
        lines += ["## Verdicts that differ from the ledger", ""] + [f"- {c}" for c in changes] + [""]
    lines += ["## Summary", "", "| id | verdict | finding |", "|---|---|---|"]
    for r in records:
        lines.append(f"| [{r['id']}](#{r['id']}) | {r['verdict']} | {r['summary']} |")
    lines += ["", "## Details", ""]
    for r in records:
        lines += [f"### {r['id']}", "", f"*Source:* {r['source']}.  *Claim:* {r['claim']}", "",
                  f"**Verdict: {r['verdict']}.** {r['summary']}", ""]
        if r.get("correction"):
            lines += [f"*Correction:* {r['correction']}", ""]
        if r.get("sizes"):
            lines += ["Sizes: " + ", ".join(f"{k} = {v}" for k, v in r["sizes"].items()), ""]
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


def write_report(out_dir: Path, profile: Profile, results: dict[str, ClaimResult], figures: dict[str, list[str]],
                 real: dict | None = None) -> tuple[Path, Path, list[str]]:
    records = [claim_record(cid, res, profile) for cid, res in results.items()]
    changes = ledger_changes(results)
    doc = {"profile": profile.as_dict(), "claims": records, "figures": figures, "ledger_changes": changes,
           "real_traces": real["report"] if real else None}
    json_path, md_path = out_dir / "report.json", out_dir / "report.md"
    write_atomic(json_path, dumps(doc) + "\n")
    write_atomic(md_path, render_markdown(profile, records, figures, changes, real))
    return md_path, json_path, changes
