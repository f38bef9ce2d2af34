"""Budgets across heads on the real traces (paper §8 "Per-head and per-layer budgets are a multi-cache
allocation problem", §11 "Optimal per-head and per-layer allocation"): the exact per-head no-refetch regret curves,
their convexity, the exact static allocation against the uniform one, and the dynamic coupled optimum.

Two readings of the same 12 heads (layers 0, 9, 19, 29 x 3 KV heads of SmolLM2 on the ``recall`` prompt, 617 steps):

* ``complete`` -- ``realtrace/data/smollm2_recall_complete``, every entry of every row (the claims' own reading;
  remade from the model by ``paper_check --full``, :data:`theorems.quality_inputs.QUALITY_INPUTS`);
* ``stored`` -- the committed ``realtrace/data/smollm2_recall``, each row's top 32 entries: regret on the stored
  entries only, the residual mass (``unattributed``) not charged -- the truncated reading kept beside it.

Every number comes from certified min-cost flows: the curves from :mod:`kvcore.optima.capacity_curve`, the static
optimum by greedy on them checked against the dynamic program and against the static flow of
:mod:`kvcore.optima.priced` (no convexity assumed), the dynamic coupled optimum from the priced coupled flow with its
certificate; regrets are exact rationals until they are reported.
"""

from __future__ import annotations

from fractions import Fraction

from kvcore.optima import future_mass_heuristic
from kvcore.optima.allocation import (RegretCurve, allocation_regret, convexity_violations, dp_allocation,
                                      greedy_allocation, marginal_interval, uniform_allocation)
from kvcore.optima.priced import priced_optimum
from realtrace import COMMITTED, COMMITTED_NAME, input_dir, load_traceset
from realtrace.allocate import head_curves
from theorems.tables import cached

# the solvers a curve can be computed with: the exact flow, and the future-mass heuristic (paper §4; not optimal),
# the perturbed solver the convexity check is seen to fail on
CURVE_SOLVERS = ("flow", "future-mass")
COMPLETE_SET = "smollm2_recall_complete"  # the committed complete rows of the 12 heads (realtrace/data/PROVENANCE.md)
ROWS = ("complete", "stored")  # the readings (module docstring)


def traceset(rows: str = "complete"):
    """The 12 heads under the reading ``rows`` (:data:`ROWS`), named by their place in the repository."""
    if rows == "complete":
        ts = load_traceset(input_dir(COMPLETE_SET))
        ts.source = f"realtrace/data/{COMPLETE_SET}"
    elif rows == "stored":
        ts = load_traceset(COMMITTED)
        ts.source = COMMITTED_NAME
    else:
        raise ValueError(f"rows {rows!r}: one of {ROWS}")
    return ts


def flow_curves(upto: int, rows: str) -> list[RegretCurve]:
    """The exact curves of the heads under ``rows``, ``OPT(0..upto)`` solved on every head; memoized through
    ``cached(flow_curves, upto=..., rows=...)``, so the claims and the figure share one set of solved points -- also
    between the processes of a parallel run, which share a table as it was when it was made (a point a process
    solves later stays in that process)."""
    curves = head_curves(traceset(rows))
    for c in curves:
        c.values(upto)
    return curves


def curves_with(ts, solver: str, upto: int, rows: str) -> list[RegretCurve]:
    if solver == "flow":
        return cached(flow_curves, upto=upto, rows=rows)
    if solver != "future-mass":
        raise ValueError(f"curve solver {solver!r}: one of {CURVE_SOLVERS}")
    return [RegretCurve(solve=lambda k, tr=ts.traces[n]: _heuristic(tr, k), name=n) for n in ts.names()]


def _heuristic(trace, k: int) -> Fraction:
    return Fraction(trace.weights[trace.weights > 0].sum()) if k == 0 else Fraction(future_mass_heuristic(trace, k).cost)


def curve_study(curve_k: int, solver: str = "flow", rows: str = "complete") -> dict:
    """Per head under ``rows``: ``OPT(0..curve_k)`` (every point solved), where it increases or is not convex (exact
    second differences), its decreases at 1 and at ``curve_k`` and the first ``k`` from which it is flat."""
    ts = traceset(rows)
    curves = curves_with(ts, solver, curve_k, rows)
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
            "unattributed": _residual(ts), "flows_certified": all(g == 0.0 for g in certs), "flow_solves": len(certs)}

def _residual(ts) -> float:
    """The heads' summed residual mass: what the stored rows do not attribute (0 up to rounding on complete rows)."""
    return float(sum(float(tr.residual.sum()) for tr in ts.traces.values()))


def priced(ts, budget: int, kind: str):
    """The ``kind`` (``coupled`` or ``static``) optimum of every head of ``ts`` with ``budget`` slots in all, priced
    on its rows until certified (:mod:`kvcore.optima.priced`; the stored entries as dense rows, the residual has no
    place in a row)."""
    rows = [ts.traces[n].to_dense() for n in ts.names()]
    return priced_optimum(lambda h: rows[h], len(rows), ts.T, budget, kind)


def allocation_study(per_head_ks: tuple[int, ...], dp_per_head: int, curve_steps: int, rows: str = "complete"
                     ) -> dict:
    """At each total ``B = H k`` (``k`` in ``per_head_ks``) under ``rows``: the uniform split, the exact static
    optimum (greedy on the flow curves, checked against the dynamic program at ``B = H dp_per_head`` and at every
    budget against the static flow, which assumes no convexity), the dynamic coupled optimum (the priced coupled
    flow and its certificate), §8's marginal condition at the static optimum and the spread of the last-slot
    decreases under the uniform split."""
    curves = cached(flow_curves, upto=curve_steps, rows=rows)  # the points regret-curve-convex solves, shared with it
    ts = traceset(rows)
    names = ts.names()
    H = len(names)
    rows_out = []
    for B in (H * b for b in per_head_ks):
        static, uniform = greedy_allocation(curves, B, limit=ts.T), uniform_allocation(H, B)
        s, u = allocation_regret(curves, static), allocation_regret(curves, uniform)
        dyn, flow_static = priced(ts, B, "coupled"), priced(ts, B, "static")
        last, nxt = marginal_interval(curves, static)
        s_last = [c(k - 1) - c(k) for c, k in zip(curves, static) if k > 0]
        u_last = [c(k - 1) - c(k) for c, k in zip(curves, uniform)]
        rows_out.append({"B": B, "per_head": B // H, "uniform": float(u), "static": float(s), "dynamic": dyn.regret,
                         "static_slots": dict(zip(names, static)),
                         "order_exact": dyn.exact_regret <= s <= u,
                         "dynamic_certified": dyn.certificate.certified, "dynamic_rounds": dyn.certificate.rounds,
                         "static_flow": {"regret": flow_static.regret, "certified": flow_static.certificate.certified,
                                         "rounds": flow_static.certificate.rounds,
                                         "equals_greedy": flow_static.exact_regret == s},
                         "marginal": {"least_last": None if last is None else float(last),
                                      "largest_next": float(nxt),
                                      "greatest_last": float(max(s_last)) if s_last else None,
                                      "holds": last is None or last >= nxt},
                         "uniform_last_decrease": {"min": float(min(u_last)), "max": float(max(u_last))}})
    dp_B = H * dp_per_head
    dp_value, _ = dp_allocation(curves, dp_B)
    greedy_value = allocation_regret(curves, greedy_allocation(curves, dp_B, limit=ts.T))
    return {"traces": ts.source, "heads": H, "T": ts.T, "rows": rows_out, "unattributed": _residual(ts),
            "dp_check": {"B": dp_B, "greedy": float(greedy_value), "dp": float(dp_value),
                         "equal": greedy_value == dp_value}}
