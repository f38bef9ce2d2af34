"""``python -m realtrace.quality.bench_coupled [--prompt NAME] [--budget K] [--opt-top M] [--static] [--json]``:
the dynamic coupled optimum over every layer and KV head of one prompt on complete rows (issue 52's acceptance
figure: all 90 traces of SmolLM2-135M, a 2,000-token prompt, on this 2-core machine), against the per-head optimum
``OPT`` on the same rows, in one run.

The prompt's full-cache pass gives the complete attention rows of the ``L x H`` traces
(:class:`realtrace.quality.run._Reference`); each priced solve holds them while it runs
(:mod:`kvcore.optima.dual_start`), the per-head optima make each head's once.  Timed, in CPU seconds
of this process (wall in brackets; the machine is shared, so CPU is what carries):

* baseline -- ``OPT``'s solves: each trace's exact NM optimum at ``K`` on its complete rows
  (:func:`realtrace.quality.exact.lazy_optima`), 90 solves;
* coupled -- the certified coupled optimum with ``B = K L H`` shared slots, priced on complete rows until no exit
  prices out (:func:`realtrace.quality.optima.priced_optima`, :mod:`kvcore.optima.priced`), with its certificate;
* with ``--static`` -- the exact static split of ``B`` (``OPT:static``: one-head priced solves at each trace's share,
  the split moved by shortest paths and certified by the exchange condition, :mod:`kvcore.optima.static_split`).

With ``--opt-top M`` each optimum is instead one solve on the ``M`` heaviest entries per row with complete costs,
uncertified, and its Lagrangian lower bound on the complete rows (what ``quality --opt-top M`` reports).  Peak memory
is not measured here: run the command under ``/usr/bin/time -v``.  Needs the ``[real]`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from kvcore.command import Command
from kvcore.numbers import whole_number

from ..model import add_model_arguments, resolve_model


def _clock(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, round(time.process_time() - c0, 2), round(time.perf_counter() - w0, 2)


def measure(prompt: str = "needle-2000-d50", budget: int = 128, opt_top: int | None = None, static: bool = False,
            threads: int = 1, say=None, model=None) -> dict:
    """The timings of the module docstring, as a dict; ``model``: ``--model`` (default SmolLM2)."""
    from ..model import load_model
    from .exact import lazy_optima
    from .inputs import check_budgets, tokenize_prompts
    from .optima import priced_optima
    from .prompts import parse_name
    from .run import _Reference

    say = say or (lambda msg: None)
    parse_name(prompt)  # a bad name is one line, before the model loads
    lm = load_model(install=True, threads=threads, say=say, model=model)
    ids = tokenize_prompts([prompt], lm.tokenizer, lm.start)
    check_budgets((budget,), ids)
    say(f"full-cache pass over {ids[0].T} tokens ...")
    ref = _Reference(lm, ids[0], (budget,), [])
    L, H, T = ref.L, ref.H, ref.T
    B = budget * L * H
    out = {"prompt": prompt, "tokens": T, "layers": L, "kv_heads": H, "traces": L * H, "budget": budget,
           "total_budget": B, "opt_top": opt_top, "threads": threads,
           "complete_entries": L * H * T * (T + 1) // 2}
    say(f"baseline: {L * H} per-trace optima at K = {budget} ...")
    lower, cpu, wall = _clock(lambda: [lazy_optima(ref.rows(layer, g), (budget,), opt_top)[0][1]
                                       for layer in range(L) for g in range(H)])
    out["per_head_opt"] = {"cpu": cpu, "wall": wall, "regret": sum(lower)}  # the exact optima on complete rows
    say(f"  {cpu} s CPU ({wall} s wall)")
    for kind in ("coupled", "static") if static else ("coupled",):
        say(f"{kind}: one flow over {L * H} traces, B = {B}, priced on complete rows ...")
        res, cpu, wall = _clock(lambda: priced_optima(ref, budget, opt_top, kind))
        out[kind] = {"cpu": cpu, "wall": wall, "regret": res.regret, "certified": res.certificate.certified,
                     "certificate": res.certificate.as_dict()}
        if res.slots is not None:
            out[kind] |= {"min_slots": min(res.slots), "max_slots": max(res.slots)}
        say(f"  {cpu} s CPU ({wall} s wall), {res.certificate.rounds} rounds")
    out["coupled_vs_per_head_cpu"] = out["coupled"]["cpu"] / out["per_head_opt"]["cpu"]
    out["load_average"] = list(os.getloadavg())
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--prompt", default="needle-2000-d50", help="a built-in quality prompt (default needle-2000-d50)")
    ap.add_argument("--budget", type=whole_number(1), default=128,
                    help="K per layer and KV head; the coupled optimum shares K x layers x KV heads (default 128)")
    ap.add_argument("--opt-top", type=whole_number(1), default=None,
                    help="one uncertified solve on the M heaviest entries per row with its Lagrangian bound "
                         "(default: complete rows, priced until certified)")
    ap.add_argument("--static", action="store_true", help="also time the exact static optimum (OPT:static)")
    ap.add_argument("--threads", type=whole_number(1), default=1, help="torch threads (default 1)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")
    add_model_arguments(ap)


def run(args: argparse.Namespace) -> int:
    res = measure(args.prompt, args.budget, args.opt_top, args.static, args.threads,
                  say=lambda msg: sys.stderr.write(msg + "\n"), model=resolve_model(args.model, args.device))
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
        return 0
    p = res["per_head_opt"]
    rows = "complete rows" if res["opt_top"] is None else f"top {res['opt_top']} entries per row, complete costs"
    lines = [f"{res['prompt']}: {res['tokens']} tokens, {res['traces']} traces ({res['layers']} layers x "
             f"{res['kv_heads']} KV heads), {rows} ({res['complete_entries']:,} entries in complete rows)",
             f"  per-head OPT, {res['traces']} optima at K = {res['budget']} (baseline)  {p['cpu']:8.2f} s CPU "
             f"({p['wall']:.2f} s wall)  regret {p['regret']:.4f}"]
    for kind in ("coupled", "static"):
        if kind in res:
            c = res[kind]
            cert = c["certificate"]
            split = f", slots {c['min_slots']}..{c['max_slots']}" if "min_slots" in c else ""
            lines.append(f"  {kind} optimum, B = {res['total_budget']}  {c['cpu']:8.2f} s CPU "
                         f"({c['wall']:.2f} s wall)  regret {c['regret']:.4f}{split}; {cert['rounds']} pricing rounds, certified "
                         f"{c['certified']}, lower bound {cert['lower_bound']:.4f}")
    lines.append(f"  load average {' '.join(f'{x:.2f}' for x in res['load_average'])}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


COMMAND = Command(prog="python -m realtrace.quality.bench_coupled", description=(
    "Time the dynamic coupled optimum over every layer and KV head of one prompt on complete rows (one min-cost "
    "flow, B = K x layers x KV heads shared slots, priced until certified) against the per-head optimum at K on the "
    "same rows, in one run. Needs the [real] extra."), add_arguments=add_arguments, run=run)


if __name__ == "__main__":
    from kvcore.command import entry

    entry(COMMAND.prog, lambda: COMMAND.main)
