"""``python -m realtrace.quality.bench_coupled [--prompt NAME] [--budget K] [--opt-top M] [--static] [--json]``:
the dynamic coupled optimum over every layer and KV head of one prompt (issue 31's acceptance figure: all 90
traces of SmolLM2-135M, a 2,000-token prompt, on this 2-core machine), against the per-head optimum ``OPT`` on the
same traces, in one run.

The prompt's full-cache pass gives the complete attention rows of the ``L x H`` traces
(:class:`realtrace.quality.run._Reference`); each is cut to its top ``M`` entries per row with the exact residual
(:func:`realtrace.quality.exact.rows_trace`).  Timed, in CPU seconds of this process (wall in brackets; the machine
is shared, so the ratio is what carries):

* baseline -- ``OPT``'s solves: one certified NM flow per trace at ``K`` (:func:`kvcore.optima.nm_opt`), 90 flows;
* coupled -- one certified min-cost flow over all traces with ``B = K L H`` shared slots and its schedule
  (:func:`kvcore.optima.coupled.coupled_schedule`), then its coupled lazy form
  (:func:`realtrace.quality.schedule.coupled_lazy_drop`);
* with ``--static`` -- the exact static allocation of ``B`` on the certified regret curves, as ``OPT:static`` finds
  it (:func:`kvcore.optima.allocation.certified_allocation`) and by the threshold bisection alone
  (:func:`kvcore.optima.allocation.threshold_allocation`), each on fresh curves, and whether the two agree; the
  per-trace optima at ``k_h`` come on top, about the baseline's cost.

Complete rows are not solved here: their entry count (``L H T (T + 1) / 2``) and the memory of the entries alone are
printed beside the top-``M`` count.  Needs the ``[real]`` extra.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from kvcore.command import Command
from kvcore.numbers import whole_number

from ..model import add_model_arguments, resolve_model

BYTES_PER_ENTRY = 32  # step, token/item, weight, exact integer: four 8-byte arrays per stored entry (entries_of)


def _clock(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, round(time.process_time() - c0, 2), round(time.perf_counter() - w0, 2)


def measure(prompt: str = "needle-2000-d50", budget: int = 128, opt_top: int = 32, static: bool = False,
            threads: int = 1, say=None, model=None) -> dict:
    """The timings of the module docstring, as a dict; ``model``: ``--model`` (default SmolLM2)."""
    from kvcore.optima import nm_opt
    from kvcore.optima.allocation import RegretCurve, certified_allocation, threshold_allocation
    from kvcore.optima.coupled import coupled_schedule
    from ..model import load_model
    from .inputs import check_budgets, tokenize_prompts
    from .prompts import parse_name
    from .run import _Reference
    from .schedule import coupled_lazy_drop

    say = say or (lambda msg: None)
    parse_name(prompt)  # a bad name is one line, before the model loads
    lm = load_model(install=True, threads=threads, say=say, model=model)
    ids = tokenize_prompts([prompt], lm.tokenizer, lm.start)
    check_budgets((budget,), ids)
    say(f"full-cache pass over {ids[0].T} tokens ...")
    ref = _Reference(lm, ids[0], (budget,), [])
    L, H, T = ref.L, ref.H, ref.T
    B = budget * L * H
    traces, cpu, wall = _clock(lambda: [ref.trace(layer, g, opt_top) for layer in range(L) for g in range(H)])
    entries = sum(int((tr.weights > 0).sum()) for tr in traces)
    out = {"prompt": prompt, "tokens": T, "layers": L, "kv_heads": H, "traces": L * H, "budget": budget,
           "total_budget": B, "opt_top": opt_top, "threads": threads, "entries": entries,
           "complete_entries": L * H * T * (T + 1) // 2,
           "complete_entries_gb": L * H * T * (T + 1) // 2 * BYTES_PER_ENTRY / 1e9,
           "traces_s": {"cpu": cpu, "wall": wall}}
    nm_opt(traces[0], 2)  # compile the kernel outside the timings
    say(f"baseline: {L * H} per-trace optima at K = {budget} ...")
    per_head, cpu, wall = _clock(lambda: [nm_opt(tr, budget).cost for tr in traces])
    out["per_head_opt"] = {"cpu": cpu, "wall": wall, "regret": math.fsum(per_head)}
    say(f"  {cpu} s CPU ({wall} s wall)")
    say(f"coupled: one flow over {L * H} traces, B = {B}, {entries:,} entries ...")
    (drops, res), cpu, wall = _clock(lambda: coupled_schedule(traces, B))
    out["coupled"] = {"cpu": cpu, "wall": wall, "regret": res.regret, "solver": res.solver,
                      "certified": res.certified, "gap_bound": res.gap_bound}
    say(f"  {cpu} s CPU ({wall} s wall)")
    _, cpu, wall = _clock(lambda: coupled_lazy_drop(drops, B))
    out["coupled_lazy"] = {"cpu": cpu, "wall": wall}
    out["coupled_vs_per_head_cpu"] = out["coupled"]["cpu"] / out["per_head_opt"]["cpu"]
    if static:
        for key, allocate in (("static_allocation", certified_allocation), ("static_threshold", threshold_allocation)):
            say(f"static: the exact allocation on the regret curves ({allocate.__name__}) ...")
            curves = [RegretCurve(tr) for tr in traces]
            slots, cpu, wall = _clock(lambda: allocate(curves, B, limit=T))
            out[key] = {"cpu": cpu, "wall": wall, "curve_solves": sum(len(c.certificates) for c in curves),
                        "regret": float(sum(c(k) for c, k in zip(curves, slots))), "max_slots": max(slots),
                        "min_slots": min(slots), "slots": slots}
            say(f"  {cpu} s CPU ({wall} s wall), {out[key]['curve_solves']} curve values solved")
        out["static_agree"] = out["static_allocation"]["slots"] == out["static_threshold"]["slots"]
    out["load_average"] = list(os.getloadavg())
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--prompt", default="needle-2000-d50", help="a built-in quality prompt (default needle-2000-d50)")
    ap.add_argument("--budget", type=whole_number(1), default=128,
                    help="K per layer and KV head; the coupled optimum shares K x layers x KV heads (default 128)")
    ap.add_argument("--opt-top", type=whole_number(1), default=32,
                    help="entries per row the optima are solved on (default 32)")
    ap.add_argument("--static", action="store_true", help="also time the exact static allocation")
    ap.add_argument("--threads", type=whole_number(1), default=1, help="torch threads (default 1)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")
    add_model_arguments(ap)


def run(args: argparse.Namespace) -> int:
    res = measure(args.prompt, args.budget, args.opt_top, args.static, args.threads,
                  say=lambda msg: sys.stderr.write(msg + "\n"), model=resolve_model(args.model, args.device))
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
        return 0
    p, c = res["per_head_opt"], res["coupled"]
    lines = [f"{res['prompt']}: {res['tokens']} tokens, {res['traces']} traces ({res['layers']} layers x "
             f"{res['kv_heads']} KV heads), top {res['opt_top']} entries per row: {res['entries']:,} entries "
             f"(complete rows: {res['complete_entries']:,}, {res['complete_entries_gb']:.1f} GB of entries alone)",
             f"  per-head OPT, {res['traces']} flows at K = {res['budget']} (baseline)  {p['cpu']:8.2f} s CPU "
             f"({p['wall']:.2f} s wall)  regret {p['regret']:.4f}",
             f"  coupled optimum, one flow, B = {res['total_budget']}  {c['cpu']:8.2f} s CPU ({c['wall']:.2f} s wall)  "
             f"regret {c['regret']:.4f}  {res['coupled_vs_per_head_cpu']:.2f}x the baseline; {c['solver']}, "
             f"certified {c['certified']}",
             f"  its coupled lazy form  {res['coupled_lazy']['cpu']:.2f} s CPU"]
    for key, how in (("static_allocation", "estimated, certified"), ("static_threshold", "threshold bisection")):
        if key in res:
            s = res[key]
            lines.append(f"  static allocation of B, {how}  {s['cpu']:.2f} s CPU ({s['curve_solves']} curve solves), "
                         f"regret {s['regret']:.4f}, slots {s['min_slots']}..{s['max_slots']}")
    if "static_agree" in res:
        lines.append(f"  the two static allocations are {'the same' if res['static_agree'] else 'DIFFERENT'}")
    lines.append(f"  load average {' '.join(f'{x:.2f}' for x in res['load_average'])}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


COMMAND = Command(prog="python -m realtrace.quality.bench_coupled", description=(
    "Time the dynamic coupled optimum over every layer and KV head of one prompt (one min-cost flow, B = K x layers "
    "x KV heads shared slots) against the per-head optimum at K on the same traces, in one run. Needs the [real] "
    "extra."), add_arguments=add_arguments, run=run)


if __name__ == "__main__":
    from kvcore.command import entry

    entry(COMMAND.prog, lambda: COMMAND.main)
