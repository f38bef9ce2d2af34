"""Budgets across heads on a captured trace set: the exact static allocation, the uniform one and the dynamic
coupled optimum at one total memory (paper §8, §11), and a LU-KV budget curve from the static allocation.

Every KV head of a trace set is one no-refetch cache; a total of ``B`` slots is spent three ways:

* **uniform** -- ``B / H`` slots per head (:func:`kvcore.optima.allocation.uniform_allocation`);
* **static optimum** -- fixed ``k_h`` with ``sum k_h = B`` minimizing ``sum_h OPT_h(k_h)``, by greedy on the exact
  per-head regret curves (exact because the curves are convex; :mod:`kvcore.optima.allocation`);
* **dynamic coupled optimum** -- every step shares the ``B`` slots among the heads, ``sum_h |R_{h,t}| <= B``: one
  min-cost flow (:mod:`kvcore.optima.coupled`).

Any static allocation is a coupled schedule, so ``dynamic <= static optimum <= uniform`` exactly; the gaps are what
§8 calls "the gap between the static schedules and the coupled optimum".  Regret counts the stored entries only; the
trace set's residual mass is reported beside it (``unattributed``).

LU-KV (Baidu, "Predicting Future Utility: Global Combinatorial Optimization for Task-Agnostic KV Cache Eviction",
arXiv 2602.08585, 2026; kvpress ``LUKVPress``) takes a per-layer/per-KV-head budget curve, a float array of shape
``[99, layers, kv_heads]``: entry ``[r - 1, l, g]`` is the fraction of the tokens that layer ``l``'s KV head ``g``
*prunes* when the press runs with global ``compression_ratio = r / 100`` (kvpress keeps ``(1 - p) * seq_len``
tokens per head, rounded so the heads' total is the rounded sum, at least one each).  :func:`lukv_curve` writes it
from the static optimum: for each ``r``, the captured heads share ``round((1 - r/100) T H_captured)`` slots by the
greedy allocation (one pass: the allocations are nested), and head ``h`` prunes ``1 - k_h / T``; layers and heads the
trace set did not capture get the uniform ``r / 100`` (what LU-KV itself falls back to).  The budgets are NM cache
sizes over the whole trace, a prefill press applies them once to the prompt: the curve carries the optimum's
*shape* across heads, not a schedule.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np

from kvcore.atomic import replacing
from kvcore.errors import ParameterError
from kvcore.optima.allocation import (RegretCurve, allocation_regret, greedy_allocation, greedy_order,
                                      marginal_interval, uniform_allocation)
from kvcore.optima.coupled import coupled_nm_opt

from .traceset import TraceSet

LUKV_RATIOS = 99


def head_curves(ts: TraceSet) -> list[RegretCurve]:
    """One exact regret curve per trace of ``ts``, in :meth:`TraceSet.names` order."""
    return [RegretCurve(ts.traces[n], name=n) for n in ts.names()]


def check_total(ts: TraceSet, total: int) -> int:
    n = len(ts.traces)
    if isinstance(total, bool) or not isinstance(total, int) or not 1 <= total <= n * ts.T:
        raise ParameterError(f"--total {total!r}: must be a whole number from 1 to {n} heads x {ts.T} steps = "
                             f"{n * ts.T}")
    return total


def allocate(ts: TraceSet, total: int, curves: list[RegretCurve] | None = None) -> dict:
    """Uniform, static-optimal and dynamic-coupled budgets at ``total`` slots, with their certificates (JSON-able;
    regrets as floats, the order between them decided on exact rationals)."""
    check_total(ts, total)
    names = ts.names()
    curves = curves or head_curves(ts)
    static = greedy_allocation(curves, total, limit=ts.T)
    uniform = uniform_allocation(len(names), total)
    dynamic = coupled_nm_opt([ts.traces[n] for n in names], total)
    s_regret, u_regret = allocation_regret(curves, static), allocation_regret(curves, uniform)
    last, nxt = marginal_interval(curves, static)
    solvers = sorted({s for c in curves for s, _ in c.certificates.values()})
    return {
        "traces": ts.source, "T": ts.T, "heads": names, "total": total,
        "uniform": _split(names, curves, uniform, u_regret),
        "static": _split(names, curves, static, s_regret),
        "dynamic": {"regret": dynamic.regret, "per_head": dict(zip(names, dynamic.per_head)),
                    "certificate": {"solver": dynamic.solver, "certified": dynamic.certified,
                                    "gap_bound": dynamic.gap_bound}},
        "order_exact": {"dynamic <= static": dynamic.exact_regret <= s_regret, "static <= uniform": s_regret <= u_regret},
        "marginal": {"least_last_slot": None if last is None else float(last), "largest_next_slot": float(nxt),
                     "equalized": last is None or last >= nxt},
        "curve_certificates": {"solves": sum(len(c.certificates) for c in curves), "solvers": solvers,
                               "all_certified": all(g == 0.0 for c in curves for _, g in c.certificates.values())},
        "unattributed": math.fsum(float(ts.traces[n].residual.sum()) for n in names),
    }


def _split(names: list[str], curves: list[RegretCurve], k: list[int], regret: Fraction) -> dict:
    return {"regret": float(regret), "slots": dict(zip(names, k)),
            "per_head": {n: float(c(x)) for n, c, x in zip(names, curves, k)}}


def format_allocation(rep: dict) -> str:
    """The report of :func:`allocate` as text."""
    lines = [f"trace set {rep['traces']}: {len(rep['heads'])} heads, T = {rep['T']}, total budget B = {rep['total']} "
             f"slots (unattributed residual mass {rep['unattributed']:.4g}, not charged)",
             f"{'head':<10} {'uniform k':>9} {'regret':>10} {'static k':>9} {'regret':>10} {'dynamic regret':>15}"]
    for n in rep["heads"]:
        lines.append(f"{n:<10} {rep['uniform']['slots'][n]:>9} {rep['uniform']['per_head'][n]:>10.4f} "
                     f"{rep['static']['slots'][n]:>9} {rep['static']['per_head'][n]:>10.4f} "
                     f"{rep['dynamic']['per_head'][n]:>15.4f}")
    u, s, d = rep["uniform"]["regret"], rep["static"]["regret"], rep["dynamic"]["regret"]
    lines.append(f"{'total':<10} {'':>9} {u:>10.4f} {'':>9} {s:>10.4f} {d:>15.4f}")
    lines.append(f"static optimum vs uniform: {_pct(s, u)}; dynamic coupled optimum vs static optimum: {_pct(d, s)}")
    m = rep["marginal"]
    lines.append(f"marginal regret (§8): least decrease of a last slot {_num(m['least_last_slot'])} >= largest of a "
                 f"next slot {_num(m['largest_next_slot'])}: {m['equalized']}")
    c, dc = rep["curve_certificates"], rep["dynamic"]["certificate"]
    lines.append(f"certificates: {c['solves']} per-head flows ({', '.join(c['solvers']) or 'none needed'}), all "
                 f"certified: {c['all_certified']}; coupled flow {dc['solver']}, certified {dc['certified']}, "
                 f"gap bound {dc['gap_bound']:g}; exact order dynamic <= static <= uniform: "
                 f"{all(rep['order_exact'].values())}")
    return "\n".join(lines)


def _pct(x: float, ref: float) -> str:
    return f"{x - ref:+.4g} ({(x - ref) / ref:+.1%})" if ref else f"{x - ref:+.4g}"


def _num(x) -> str:
    return "-" if x is None else f"{x:.6g}"


def lukv_curve(ts: TraceSet, curves: list[RegretCurve] | None = None) -> np.ndarray:
    """The ``[99, layers, kv_heads]`` float32 prune-ratio array of the module docstring (model shape from the trace
    set's manifest)."""
    model = ts.meta.get("model", {})
    layers, kv_heads = model.get("layers"), model.get("kv_heads")
    if not (isinstance(layers, int) and isinstance(kv_heads, int) and layers > 0 and kv_heads > 0):
        raise ParameterError(f"{ts.source}: the manifest does not give the model's layers and kv_heads")
    names = ts.names()
    where = []
    for n in names:
        m = re.fullmatch(r"kv(\d+)", ts.heads[n])
        if m is None or not (0 <= ts.layers[n] < layers and int(m.group(1)) < kv_heads):
            raise ParameterError(f"{ts.source}: trace {n} is not one KV head of the model ({layers} layers x "
                                 f"{kv_heads} KV heads); LU-KV needs per-KV-head traces (capture --heads kv)")
        where.append((ts.layers[n], int(m.group(1))))
    curves = curves or head_curves(ts)
    T, n = ts.T, len(names)
    totals = [round((1 - r / 100) * T * n) for r in range(1, LUKV_RATIOS + 1)]
    order = greedy_order(curves, max(totals), limit=T)
    out = np.empty((LUKV_RATIOS, layers, kv_heads), dtype=np.float32)
    for i, total in enumerate(totals):
        out[i] = (i + 1) / 100
        k = np.bincount(np.asarray(order[:total], dtype=np.int64), minlength=n)
        for (layer, g), kh in zip(where, k.tolist()):
            out[i, layer, g] = 1 - kh / T
    return out


def write_lukv_curve(path, curve: np.ndarray) -> None:
    """``np.save`` the curve atomically (LUKVPress reads it with ``np.load``)."""
    with replacing(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, curve, allow_pickle=False)
