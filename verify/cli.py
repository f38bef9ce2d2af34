"""The fuzz command line: ``python -m verify TARGET --capacity K ...`` (mounted by ``paper_check`` as
``paper_check fuzz``: both run :data:`COMMAND`).

Exit status (:mod:`kvcore.command`): 0 no violation found (or ``inconclusive``: nothing finished within the
budget), 1 a finding about the policy (its bound is exceeded, it is worse than the reference, a contract violation,
it raised, it did not answer in time), 2 bad input (one line on stderr: an option, a target that cannot be
imported, an unusable ``--out``), 3 an internal error of the fuzzer, 130 interrupted (Ctrl-C).  Every option is
parsed strictly: ``1_000``, ``+3``, ``nan`` or ``inf`` are refused, nothing is coerced.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kvcore.command import Command, output_dir
from kvcore.errors import ParameterError
from kvcore.numbers import decimal, whole_number

DEFAULT_OUT = "fuzz-counterexamples"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The fuzz options, on any parser (``paper_check fuzz`` or ``python -m verify``)."""
    p.add_argument("target", help="registered policy name (case-insensitive), module:Class importable from the "
                                  "current directory, or path/to/file.py:Class (the last two run in their own "
                                  "process, isolated from the engine)")
    p.add_argument("--capacity", "-k", type=whole_number(1), required=True, help="cache size k")
    p.add_argument("--model", choices=("rm", "nm"), default="rm",
                   help="rm: ALG/OPT within the policy's promised bound (default); nm: NM regret within the tail "
                        "mass on traces inside Theorem 4's corrected premise")
    p.add_argument("--against", metavar="NAME", default=None,
                   help="instead: search where the target is worse than this policy, maximising (cost - "
                        "reference cost) / max(OPT cost, 0.05), and shrink that trace")
    p.add_argument("--examples", type=whole_number(1), default=300, help="targeted-search examples (default 300)")
    p.add_argument("--seconds", type=decimal(0.0, 1e6, open_low=True), default=60.0,
                   help="wall-clock budget for everything: constructions, search, shrinking (default 60)")
    p.add_argument("--call-timeout", type=decimal(0.0, 1e6, open_low=True), default=2.0,
                   help="seconds the policy may take to answer one call (default 2)")
    p.add_argument("--seed", type=whole_number(0), default=0, help="search seed (default 0): same seed, same search")
    p.add_argument("--rho", type=decimal(0.0, 1.0, open_low=True), default=None,
                   help="--model nm premise: warm = >= rho*tau (default 0.5)")
    p.add_argument("--W", type=whole_number(1), default=None,
                   help="--model nm premise: chain gap and window (default 4)")
    p.add_argument("--tau", type=decimal(0.0, 1.0, open_low=True), default=None,
                   help="--model nm premise: heavy = >= tau (default 0.25)")
    p.add_argument("--out", type=output_dir, default=None, metavar="DIR",
                   help=f"folder for the counterexample files, created before the search (default: ./{DEFAULT_OUT}, "
                        f"created only when something is found); nothing is written unless something is found")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Fuzz the target of parsed ``args``, write the counterexample files when something is found, print the
    report; returns the report's exit status (module docstring).  Bad input raises a ParameterError."""
    from .config import Premise
    from .fuzz import fuzz_policy
    from .outputs import format_report, prepare_out_dir, write_outputs

    premise_given = {n: getattr(args, n) for n in ("rho", "W", "tau") if getattr(args, n) is not None}
    if premise_given and (args.model != "nm" or args.against):
        raise ParameterError(f"--{'/--'.join(premise_given)}: the premise options apply to --model nm without "
                             f"--against only")
    premise = Premise(**premise_given)
    if args.out is not None:
        out = prepare_out_dir(args.out)
    else:  # the default folder is created only when there is something to write; its parent must be writable
        out = Path(DEFAULT_OUT)
        if not os.access(".", os.W_OK) or (out.exists() and not out.is_dir()):
            raise ParameterError(f"--out: cannot write {out.resolve()} (give --out DIR)")
    rep = fuzz_policy(args.target, args.capacity, args.model, args.examples, args.seconds, args.seed, None,
                      against=args.against, premise=premise, call_timeout=args.call_timeout,
                      started=_budget_start())
    if rep.has_counterexample:
        write_outputs(rep, prepare_out_dir(out))
    print(json.dumps(rep.as_dict(), sort_keys=True) if args.json else format_report(rep), flush=True)
    return rep.exit_code


def _budget_start() -> float | None:
    """Run as a command line (``python -m verify``, ``python -m paper_check fuzz``), the budget counts from the
    process's start, so ``--seconds`` bounds the whole run, imports included; called from Python (a test, a
    library), from now (``None``)."""
    from .supervisor import process_started

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return process_started() if spec is not None and spec.name in COMMAND_MAINS else None


COMMAND_MAINS = ("verify.__main__", "paper_check.__main__")

COMMAND = Command(prog="python -m verify",
                  description="Search for traces on which a policy breaks its promised bound: the known "
                              "constructions, then a targeted hypothesis search and shrinking, within a wall-clock "
                              "budget (see verify/fuzz.py).",
                  add_arguments=add_arguments, run=run, internal_error=True)


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)


__all__ = ["COMMAND", "DEFAULT_OUT", "add_arguments", "main", "run"]
