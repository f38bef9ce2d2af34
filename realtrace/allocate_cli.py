"""``allocate``: one total memory budget spent over the KV heads of a trace set -- uniform, the exact static optimum
and the dynamic coupled optimum (:mod:`realtrace.allocate`).

    python -m paper_check allocate [--traces DIR] --total B [--json] [--lukv-curve FILE]

Without ``--traces`` it reads the committed trace set.  ``--lukv-curve FILE`` also writes the static optimum as a
kvpress LUKVPress budget curve (``.npy``, shape ``[99, layers, kv_heads]``), atomically.  Bad input: one line, exit
status 2; Ctrl-C: one line, exit status 130 (:mod:`kvcore.command`).
"""

from __future__ import annotations

import argparse
import json
import sys

from kvcore.command import Command, output_file
from kvcore.numbers import whole_number


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--traces", default=None, metavar="DIR",
                    help="trace-set directory (default: the committed realtrace/data/smollm2_recall)")
    ap.add_argument("--total", type=whole_number(1), required=True, metavar="B",
                    help="total slots shared by all heads of the trace set")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--lukv-curve", type=output_file, default=None, metavar="FILE",
                    help="also write the static optimum as a kvpress LUKVPress budget curve (.npy, [99, layers, "
                         "kv_heads] prune ratios)")


def run(args: argparse.Namespace) -> int:
    from . import COMMITTED, COMMITTED_NAME, load_traceset
    from .allocate import allocate, check_total, format_allocation, head_curves, lukv_curve, write_lukv_curve

    ts = load_traceset(COMMITTED if args.traces is None else args.traces)
    if args.traces is None:
        ts.source = COMMITTED_NAME
    check_total(ts, args.total)
    curves = head_curves(ts)
    rep = allocate(ts, args.total, curves)
    if args.lukv_curve is not None:
        curve = lukv_curve(ts, curves)
        write_lukv_curve(args.lukv_curve, curve)
        rep["lukv_curve"] = {"file": str(args.lukv_curve), "shape": list(curve.shape)}
    if args.json:
        print(json.dumps(rep, sort_keys=True))
    else:
        print(format_allocation(rep))
        if args.lukv_curve is not None:
            print(f"LU-KV budget curve {list(curve.shape)} written to {args.lukv_curve}", file=sys.stderr)
    return 0


COMMAND = Command(prog="allocate", description="One total budget over the KV heads of a trace set: uniform, the "
                  "exact static optimum (greedy on the exact convex per-head regret curves) and the dynamic coupled "
                  "optimum (one min-cost flow, all heads sharing the budget at every step), with certificates.",
                  add_arguments=add_arguments, run=run)
