"""Section ``allocation`` of ``python -m bench``: the exact optima behind budgets across heads, on the committed real
trace set (``realtrace/data/smollm2_recall``: 12 KV heads, 617 steps, top-32 rows), read as plain attention traces.

* per-head regret curves ``OPT(1..K)``: one ``nm_opt`` per ``k`` (the baseline: what a caller had before), one solve
  per ``k`` on one network with its line capacity replaced (:func:`kvcore.optima.capacity_curve.optimum_curve`,
  ``warm=False``, what :class:`kvcore.optima.allocation.RegretCurve` uses), and the incremental solve continuing from
  the previous capacity's optimum (``warm=True``);
* the dynamic coupled optimum over all heads at each budget, one cold solve per budget and the warm chain over the
  budgets (:mod:`kvcore.optima.coupled`), beside the baseline of the 12 per-head ``nm_opt`` at ``B / 12`` (the uniform
  static split: the same memory, solved head by head).
CPU seconds of this process (wall in brackets); every value is compared across the paths (they must be equal).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from kvcore.optima import nm_opt
from kvcore.optima.capacity_curve import entries_of, optimum_curve
from kvcore.optima.coupled import coupled_curve
from kvcore.trace_files import load_trace

TRACE_SET = Path(__file__).resolve().parents[1] / "realtrace" / "data" / "smollm2_recall"
FULL = {"heads": 12, "curve_k": 128, "per_head_budgets": (8, 32, 128)}
QUICK = {"heads": 2, "curve_k": 16, "per_head_budgets": (4, 8)}


def _clock(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def section_allocation(cfg: dict) -> dict:
    paths = sorted(TRACE_SET.glob("L*_kv*.npz"))
    traces = [load_trace(p) for p in paths]
    nm_opt(traces[0], 2)  # compile the kernel outside the timings
    K = cfg["curve_k"]
    caps = list(range(1, K + 1))
    curve = {"heads": cfg["heads"], "K": K, "T": traces[0].T}
    results = {}
    for label, fn in (("nm_opt per k (baseline)", lambda tr: [nm_opt(tr, k).cost for k in caps]),
                      ("one network, per k", lambda tr: _weights(tr, caps, warm=False)),
                      ("incremental (warm)", lambda tr: _weights(tr, caps, warm=True))):
        vals, cpu, wall = _clock(lambda: [fn(tr) for tr in traces[:cfg["heads"]]])
        results[label] = vals
        curve[label] = {"cpu": cpu, "wall": wall}
    ref = results["nm_opt per k (baseline)"]
    curve["equal"] = all(max(abs(a - b) for x, y in zip(v, ref) for a, b in zip(x, y)) < 1e-9 for v in results.values())
    budgets = [len(traces) * b for b in cfg["per_head_budgets"]]
    coupled = {"heads": len(traces), "budgets": budgets}
    (warm, cpu, wall) = _clock(lambda: coupled_curve(traces, budgets))
    coupled["warm chain"] = {"cpu": cpu, "wall": wall}
    cold = []
    for B in budgets:
        (res, cpu, wall) = _clock(lambda: coupled_curve(traces, [B], warm=False)[0])
        cold.append({"B": B, "cpu": cpu, "wall": wall, "regret": res.regret, "certified": res.certified})
    coupled["cold"] = cold
    coupled["equal"] = [w.exact_regret for w in warm] == [
        r.exact_regret for r in coupled_curve(traces, budgets, warm=False)]
    base = []
    for B in budgets:
        (cost, cpu, wall) = _clock(lambda: math.fsum(nm_opt(tr, B // len(traces)).cost for tr in traces))
        base.append({"B": B, "cpu": cpu, "wall": wall, "uniform_regret": cost})
    coupled["baseline"] = base
    return {"curve": curve, "coupled": coupled}


def _weights(trace, caps, warm):
    e = entries_of([trace])
    return [math.fsum(e.weight[p.lost].tolist()) for p in optimum_curve(e, caps, warm=warm)]


def print_allocation(a: dict) -> None:
    c = a["curve"]
    base = c["nm_opt per k (baseline)"]["cpu"]
    print(f"\n## budgets across heads: per-head curves OPT(1..{c['K']}) on {c['heads']} committed heads (T = {c['T']}); "
          f"all paths equal: {c['equal']}")
    for label in ("nm_opt per k (baseline)", "one network, per k", "incremental (warm)"):
        r = c[label]
        print(f"{label:26} CPU {r['cpu']:7.2f} s ({r['wall']:7.2f} s wall)  baseline/this {base / r['cpu']:5.2f}x")
    k = a["coupled"]
    w = k["warm chain"]
    print(f"dynamic coupled optimum, all {k['heads']} heads, B = {k['budgets']}: warm chain CPU {w['cpu']:.2f} s "
          f"({w['wall']:.2f} s wall); cold solves equal the chain: {k['equal']}")
    for cold, base in zip(k["cold"], k["baseline"]):
        print(f"   B = {cold['B']:5d}: one coupled flow CPU {cold['cpu']:6.2f} s ({cold['wall']:6.2f} s wall), "
              f"certified {cold['certified']}, regret {cold['regret']:.6g}; the {k['heads']} per-head nm_opt at B/H "
              f"CPU {base['cpu']:6.2f} s (coupled/per-head {cold['cpu'] / base['cpu']:.2f}x), regret "
              f"{base['uniform_regret']:.6g}")
