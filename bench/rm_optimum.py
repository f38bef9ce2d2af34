"""``python -m bench.rm_optimum [--sizes T,...] [--capacity H] [--seed S] [--json]``: the RM optimum's default
solver (the network simplex half by half along the time line, :mod:`kvcore.optima.time_split`) against the previous
default (one network simplex run on the whole network), measured in the same run (issue 30).

For each size ``T`` (default 10^5, 3 x 10^5 and 10^6 requests) the benchmark's weighted Zipf trace
(:func:`bench.workloads.weighted_zipf_trace`: ``T // 10`` items, costs 1..8) is solved with capacity ``H`` (default
1,000) by ``python -m bench.optimum_child rm T H SEED netsimplex`` (new) and ``... netsimplex-whole`` (previous),
each in a fresh process, one after the other.  Printed per size: CPU and wall seconds of each solve (the solving
process's own, interpreter start and trace generation excluded), the ratios new / previous, whether the two costs are
equal, and the load average before and after the pair (the machine is shared: CPU seconds stretch less than wall
seconds under load, and the ratio, measured under the same load, is what carries across machines).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench import e2e
from kvcore.command import Command
from kvcore.numbers import comma_list, whole_number

DEFAULT_SIZES = (100_000, 300_000, 1_000_000)
SOLVERS = {"new": "netsimplex", "previous": "netsimplex-whole"}


def measure(sizes, capacity: int, seed: int, timeout: float = 3600.0, say=lambda msg: None) -> dict:
    rows = []
    for T in sizes:
        row = {"T": T, "capacity": capacity, "load_before": list(os.getloadavg())}
        for name, solver in SOLVERS.items():
            say(f"T = {T}: {name} ({solver})")
            out, _ = e2e.run_json("bench.optimum_child", "rm", str(T), str(capacity), str(seed), solver,
                                  timeout=timeout)
            if "error" in out:
                raise RuntimeError(f"T = {T}, {solver}: {out['error']}")
            row[name] = out
        row["load_after"] = list(os.getloadavg())
        new, old = row["new"], row["previous"]
        row.update(cpu_ratio=new["cpu_seconds"] / old["cpu_seconds"], wall_ratio=new["seconds"] / old["seconds"],
                   same_cost=new["cost"] == old["cost"], certified=new["certified"] and old["certified"])
        rows.append(row)
    return {"seed": seed, "rows": rows}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--sizes", type=comma_list(whole_number(1)), default=DEFAULT_SIZES,
                    help="trace lengths T (default 100000,300000,1000000)")
    ap.add_argument("--capacity", type=whole_number(1), default=1000, help="cache size h (default 1000)")
    ap.add_argument("--seed", type=whole_number(0), default=0, help="trace seed (default 0)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")


def run(args: argparse.Namespace) -> int:
    res = measure(args.sizes, args.capacity, args.seed, say=lambda msg: sys.stderr.write(msg + "\n"))
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
        return 0
    lines = [f"RM optimum, weighted Zipf trace (seed {args.seed}), h = {args.capacity}: new (time split) / previous "
             "(whole network), CPU seconds (wall)"]
    for r in res["rows"]:
        new, old = r["new"], r["previous"]
        lines.append(f"  T = {r['T']:>9,}  new {new['cpu_seconds']:7.1f} s ({new['seconds']:6.1f} s)  previous "
                     f"{old['cpu_seconds']:7.1f} s ({old['seconds']:6.1f} s)  new / previous {r['cpu_ratio']:.3f} CPU, "
                     f"{r['wall_ratio']:.3f} wall  same cost: {r['same_cost']} ({new['cost']:.0f})  load "
                     f"{r['load_before'][0]:.2f} -> {r['load_after'][0]:.2f}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


COMMAND = Command(prog="python -m bench.rm_optimum", description=(
    "Time the exact RM optimum's default solver (network simplex half by half along the time line) against the "
    "previous default (one simplex run on the whole network) on the benchmark's weighted Zipf traces, each solve in "
    "a fresh process, in one run; prints CPU and wall seconds, the ratios new / previous and whether the costs "
    "agree."), add_arguments=add_arguments, run=run)


if __name__ == "__main__":
    from kvcore.command import entry

    entry(COMMAND.prog, lambda: COMMAND.main)
