"""``python -m realtrace.quality.bench [--tokens N] [--budget K] [--repeats R] [--threads N] [--model M] [--json]``:
the cost of a masked replay pass and of a closed-loop pass against a plain forward pass of the same model
(``--model``, default SmolLM2) on the same tokens, measured in one run.

Issue 20 asks for a masked teacher-forced pass over 2k tokens with all 30 layers to cost at most 4x a plain forward
pass.  Timed here, each the median of ``--repeats`` runs (after one warm-up run of each, so that allocator and
kernel start-up costs are not charged to whichever runs first):

* ``plain sdpa`` / ``plain eager`` -- the model's own forward (no cache, no LM head) with transformers' ``sdpa`` and
  ``eager`` attention (the capture runs ``eager``; ``sdpa`` is the faster baseline, so the ratio against it is the
  conservative one);
* ``masked`` -- :func:`realtrace.quality.replay.replay` with an open-loop schedule that drops something on every
  layer and KV head: a sinks-plus-window schedule of ``--budget`` positions (4 sinks, the rest the most recent
  tokens, drops ``drop[i] = i + K - 4`` for ``i >= 4``), so every head takes the masked path and also records its
  attention-output error and displaced mass.  A schedule's content does not change the cost: the mask is dense;
* ``closed H2O, compiled`` -- the same pass with H2O at ``--budget`` in closed loop
  (:class:`realtrace.quality.replay.ClosedLoop`): every layer also computes the scaled products at and below the
  diagonal (:func:`realtrace.quality.replay.causal_scores`) and runs H2O for all
  KV heads in the compiled kernel of :mod:`kvcore.closed_loop` (issue 30's goal: at most 3x the plain pass);
* ``closed H2O, Python`` -- the same with ``compiled=False``: one H2O object per layer and KV head through the
  checked engine, as every policy without a compiled rule runs.  Timed once, after the compiled runs (so nothing is
  compiled inside it); its schedule must equal the compiled one (checked, reported as ``same_schedule``).
  ``H2O decisions alone``: the time both spend in :meth:`~realtrace.quality.replay.ClosedLoop.layer_drops` (the
  policy's decisions for all KV heads, given the layer's scaled products), in the same runs.

* ``plain sdpa, batch of 4`` -- the plain forward over 4 copies of the tokens in the batch dimension, per sequence
  against one sequence: whether several schedules in one batched pass would pay (issue 30 item 2);
* charging one schedule on the complete full-cache rows of every layer and KV head (its regret and value-weighted
  cost, :func:`realtrace.quality.charges.charged`): ``rows and value costs`` (computed once per prompt for all its
  runs since issue 30, once per run before), and the charge itself, as the plain sum of the lost entries
  (:func:`realtrace.quality.exact.charge`, before) and as row total minus kept mass
  (:func:`realtrace.quality.exact.charge_many`); both charge the closed-loop H2O schedule, and must agree
  (``same_charges``: to a few eps of the row totals);
* the exact optimum of layer 10's KV heads on their complete rows at the acceptance sweep's budgets 32, 64, 128 and
  256 (:func:`realtrace.quality.exact.lazy_optima`): by column generation, as the sweep solves it (the simplex starts
  from each step's heaviest exits, :func:`kvcore.optima.nm_flow.heaviest`), and with every exit from the start;
  both must give the same schedules and costs (``same_optimum``).

Issue 20 set the masked pass's goal, issue 30 the closed loop's.

The tokens are the built-in prompt ``needle-N-d50`` (:mod:`realtrace.quality.prompts`) with ``N = --tokens``.  The
ratio, not the seconds, is what carries across machines and load; the machine's load average is printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from kvcore.command import Command
from kvcore.errors import ParameterError
from kvcore.numbers import whole_number

from ..model import add_model_arguments, resolve_model

SINKS = 4
BATCH = 4  # copies in the batched plain pass
OPT_LAYER, OPT_BUDGETS = 10, (32, 64, 128, 256)  # the exact optimum timed: one layer's KV heads, the sweep's budgets


def window_schedule(layers: int, heads: int, T: int, budget: int) -> np.ndarray:
    """Drops ``(layers, heads, T)`` of 4 sinks plus a window: ``drop[i] = i + K - 4`` (capped at ``T``) for
    ``i >= 4``, never for the sinks, so ``|R_t| = K`` once ``t >= K - 1``."""
    if not SINKS < budget < T:
        raise ParameterError(f"--budget {budget}: must lie between {SINKS + 1} and the token count {T - 1}")
    i = np.arange(T)
    drop = np.where(i < SINKS, T, np.minimum(i + budget - SINKS, T))
    return np.broadcast_to(drop, (layers, heads, T)).copy()


def _median_seconds(fn, repeats: int, warm_up: bool = True) -> float:
    if warm_up:
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(tokens: int = 2000, budget: int = 128, repeats: int = 3, threads: int = 1, say=None,
            model=None) -> dict:
    """The timings and ratios of the module docstring, as a dict; ``model``: ``--model`` (default SmolLM2)."""
    from policies import resolve

    from ..model import load_model
    from .replay import ClosedLoop, OpenLoop, replay
    from .run import tokenize_prompts

    say = say or (lambda msg: None)
    lm = load_model(install=True, threads=threads, say=say, model=model)
    ids = list(tokenize_prompts([f"needle-{tokens}-d50"], lm.tokenizer, lm.start)[0].ids)
    cfg = lm.model.config
    L, H, T = cfg.num_hidden_layers, cfg.num_key_value_heads, len(ids)
    plan = OpenLoop(window_schedule(L, H, T, budget))
    out = {"tokens": T, "layers": L, "kv_heads": H, "budget": budget, "repeats": repeats, "threads": threads}
    for impl in ("sdpa", "eager"):
        lm.model.set_attn_implementation(impl)
        say(f"plain forward ({impl}) ...")
        out[f"plain_{impl}_s"] = _median_seconds(lambda: lm.forward(ids, body_only=True), repeats)
    say("masked replay ...")
    out["masked_s"] = _median_seconds(lambda: replay(lm, ids, plan, L, H), repeats)
    out["ratio_vs_sdpa"] = out["masked_s"] / out["plain_sdpa_s"]
    out["ratio_vs_eager"] = out["masked_s"] / out["plain_eager_s"]
    closed, policy_s = {}, {True: [], False: []}

    def closed_pass(compiled: bool):
        loop = closed[compiled] = ClosedLoop(resolve("H2O"), budget, compiled=compiled)
        decide = loop.layer_drops

        def timed_layer(*args):  # the policy's share of the pass: its decisions for all KV heads of a layer
            t0 = time.perf_counter()
            drops = decide(*args)
            policy_s[compiled][-1] += time.perf_counter() - t0
            return drops

        loop.layer_drops = timed_layer
        policy_s[compiled].append(0.0)
        replay(lm, ids, loop, L, H)

    say("closed-loop H2O, compiled ...")
    out["closed_compiled_s"] = _median_seconds(lambda: closed_pass(True), repeats)
    say("closed-loop H2O, Python (one run) ...")
    out["closed_python_s"] = _median_seconds(lambda: closed_pass(False), 1, warm_up=False)
    out["closed_ratio_vs_sdpa"] = out["closed_compiled_s"] / out["plain_sdpa_s"]
    out["closed_python_ratio_vs_sdpa"] = out["closed_python_s"] / out["plain_sdpa_s"]
    out["closed_speedup"] = out["closed_python_s"] / out["closed_compiled_s"]
    out["policy_compiled_s"] = statistics.median(policy_s[True][1:])
    out["policy_python_s"] = policy_s[False][0]
    out["policy_speedup"] = out["policy_python_s"] / out["policy_compiled_s"]
    out["same_schedule"] = all(np.array_equal(closed[True].drops[layer], closed[False].drops[layer])
                               for layer in range(L))
    say(f"plain forward (sdpa), a batch of {BATCH} ...")
    lm.model.set_attn_implementation("sdpa")
    batch = lm.torch.tensor([ids] * BATCH, device=lm.model.device)

    def batched():
        with lm.torch.no_grad():
            lm.model.model(input_ids=batch)

    out["plain_sdpa_batch_s"] = _median_seconds(batched, repeats)
    out["batch_ratio_per_sequence"] = out["plain_sdpa_batch_s"] / BATCH / out["plain_sdpa_s"]
    say("charging on the full-cache rows ...")
    full, _ = replay(lm, ids, None, L, H, keep_qkv=True)
    out.update(_charge_times(lm, full, np.stack([closed[True].drops[layer] for layer in range(L)])))
    say(f"the exact optimum of layer {OPT_LAYER}'s KV heads ...")
    out.update(_optimum_times(lm, full, OPT_LAYER, OPT_BUDGETS))
    out["load_average"] = list(os.getloadavg())
    return out


def _optimum_times(lm, full, layer: int, budgets: tuple[int, ...]) -> dict:
    """CPU seconds of the lazy exact optimum (:func:`realtrace.quality.exact.lazy_optima`) of every KV head of
    ``layer`` at ``budgets``, the sweep's way (column generation from each step's heaviest exits) and with every
    exit from the start, and whether both give the same schedules and costs (module docstring)."""
    from .exact import head_rows, lazy_optima

    q, k, _ = full.keep_qkv[layer]
    scaling = lm.model.model.layers[0].self_attn.scaling
    spent, solved = {}, {}
    for columns in (True, False):
        t0 = time.process_time()
        solved[columns] = [lazy_optima(head_rows(lm.torch, q, k, g, scaling).cpu(), budgets, columns=columns)
                           for g in range(k.shape[1])]
        spent[columns] = time.process_time() - t0
    same = all(np.array_equal(a[0], b[0]) and a[1:] == b[1:]
               for x, y in zip(solved[True], solved[False]) for a, b in zip(x, y))
    return {"optimum_columns_s": spent[True], "optimum_all_arcs_s": spent[False],
            "optimum_speedup": spent[False] / spent[True], "same_optimum": bool(same)}


def _charge_times(lm, full, drops: np.ndarray) -> dict:
    """CPU seconds over every layer and KV head: the rows and value costs, the plain charge and the kept-mass charge
    of ``drops`` ``(L, H, T)``, and whether the two charges agree (module docstring)."""
    from .exact import charge, charge_many, head_rows
    from .value_cost import value_costs

    scaling = lm.model.model.layers[0].self_attn.scaling
    spent, same = {"rows_costs_s": 0.0, "charge_plain_s": 0.0, "charge_kept_s": 0.0}, True
    for layer, (q, k, v) in sorted(full.keep_qkv.items()):
        for g in range(drops.shape[1]):
            t0 = time.process_time()
            rows = head_rows(lm.torch, q, k, g, scaling).cpu().numpy()
            costs = value_costs(rows, v[0, g].cpu().to(lm.torch.float64).numpy())
            t1 = time.process_time()
            plain = [charge(a, drops[layer, g]) for a in (rows, costs)]
            t2 = time.process_time()
            kept = [charge_many(a, drops[layer, g][None])[0] for a in (rows, costs)]
            t3 = time.process_time()
            for key, dt in zip(spent, (t1 - t0, t2 - t1, t3 - t2)):
                spent[key] += dt
            same &= all(np.allclose(x, y, rtol=0, atol=1e-12 * max(1.0, float(a.sum(axis=1).max())))
                        for x, y, a in zip(plain, kept, (rows, costs)))
    return {**spent, "same_charges": bool(same)}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--tokens", type=whole_number(128), default=2000, help="length of the pass (default 2000)")
    ap.add_argument("--budget", type=whole_number(SINKS + 1), default=128,
                    help="positions kept per layer and KV head by the masked schedule and by H2O (default 128)")
    ap.add_argument("--repeats", type=whole_number(1), default=3, help="timed runs of each pass (default 3)")
    ap.add_argument("--threads", type=whole_number(1), default=1, help="torch threads (default 1)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")
    add_model_arguments(ap)
    ap.add_argument("--models", default=None, metavar="A,B",
                    help="instead: run quality TOVA --budget K --prompts PROMPT on each of these --model values "
                         "(e.g. smollm2-135m,gemma3-270m), each in a fresh process, and print their costs and the "
                         "ratios to the first (realtrace.quality.bench_models)")
    ap.add_argument("--prompt", default="needle-400-d10", help="with --models: the prompt (default needle-400-d10)")
    ap.add_argument("--cache-dir", default=None,
                    help="with --models: where the models' de-quantized copies are kept (default: the quality cache)")


def run(args: argparse.Namespace) -> int:
    if args.models is not None:
        from . import bench_models

        return bench_models.run(args)
    res = measure(args.tokens, args.budget, args.repeats, args.threads,
                  say=lambda msg: sys.stderr.write(msg + "\n"), model=resolve_model(args.model, args.device))
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
    else:
        sys.stdout.write(
            f"{res['tokens']} tokens, {res['layers']} layers, {res['threads']} thread(s), median of {res['repeats']}:\n"
            f"  plain forward, sdpa   {res['plain_sdpa_s']:8.3f} s\n"
            f"  plain forward, eager  {res['plain_eager_s']:8.3f} s\n"
            f"  masked replay, K={res['budget']:<5d}{res['masked_s']:8.3f} s   "
            f"{res['ratio_vs_sdpa']:.2f}x sdpa, {res['ratio_vs_eager']:.2f}x eager (goal <= 4x)\n"
            f"  closed H2O, compiled  {res['closed_compiled_s']:8.3f} s   {res['closed_ratio_vs_sdpa']:.2f}x sdpa "
            f"(goal <= 3x)\n"
            f"  closed H2O, Python    {res['closed_python_s']:8.3f} s   "
            f"{res['closed_python_ratio_vs_sdpa']:.2f}x sdpa; "
            f"compiled {res['closed_speedup']:.1f}x faster, same schedule: {res['same_schedule']}\n"
            f"  H2O decisions alone   {res['policy_compiled_s']:8.3f} s compiled, {res['policy_python_s']:.3f} s "
            f"Python: {res['policy_speedup']:.1f}x\n"
            f"  plain sdpa, batch {BATCH}   {res['plain_sdpa_batch_s']:8.3f} s   "
            f"{res['batch_ratio_per_sequence']:.2f}x one pass per sequence\n"
            f"  charging one schedule (CPU s, all layers and KV heads): rows and value costs "
            f"{res['rows_costs_s']:.3f}, plain charge {res['charge_plain_s']:.3f}, kept-mass charge "
            f"{res['charge_kept_s']:.3f}; same charges: {res['same_charges']}\n"
            f"  exact optimum, layer {OPT_LAYER}'s KV heads at {','.join(map(str, OPT_BUDGETS))} (CPU s): "
            f"{res['optimum_columns_s']:.3f} by columns, {res['optimum_all_arcs_s']:.3f} on every exit: "
            f"{res['optimum_speedup']:.2f}x; same optimum: {res['same_optimum']}\n"
            f"  load average {' '.join(f'{x:.2f}' for x in res['load_average'])}\n")
    return 0


COMMAND = Command(prog="python -m realtrace.quality.bench", description=(
    "Time a masked replay pass (every layer and KV head under a sinks-plus-window schedule) and a closed-loop H2O "
    "pass (compiled, and through the Python engine) against the model's plain forward pass on the same tokens, in "
    "one run; prints the ratios (goals: masked at most 4x, closed loop at most 3x). Needs the [real] extra."),
    add_arguments=add_arguments, run=run)


if __name__ == "__main__":
    from kvcore.command import entry

    entry(COMMAND.prog, lambda: COMMAND.main)
