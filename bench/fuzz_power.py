"""The fuzzer-power benchmark (issue 32): ``python -m bench.fuzz_power [--seconds S] [--only NAME ...] [--json]``.

How well does ``python -m verify`` (the fuzzer, mounted as ``paper_check fuzz``) find what is there to find?  Every
policy of :data:`SUITE` -- sound ones whose worst ratio is known, and policies with known or planted flaws
(:mod:`bench.power_policies`, loaded by ``module:Class`` like a user's policy, never registered) -- is fuzzed with
the default options (``--seconds 60``, ``--examples 300``, seed 0) through the real command line, each in its own
process, one after the other.  For each: the value found against the true one, the verdict against the expected
one, the time to the first violation, the longest trace measured, and the shrunk counterexample's length.  Exit
status 1 when a flawed policy is not flagged or a sound one is (a false alarm at the bound), else 0.

Not a test: a full run takes several minutes (every sound policy spends its whole budget).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kvcore.command import Command
from kvcore.errors import ParameterError
from kvcore.numbers import decimal

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    """One policy of the suite: what is fuzzed and what is known about it."""

    name: str
    target: str
    k: int
    model: str
    truth: str          # the true worst value, as known
    flawed: bool        # must be flagged (else: must pass)


SUITE = (
    Case("LRU", "LRU", 3, "rm", "3 (= k, approached by the cyclic sequence)", False),
    Case("FIFO", "FIFO", 3, "rm", "3 (= k)", False),
    Case("MarkingFIFO", "bench.power_policies:MarkingFIFO", 3, "rm", "at most 3 (a marking policy)", False),
    Case("Clock-new-referenced", "Clock-new-referenced", 3, "rm", "at most 3 (conservative)", False),
    Case("Clock-new-unreferenced", "Clock-new-unreferenced", 3, "rm", "at least 16/5 (second_chance_breaker)", True),
    Case("LIFO", "LIFO", 3, "rm", "unbounded", True),
    Case("LFU", "LFU", 3, "rm", "unbounded", True),
    Case("LateLIFO", "bench.power_policies:LateLIFO", 3, "rm",
         "unbounded, after 5000 evictions (LRU before: 3)", True),
    Case("PeriodicMRU", "bench.power_policies:PeriodicMRU", 3, "rm", "above 3 (one eviction in 5 is MRU)", True),
    Case("StickyResidue", "bench.power_policies:StickyResidue", 3, "rm", "above 3 (ids = 11 mod 16 pinned)", True),
    Case("LargeIdMRU", "bench.power_policies:LargeIdMRU", 3, "rm", "unbounded (MRU once an id >= 10^6 is LRU)",
         True),
    Case("R-LRU-H", "R-LRU-H", 4, "nm", "<= 0 inside the premise (Theorem 4)", False),
    Case("LateHeavyDrop", "bench.power_policies:LateHeavyDrop", 4, "nm",
         "above 0 once it drops heavy tokens (after 2000 evictions)", True),
)


def fuzz_case(case: Case, seconds: float) -> dict:
    """Fuzz ``case`` through ``python -m verify ... --json`` in a fresh process (run from the project root, so
    ``bench.power_policies`` imports); the report's fields plus the wall time and the expected verdict."""
    with tempfile.TemporaryDirectory(prefix="kv-fuzz-power-") as out:
        cmd = [sys.executable, "-m", "verify", case.target, "--capacity", str(case.k), "--model", case.model,
               "--seconds", repr(seconds), "--out", out, "--json"]
        t0 = time.monotonic()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=seconds + 120)
        wall = time.monotonic() - t0
    if p.returncode not in (0, 1):
        raise ParameterError(f"fuzzing {case.name}: exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    rep = json.loads(p.stdout)
    flagged = p.returncode == 1
    return {"case": case.name, "target": case.target, "k": case.k, "model": case.model, "truth": case.truth,
            "flawed": case.flawed, "flagged": flagged, "as_expected": flagged == case.flawed,
            "verdict": rep["verdict"], "found": rep["worst"], "bound": rep["bound"] if rep["mode"] == "bound" else 0.0,
            "found_by": rep["worst_source"], "first_violation_seconds": rep["first_violation_seconds"],
            "longest_trace": rep["longest_trace"], "shrunk_length": rep["shrunk_length"],
            "shrunk_minimal": rep["shrunk_minimal"], "seconds": round(wall, 1)}


def _fmt(x) -> str:
    if x is None:
        return "-"
    return x if isinstance(x, str) else f"{x:.4g}"


def print_table(rows: list[dict], seconds: float) -> None:
    print(f"fuzzer power: python -m verify TARGET --capacity K --model M --seconds {seconds:g} (defaults otherwise)")
    print(f"{'policy':<24}{'model':<6}{'k':>2}  {'found':>9} {'bound':>6}  {'first found':>11}  {'longest':>8}  "
          f"{'shrunk':>10}  {'wall':>6}  verdict (expected)   true worst value")
    for r in rows:
        first = "-" if r["first_violation_seconds"] is None else f"{r['first_violation_seconds']:.1f} s"
        shrunk = "-" if r["shrunk_length"] is None else (
            f"{r['shrunk_length']}" + (" min" if r["shrunk_minimal"] else " cut"))
        expect = "flag" if r["flawed"] else "pass"
        ok = "ok" if r["as_expected"] else "WRONG"
        print(f"{r['case']:<24}{r['model']:<6}{r['k']:>2}  {_fmt(r['found']):>9} {_fmt(r['bound']):>6}  "
              f"{first:>11}  {r['longest_trace']:>8}  {shrunk:>10}  {r['seconds']:>4.0f} s  "
              f"{r['verdict']} ({expect}: {ok})   {r['truth']}")
        if r["found_by"]:
            print(f"{'':<24}found by {r['found_by']}")


def add_arguments(p) -> None:
    p.add_argument("--seconds", type=decimal(0.0, 1e6, open_low=True), default=60.0,
                   help="the fuzzer's --seconds for every policy (default 60, the fuzzer's default)")
    p.add_argument("--only", nargs="+", metavar="NAME", choices=[c.name for c in SUITE], default=None,
                   help="fuzz only these policies of the suite")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def run(args) -> int:
    rows = [fuzz_case(c, args.seconds) for c in SUITE if args.only is None or c.name in args.only]
    if args.json:
        print(json.dumps({"seconds": args.seconds, "rows": rows}))
    else:
        print_table(rows, args.seconds)
    return 0 if all(r["as_expected"] for r in rows) else 1


COMMAND = Command(prog="python -m bench.fuzz_power", description=(
    "Fuzz policies with known worst ratios or planted flaws with the fuzzer's defaults and report, for each, the "
    "value found against the true one, the time to the first violation and whether the verdict is the expected "
    "one (exit 1 if not)."), add_arguments=add_arguments, run=run)


if __name__ == "__main__":
    from kvcore.command import entry

    entry(COMMAND.prog, lambda: COMMAND.main)
