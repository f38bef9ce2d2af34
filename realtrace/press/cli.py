"""``press``: a kvpress press on a trace set against the exact NM optimum, or the leaderboard of all of them.

    python -m realtrace press NAME [--ratio R | --budget K] [--decoding --interval N] [--traces DIR] [--json]
                                   [--rows complete|stored]
    python -m realtrace press --all [--out press_report] [--presses A,B] [--ratios R,R] [--decoding-budgets K,K]

(also ``python -m paper_check press`` and ``python -m realtrace.press``).  One press prints its table per trace
(:func:`realtrace.press.board.format_result`; ``--json``: the whole result); ``--all`` writes the leaderboard
folder (:func:`realtrace.press.board.leaderboard`) and prints its section.  Everything is charged on the complete
attention rows of the full cache by default, or on the trace set's stored rows with ``--rows stored``
(:mod:`realtrace.press.rows`).  Progress goes to stderr.  Bad input
and missing extras: one line, exit status 2 (:mod:`kvcore.command`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kvcore.command import Command, output_dir
from kvcore.errors import ParameterError
from kvcore.numbers import comma_list, decimal, whole_number

from .registry import ALL_DECODING, ALL_PREFILL, DEFAULT_INTERVAL, PRESSES, press_spec
from ..model import add_model_arguments, resolve_model
from .rows import ROW_KINDS


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The press command's options (parsing needs neither torch nor kvpress)."""
    ap.add_argument("name", nargs="?", default=None,
                    help="press: " + ", ".join(s.name for s in PRESSES.values() if not s.needs_curve)
                    + ", LUKV=FILE (LU-KV with a budget curve, e.g. from allocate --lukv-curve FILE; or --all)")
    ap.add_argument("--all", action="store_true",
                    help="the leaderboard: every bridged press at several budgets, figure and table into --out")
    ap.add_argument("--ratio", type=decimal(0.0, 1.0, open_high=True), default=None,
                    help="compression ratio (fraction of the prompt dropped)")
    ap.add_argument("--budget", type=whole_number(1), default=None,
                    help="positions kept: of the prompt (prefill presses) or the cache size after each "
                         "compression (--decoding)")
    ap.add_argument("--decoding", action="store_true", help="wrap the press in kvpress's DecodingPress")
    ap.add_argument("--interval", type=whole_number(1), default=DEFAULT_INTERVAL,
                    help=f"decoding steps between compressions (default {DEFAULT_INTERVAL})")
    ap.add_argument("--prefill", type=whole_number(1), default=None,
                    help="with --decoding: tokens prefilled before streaming (default: the budget)")
    ap.add_argument("--traces", default=None, help="trace-set directory (default: realtrace/data/smollm2_recall)")
    ap.add_argument("--rows", choices=ROW_KINDS, default="complete",
                    help="what is charged: 'complete' (default) the complete attention rows of the full cache, "
                         "recomputed with the model on the set's tokens and checked against its stored entries "
                         "(nothing unattributed); 'stored' the set's top-k rows only, a true regret then lies in "
                         "[regret, regret + unattributed] (for a set too long for complete rows, or not this "
                         "model's capture)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--no-answer", action="store_true", help="skip the greedy answer check")
    ap.add_argument("--out", type=output_dir, default="press_report",
                    help="with --all: the report folder (default press_report)")
    ap.add_argument("--presses", default=None,
                    help="with --all: comma-separated press names, LUKV=FILE included (default: "
                         + ",".join(ALL_PREFILL) + "; those "
                         "among " + ",".join(ALL_DECODING) + " also run decoding)")
    ap.add_argument("--ratios", type=comma_list(decimal(0.0, 1.0, open_high=True)), default="0.5,0.75,0.9,0.95",
                    help="with --all: prefill compression ratios")
    ap.add_argument("--decoding-budgets", type=comma_list(whole_number(1), none=True), default="64,128",
                    help="with --all: DecodingPress sizes ('none' for no decoding runs)")
    add_model_arguments(ap)
    ap.add_argument("--threads", type=whole_number(1), default=1,
                    help="torch threads (default 1: a press run is mostly one-token steps, which a second thread "
                         "slows down on a busy machine)")


def run(args: argparse.Namespace) -> int:
    """Run a parsed press command (module docstring); exit status 0."""
    say = (lambda msg: sys.stderr.write(msg + "\n"))
    model = resolve_model(args.model, args.device)
    if args.all:
        if args.name is not None:
            raise ParameterError("give a press NAME or --all, not both")
        from .board import leaderboard

        specs = [press_spec(n) for n in args.presses.split(",")] if args.presses else []
        names = [s.name if s.curve is None else f"{s.name}={s.curve}" for s in specs] or list(ALL_PREFILL)
        board = leaderboard(args.traces, Path(args.out), threads=args.threads, say=say,
                            ratios=args.ratios, decoding_budgets=args.decoding_budgets,
                            prefill=tuple(names), decoding=tuple(n for n in names if n in ALL_DECODING),
                            rows=args.rows, model=model)
        sys.stdout.write(json.dumps(board["summary"], indent=1) + "\n" if args.json else board["markdown"] + "\n")
        return 0
    if args.name is None:
        raise ParameterError("give a press NAME (or --all)")
    from .board import format_result
    from .run import press_traceset

    res = press_traceset(args.name, args.traces, args.ratio, args.budget, args.decoding, args.interval,
                         args.prefill, not args.no_answer, threads=args.threads, say=say, rows=args.rows,
                         model=model)
    sys.stdout.write((json.dumps(res, indent=1) if args.json else format_result(res)) + "\n")
    return 0


COMMAND = Command(prog="press", description=(
    "Run a kvpress press on a trace set's own tokens and compare the positions it drops with the exact NM optimum "
    "at the same budget; needs the [real] and [kvpress] extras. By default everything is charged on the complete "
    "attention rows of the full cache (one more full-cache pass of the model; nothing unattributed); --rows stored "
    "charges only the trace set's stored entries."), add_arguments=add_arguments,
    run=run)
