"""The exact no-refetch optimum at many capacities in one incremental solve: the optimal regret curve ``OPT(h)``.

The NM optimum with ``h`` slots is a min-cost flow of ``h`` units along the line of
:func:`kvcore.optima.nm_flow.interval_network`.  Raising the capacity from ``h`` to ``h + d`` is the same as
appending, beside every line arc, one more arc of capacity ``d`` and cost 0 that carries ``d`` units (flow at its
upper bound) and moving ``d`` more units of supply from the first line node to the last: the previous optimal flow
plus those arcs is feasible, and the previous simplex tree is still a strongly feasible spanning tree (no tree arc
changed, the new arcs sit at a bound outside it).  The exact network simplex continues from there
(:func:`kvcore.optima.mincost.solve_netsimplex`), so each capacity after the first costs the pivots that repair the
previous optimum, not a solve from the empty cache.  Every capacity's flow carries the same exact LP-duality
certificate as :func:`kvcore.optima.nm_opt` (gap 0 in exact integers, or the solve raises).

Why the curve is convex and non-increasing (paper §8's "equal marginal regret" rests on it): ``OPT(h)`` is the
value of a linear program (the flow LP is integral, Ahuja, Magnanti & Orlin, *Network Flows*, 1993, ch. 9) whose
capacity enters the right-hand side linearly, and such a value is convex in the right-hand side (the average of the
optimal flows at ``h - 1`` and ``h + 1`` is feasible at ``h``); more slots never lose a schedule.  The claim
``regret-curve-convex`` checks both on every captured head rather than assuming them.

Measured (``python -m bench``, section ``allocation``; CPU seconds on the committed set, docs/budgets.md, "Budgets
across heads"): the curves ``OPT(1..128)`` of 12 heads of 617 steps took 32 s solved per capacity on one network, 58 s
incrementally and 60 s as one ``nm_opt`` per capacity -- at unit steps the few saved pivots do not pay for the
grown network and its exact verification; across the coupled optimum's budgets (12 x 8, 32, 128 slots) the
incremental chain took 1.25 s against 1.96 s cold.  ``RegretCurve`` therefore solves per capacity and
:mod:`kvcore.optima.coupled` chains.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Iterator, Sequence

import numpy as np

from ..errors import ParameterError
from ..exact_sum import fsum_array
from ..traces import AttentionTrace
from .limbs import join
from .mincost import FlowNetwork, as_objects, exact_integers, scanned_costs, solve_netsimplex_duals
from . import nm_flow
from .nm_flow import by_tail_then_head, entries_by_token, heaviest, interval_network, stable_order


@dataclass(frozen=True)
class Entries:
    """Stored positive entries grouped into items that each arrive once (a token of one head): ``arrival`` per item
    (non-decreasing), per entry its ``item`` (sorted), ``step`` (sorted within an item), ``weight`` and ``head`` (the
    trace it came from, for per-head totals), and the weights' exact integers ``exact`` times ``unit``."""

    T: int
    arrival: np.ndarray
    item: np.ndarray
    step: np.ndarray
    weight: np.ndarray
    head: np.ndarray
    exact: np.ndarray
    unit: object

    @property
    def total(self) -> float:
        return fsum_array(self.weight)


def entries_of(traces: Sequence[AttentionTrace]) -> Entries:
    """The entries of one or several traces of equal length (one item per (trace, token) with stored mass), items
    ordered by arrival, then trace: the layout :func:`interval_network` expects."""
    if not traces:
        raise ParameterError("no traces given")
    T = traces[0].T
    parts = []
    for h, tr in enumerate(traces):
        if tr.T != T:
            raise ParameterError(f"{tr.source}: {tr.T} steps, the first trace has {T} (one line needs one length)")
        tok, step, w = entries_by_token(tr)
        parts.append((tok, step, w, np.full(tok.size, h, dtype=np.int64)))
    tok, step, w, head = (np.concatenate(x) for x in zip(*parts))
    if len(traces) > 1:  # by arrival, then head, then step: each part is by token, then step, and the parts by head
        order = stable_order(tok, T)[0]
        tok, step, w, head = tok[order], step[order], w[order], head[order]
    key = tok * len(traces) + head
    new_item = np.ones(key.size, dtype=bool)
    new_item[1:] = key[1:] != key[:-1]
    item = np.cumsum(new_item) - 1
    exact, unit = exact_integers(w)
    return Entries(T, tok[new_item].astype(np.int64), item.astype(np.int64), step.astype(np.int64), w, head, exact,
                   unit)


@dataclass(frozen=True)
class CurvePoint:
    """The certified optimum at one capacity: ``lost`` marks the entries the optimal schedule does not retain;
    ``line_potentials`` ``(T + 1,)``: the simplex's exact potentials of the line nodes as doubles in mass units (the
    slot prices a Lagrangian bound on other rows starts from, :func:`kvcore.optima.lagrangian.lagrangian_bound`)."""

    capacity: int
    lost: np.ndarray
    solver: str
    gap_bound: float
    line_potentials: np.ndarray | None = None


def check_capacities(capacities: Sequence[int]) -> list[int]:
    caps = [int(c) for c in capacities]
    if not caps or any(c < 1 for c in caps) or any(b <= a for a, b in zip(caps, caps[1:])):
        raise ParameterError(f"capacities {list(capacities)!r}: must be a non-empty increasing list of integers >= 1")
    return caps


def optimum_curve(entries: Entries, capacities: Sequence[int], warm: bool = True, columns: bool = True
                  ) -> Iterator[CurvePoint]:
    """The certified optimum at each capacity (increasing).  ``warm``: each capacity continues from the previous
    one's optimum (module docstring); otherwise each is solved from the empty cache on the same network with its
    line capacity replaced.  Both are exact; which is faster depends on the steps (docs/budgets.md).
    ``columns``: the simplex starts from the ``EXIT_COLUMNS`` heaviest exits per step and head and prices the rest
    in (:func:`kvcore.optima.nm_flow.heaviest`); ``False``: every exit from the start (the same optimum)."""
    caps = check_capacities(capacities)
    e = entries
    heads = int(e.head.max(initial=-1)) + 1
    base = interval_network(e.T, e.arrival, e.item, e.step, e.exact, e.unit, caps[0],
                            heaviest(e.step * heads + e.head, e.weight, e.T * heads, nm_flow.EXIT_COLUMNS)
                            if columns else None)
    n_exit = e.item.size
    exits = slice(e.T + e.arrival.size, e.T + e.arrival.size + n_exit)
    if e.T == 0 or n_exit == 0:  # nothing to retain: every capacity loses nothing
        for c in caps:
            yield CurvePoint(c, np.zeros(n_exit, dtype=bool), "netsimplex", 0.0)
        return
    line_tail, line_head = base.tail[:e.T], base.head[:e.T]
    first, last = int(line_tail[0]), int(line_head[-1])
    net, tree, prev = base, None, caps[0]
    scanned = None if warm else scanned_costs(base)  # cold: every capacity has the same arcs and costs
    for c in caps:
        if c > prev and warm:  # one parallel line arc of capacity c - prev per step, full (module docstring)
            d = c - prev
            tail = np.concatenate([net.tail, line_tail])
            head = np.concatenate([net.head, line_head])
            net = FlowNetwork(net.n_nodes, tail, head, np.concatenate([net.lower, np.zeros(e.T, np.int64)]),
                              np.concatenate([net.cap, np.full(e.T, d, np.int64)]),
                              join([net.cost, np.zeros(e.T, dtype=np.int64)]), net.cost_unit,
                              _moved(net.supply, first, last, d), np.concatenate([flow, np.full(e.T, d, np.int64)]),
                              by_tail_then_head(tail, head, net.n_nodes))
        elif c > prev:
            cap, start = base.cap.copy(), base.start.copy()
            cap[:e.T] = start[:e.T] = c
            net = replace(base, cap=cap, start=start, supply=_moved(base.supply, first, last, c - caps[0]))
        sol, final, duals = solve_netsimplex_duals(net, tree, scanned)
        flow, prev, tree = sol.flow, c, final if warm else None
        line = as_objects(duals[np.append(line_tail, last)]).tolist()
        yield CurvePoint(c, _lost(e, sol.flow[exits]), sol.solver, sol.gap_bound,
                         np.array([float(Fraction(p) * e.unit) for p in line]))


def _moved(supply: np.ndarray, first: int, last: int, d: int) -> np.ndarray:
    out = supply.copy()
    out[first] += d
    out[last] -= d
    return out


def _lost(e: Entries, exit_flow: np.ndarray) -> np.ndarray:
    """Entries not retained: an item is resident through its one used exit arc's entry (none: dropped on arrival)."""
    n_items = e.arrival.size
    exit_at = np.flatnonzero(exit_flow == 1)
    kept_until = np.full(n_items, -1, dtype=np.int64)
    kept_until[e.item[exit_at]] = exit_at
    return np.arange(e.item.size) > kept_until[e.item]


def item_drops(e: Entries, lost: np.ndarray) -> np.ndarray:
    """Per item, the step at which a schedule that loses the entries ``lost`` drops it: the step after its last
    retained entry, its arrival when none is retained (``e.T``: kept to the end) -- for one trace, the token's drop
    vector (:mod:`realtrace.quality.schedule`)."""
    drop = e.arrival.copy()
    kept = ~lost
    np.maximum.at(drop, e.item[kept], e.step[kept] + 1)
    return drop


def regret_curve(trace: AttentionTrace, capacities: Sequence[int]) -> np.ndarray:
    """``OPT(h)`` of the NM model (paper Eq. 4, stored entries) at each capacity, exact and certified."""
    e = entries_of([trace])
    return np.array([fsum_array(e.weight[p.lost]) for p in optimum_curve(e, capacities)])
