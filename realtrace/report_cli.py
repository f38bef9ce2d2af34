"""``report``: every measurement of :mod:`realtrace.analysis` and both experiments of :mod:`realtrace.experiments`
on one trace set, as plain-text tables (:mod:`realtrace.report`).

    python -m realtrace report [DIR] [--budget K ...] [--json FILE]

Without ``DIR`` it uses :func:`realtrace.load_default_traces` (the committed trace set) and the first line says
which source it used.  ``--json FILE`` also writes the whole report, atomically.  Bad input: one line, exit status
2; Ctrl-C: one line, exit status 130 (:mod:`kvcore.command`).
"""

from __future__ import annotations

import argparse
import json
import sys

from kvcore.atomic import write_text
from kvcore.command import Command, output_file
from kvcore.numbers import whole_number

DEFAULT_BUDGETS = (32, 64, 128)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("traceset", nargs="?", default=None, help="trace-set directory (default: committed one)")
    ap.add_argument("--budget", type=whole_number(2), action="append",
                    help="NM budget k (repeatable; default " + " ".join(map(str, DEFAULT_BUDGETS)) + ")")
    ap.add_argument("--json", type=output_file, default=None, help="also write the full report as JSON to this file")


def run(args: argparse.Namespace) -> int:
    """Measure, print the tables, write the JSON when asked; exit status 0."""
    from . import load_default_traces, load_traceset
    from .report import format_report, real_trace_report

    if args.traceset is None:
        ts, note = load_default_traces()
    else:
        ts, note = load_traceset(args.traceset), f"trace set {args.traceset} (given on the command line)"
    rep = real_trace_report(ts, note, tuple(args.budget or DEFAULT_BUDGETS))
    sys.stdout.write(format_report(rep) + "\n")
    if args.json:
        write_text(args.json, json.dumps(rep, indent=1, default=float))
    return 0


COMMAND = Command(prog="report", description="Measurements and experiments on a real trace set.",
                  add_arguments=add_arguments, run=run)
