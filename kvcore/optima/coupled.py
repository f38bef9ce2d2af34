"""The dynamic coupled optimum: one budget of ``B`` slots shared by every head at every step (paper §8, §11).

Several no-refetch caches (the KV heads of a model, one attention trace each, all of ``T`` steps) share one memory:
at every step ``t`` the resident sets satisfy ``sum_h |R_{h,t}| <= B``, and the regret is the sum of the heads'
regrets (paper Eq. 4 per head).  Unlike a static split (:mod:`kvcore.optima.allocation`), the optimum may move slots
between heads over time -- the "dynamic and coupled" decision §8 says the static schedules approximate.

It is the NM network of :mod:`kvcore.optima.nm_flow` with every head's token nodes hanging off ONE line of ``B``
units (:func:`kvcore.optima.nm_flow.interval_network` with one item per (head, token)): a unit through a token node
of any head occupies one of the ``B`` units across every cut of its residency interval, so a flow is feasible
exactly when at most ``B`` tokens of all heads together are resident at each step.  One min-cost flow, exact, with
the same LP-duality certificate as ``nm_opt`` (:mod:`kvcore.optima.mincost`).  Several budgets are solved
incrementally (:func:`kvcore.optima.capacity_curve.optimum_curve`, warm).  :func:`brute_coupled` (dynamic
programming over the joint resident sets) is the reference the tests compare it with on tiny cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations, product
from typing import Sequence

import numpy as np

from ..errors import ParameterError
from ..exact_sum import fsum_array
from ..traces import AttentionTrace
from .allocation import exact_mass
from .capacity_curve import entries_of, optimum_curve

BRUTE_COUPLED_MAX_STEPS = 6


@dataclass(frozen=True)
class CoupledResult:
    """The coupled optimum at one ``budget``: ``regret`` (correctly rounded sum of the lost entries) and
    ``exact_regret`` (the same as an exact rational), per head ``per_head``, the certificate (``solver``,
    ``gap_bound`` below one cost unit: ``certified``), and the heads' total residual mass (``unattributed``, never
    used)."""

    budget: int
    regret: float
    exact_regret: Fraction
    per_head: list[float]
    solver: str
    gap_bound: float
    unattributed: float
    certified: bool = True


def coupled_curve(traces: Sequence[AttentionTrace], budgets: Sequence[int], warm: bool = True) -> list[CoupledResult]:
    """The coupled optimum at each budget (increasing), one certified flow per budget on one shared network."""
    e = entries_of(list(traces))
    residual = math.fsum(float(tr.residual.sum()) for tr in traces)
    return [_result(e, p, len(traces), residual) for p in optimum_curve(e, budgets, warm=warm)]


def _result(e, p, n_heads: int, residual: float) -> CoupledResult:
    per_head = [fsum_array(e.weight[p.lost & (e.head == h)]) for h in range(n_heads)]
    return CoupledResult(p.capacity, fsum_array(e.weight[p.lost]), exact_mass(e.exact[p.lost], e.unit),
                         per_head, p.solver, p.gap_bound, residual)


def coupled_nm_opt(traces: Sequence[AttentionTrace], budget: int) -> CoupledResult:
    """The dynamic coupled optimum of ``traces`` with ``budget`` shared slots (module docstring)."""
    return coupled_curve(traces, [budget])[0]


def coupled_schedule(traces: Sequence[AttentionTrace], budget: int) -> tuple[np.ndarray, CoupledResult]:
    """``(drops, result)``: the dynamic coupled optimum at ``budget`` (:func:`coupled_nm_opt`) with its schedule,
    ``drops[h, i]`` the step at which head ``h`` drops token ``i`` -- one after its last retained entry, on arrival
    (``i``) when none is retained, as :func:`kvcore.optima.nm_flow.nm_opt` reads its flow.  A unit holds one of the
    ``budget`` line units from arrival through its exit, so ``sum_h |R_{h,t}| <= budget`` at every step."""
    e = entries_of(list(traces))
    (p,) = optimum_curve(e, [budget])
    T = e.T
    drops = np.tile(np.arange(T, dtype=np.int64), (len(traces), 1))
    kept = ~p.lost
    token = e.arrival[e.item[kept]]
    np.maximum.at(drops, (e.head[kept], token), e.step[kept] + 1)
    return drops, _result(e, p, len(traces), math.fsum(float(tr.residual.sum()) for tr in traces))


def brute_coupled(traces: Sequence[AttentionTrace], budget: int) -> float:
    """The coupled optimum by dynamic programming over the joint resident sets (at most 6 steps): at step ``t``
    every head receives token ``t`` and keeps any subset of its previous set plus ``t``, the sets together holding at
    most ``budget`` tokens; the step loses the mass of every head's row outside its set."""
    if not traces:
        raise ParameterError("no traces given")
    T = traces[0].T
    if T > BRUTE_COUPLED_MAX_STEPS or any(tr.T != T for tr in traces):
        raise ParameterError(f"brute_coupled: traces of one length of at most {BRUTE_COUPLED_MAX_STEPS} steps")
    rows = [[dict(zip(idx.tolist(), w.tolist())) for _, idx, w in tr.rows()] for tr in traces]
    table: dict[tuple[frozenset, ...], float] = {tuple(frozenset() for _ in traces): 0.0}
    for t in range(T):
        nxt: dict[tuple[frozenset, ...], float] = {}
        for state, regret in table.items():
            options = [list(_subsets(s | {t})) for s in state]
            for choice in product(*options):
                if sum(len(c) for c in choice) > budget:
                    continue
                lost = sum(x for h, c in enumerate(choice) for i, x in rows[h][t].items() if i not in c and x > 0)
                value = regret + lost
                if value < nxt.get(choice, np.inf):
                    nxt[choice] = value
        table = nxt
    return min(table.values())


def _subsets(items: frozenset):
    members = sorted(items)
    for size in range(len(members) + 1):
        for keep in combinations(members, size):
            yield frozenset(keep)
