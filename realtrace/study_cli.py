"""``study``: every layer and KV head of trace sets against the exact NM optimum and every registered NM policy, at
several budgets, as parallel tasks (:mod:`realtrace.study`); the files go to ``--out``
(:func:`realtrace.study_figures.write_study`).

    python -m realtrace study --traces DIR [--traces DIR ...] --budgets 256,512,1024 --out OUT
                              [--workers N | --scheduler ADDRESS] [--seeds S] [--json] [--timings FILE]

stdout: the Markdown tables (``--json``: the study); stderr: progress and the timings.  Bad input: one line, exit
status 2; Ctrl-C: exit 130 (:mod:`kvcore.command`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kvcore.command import Command, output_dir, output_file
from kvcore.numbers import comma_list, decimal, whole_number


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--traces", action="append", required=True, metavar="DIR",
                    help="trace-set directory (repeatable)")
    ap.add_argument("--budgets", type=comma_list(whole_number(None)), default="256,512,1024",
                    help="NM budgets k, comma-separated (default 256,512,1024)")
    ap.add_argument("--seeds", type=whole_number(None), default=5, help="runs of each randomized policy (default 5)")
    ap.add_argument("--windows", type=comma_list(whole_number(None)), default="32,256,2048",
                    help="persistence windows W (default 32,256,2048)")
    ap.add_argument("--tau", type=decimal(0.0, 1.0, open_low=True), default=0.05,
                    help="heavy threshold for persistence (default 0.05)")
    ap.add_argument("--rho", type=decimal(0.0, 1.0, open_low=True), default=0.5,
                    help="persistence factor rho (default 0.5)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--workers", type=whole_number(None), default=None,
                       help="local Dask worker processes (default: one per core; 0 or 1 runs serially)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run on an existing Dask cluster, e.g. tcp://host:8786 (workers must see the trace paths)")
    ap.add_argument("--out", type=output_dir, required=True, metavar="DIR",
                    help="directory for study.json, study.md and figures")
    ap.add_argument("--no-figures", action="store_true", help="skip the figures")
    ap.add_argument("--json", action="store_true", help="print the study as JSON instead of the Markdown tables")
    ap.add_argument("--timings", type=output_file, default=None, metavar="FILE",
                    help="also write the timings as JSON to FILE")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    """Run the study, write its files, print the tables and the timings; exit status 0."""
    from kvcore.atomic import write_text

    from .study import StudyParams, format_markdown, run_study
    from .study_figures import write_study

    prog = getattr(args, "command_prog", COMMAND.prog)
    params = StudyParams(args.budgets, args.seeds, args.tau, args.rho, args.windows)
    out = Path(args.out)
    study, timings = run_study(args.traces, params, workers=args.workers, scheduler=args.scheduler,
                               progress=not args.quiet)
    write_study(study, out, figures=not args.no_figures)
    if args.timings:
        write_text(Path(args.timings), json.dumps(timings, indent=1) + "\n")
    for part, t in timings.items():
        if part == "wall":
            sys.stderr.write(f"{prog}: wall {t['seconds']:.1f} s\n")
        else:
            sys.stderr.write(f"{prog}: {part}: {t['tasks']} tasks, mean {t['mean']:.2f} s, max {t['max']:.2f} s, "
                             f"total {t['total']:.1f} s\n")
    sys.stdout.write(json.dumps(study, indent=1) + "\n" if args.json else format_markdown(study))
    return 0


COMMAND = Command(prog="study", description="Every layer and KV head of trace sets against the exact NM optimum and "
                  "every registered NM policy, at several budgets, as parallel tasks.", add_arguments=add_arguments,
                  run=run)
