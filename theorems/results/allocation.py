"""Budgets across heads on the committed real traces (paper §8 "Per-head and per-layer budgets are a multi-cache
allocation problem", §11 "Optimal per-head and per-layer allocation"): the exact per-head no-refetch regret curves,
their convexity, the exact static allocation against the uniform one, and the dynamic coupled optimum.

Every number comes from certified min-cost flows (:mod:`kvcore.optima.capacity_curve`, :mod:`kvcore.optima.coupled`)
on every captured head of ``realtrace/data/smollm2_recall``; regrets are exact rationals until they are reported.
"""

from __future__ import annotations

from fractions import Fraction

from kvcore.optima import future_mass_heuristic
from kvcore.optima.allocation import (RegretCurve, allocation_regret, convexity_violations, dp_allocation,
                                      greedy_allocation, marginal_interval, uniform_allocation)
from kvcore.optima.coupled import coupled_curve
from realtrace import COMMITTED, COMMITTED_NAME, load_traceset
from realtrace.allocate import head_curves
from theorems.tables import cached

# the solvers a curve can be computed with: the exact flow, and the future-mass heuristic (paper §4; not optimal),
# the perturbed solver the convexity check is seen to fail on
CURVE_SOLVERS = ("flow", "future-mass")


def committed_traceset():
    ts = load_traceset(COMMITTED)
    ts.source = COMMITTED_NAME
    return ts


def flow_curves(upto: int) -> list[RegretCurve]:
    """The exact curves of the committed heads, ``OPT(0..upto)`` solved on every head; memoized through
    ``cached(flow_curves, upto=...)``, so the claims and the figure share one set of solved points -- also between
    the processes of a parallel run, which share a table as it was when it was made (a point a process solves later
    stays in that process)."""
    curves = head_curves(committed_traceset())
    for c in curves:
        c.values(upto)
    return curves


def curves_with(ts, solver: str, upto: int) -> list[RegretCurve]:
    if solver == "flow":
        return cached(flow_curves, upto=upto)
    if solver != "future-mass":
        raise ValueError(f"curve solver {solver!r}: one of {CURVE_SOLVERS}")
    return [RegretCurve(solve=lambda k, tr=ts.traces[n]: _heuristic(tr, k), name=n) for n in ts.names()]


def _heuristic(trace, k: int) -> Fraction:
    return Fraction(trace.weights[trace.weights > 0].sum()) if k == 0 else Fraction(future_mass_heuristic(trace, k).cost)


def curve_study(curve_k: int, solver: str = "flow") -> dict:
    """Per head: ``OPT(0..curve_k)`` (every point solved), where it increases or is not convex (exact second
    differences), its decreases at 1 and at ``curve_k`` and the first ``k`` from which it is flat."""
    ts = committed_traceset()
    curves = curves_with(ts, solver, curve_k)
    heads = {}
    for c in curves:
        v = c.values(curve_k)
        d2 = [v[k + 1] - 2 * v[k] + v[k - 1] for k in range(1, curve_k)]
        flat = next((k for k in range(1, curve_k + 1) if v[k] == v[k - 1]), None)
        heads[c.name] = {"violations": convexity_violations(v), "min_second_difference": float(min(d2)),
                         "first_decrease": float(v[0] - v[1]), "last_decrease": float(v[-2] - v[-1]),
                         "flat_from": flat, "regret_at_k": float(v[-1])}
    certs = [g for c in curves for k, (_, g) in c.certificates.items() if k <= curve_k]
    return {"traces": ts.source, "T": ts.T, "curve_k": curve_k, "solver": solver, "heads": heads,
            "flows_certified": all(g == 0.0 for g in certs), "flow_solves": len(certs)}

def allocation_study(per_head_ks: tuple[int, ...], dp_per_head: int, curve_steps: int) -> dict:
    """At each total ``B = H k`` (``k`` in ``per_head_ks``): the uniform split, the exact static optimum (greedy on
    the flow curves, checked against the dynamic program at ``B = H dp_per_head``), the dynamic coupled optimum
    (one certified flow per budget), §8's marginal condition at the static optimum and the spread of the last-slot
    decreases under the uniform split."""
    curves = cached(flow_curves, upto=curve_steps)  # the points regret-curve-convex solves, shared with it
    ts = committed_traceset()
    names = ts.names()
    H = len(names)
    budgets = [H * b for b in per_head_ks]
    coupled = coupled_curve([ts.traces[n] for n in names], budgets)
    rows = []
    for B, dyn in zip(budgets, coupled):
        static, uniform = greedy_allocation(curves, B, limit=ts.T), uniform_allocation(H, B)
        s, u = allocation_regret(curves, static), allocation_regret(curves, uniform)
        last, nxt = marginal_interval(curves, static)
        s_last = [c(k - 1) - c(k) for c, k in zip(curves, static) if k > 0]
        u_last = [c(k - 1) - c(k) for c, k in zip(curves, uniform)]
        rows.append({"B": B, "per_head": B // H, "uniform": float(u), "static": float(s), "dynamic": dyn.regret,
                     "static_slots": dict(zip(names, static)),
                     "order_exact": dyn.exact_regret <= s <= u, "dynamic_certified": dyn.certified,
                     "dynamic_gap_bound": dyn.gap_bound,
                     "marginal": {"least_last": None if last is None else float(last), "largest_next": float(nxt),
                                  "greatest_last": float(max(s_last)) if s_last else None,
                                  "holds": last is None or last >= nxt},
                     "uniform_last_decrease": {"min": float(min(u_last)), "max": float(max(u_last))}})
    dp_B = H * dp_per_head
    dp_value, _ = dp_allocation(curves, dp_B)
    greedy_value = allocation_regret(curves, greedy_allocation(curves, dp_B, limit=ts.T))
    return {"traces": ts.source, "heads": H, "T": ts.T, "rows": rows,
            "unattributed": float(sum(float(ts.traces[n].residual.sum()) for n in names)),
            "dp_check": {"B": dp_B, "greedy": float(greedy_value), "dp": float(dp_value),
                         "equal": greedy_value == dp_value}}
