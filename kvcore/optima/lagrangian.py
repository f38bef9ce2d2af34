"""Lower bounds and checks of the NM optima from node potentials (LP duality), on complete rows.

The NM networks of :mod:`kvcore.optima.nm_flow`, :mod:`kvcore.optima.coupled` and :mod:`kvcore.optima.priced` are
min-cost flows; any potentials ``pi`` give a lower bound on their optimum (weak duality).  Keeping each token's own
node in the inner problem -- relaxing only the lines' conservation -- gives the Lagrangian bound of
:func:`dual_value`: every token picks its best residency interval against slot prices, which is tight at the
optimal prices and far tighter than summing every negative reduced cost (each token counts once, not once per exit).
It needs the complete rows and nothing else, so a solve on truncated rows (``quality --opt-top M``) can report how
far it can be from the complete rows' optimum.  The dual is concave in the prices, so :func:`maximise_dual` climbs
it from the truncated solve's own prices (projected subgradient steps, every value a valid bound, the best kept):
on the short default prompts that takes the reported gap of the per-head optimum from 6-16x the true one to within
13 % of it, and of the coupled one from 1.3-1.5x to within 5 % (docs/budgets.md, "The truncated bound").  The
static split's dual climbs badly, so :func:`static_bound` builds its bound from per-head duals instead.
:func:`verify` checks a priced optimum's certificate on every exit of the complete network in exact rationals
(small instances; the tests' independent check).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from ..errors import ParameterError
from .pricing import best_exits

KINDS = ("coupled", "static")
EVALUATIONS = 50  # dual evaluations of maximise_dual: on needle-400-d10 (OPT, K = 64) 10 / 20 / 50 / 100 left
# 1.21 / 1.13 / 1.08 / 1.06 times the true gap (0.0025 per head-step), so the steps after 50 buy little


def dual_value(rows: Callable[[int], np.ndarray], n_heads: int, line_pot: np.ndarray, budget: int,
               kind: str = "coupled") -> tuple[float, np.ndarray]:
    """``(bound, supergradient)``: the Lagrangian dual of the ``kind`` optimum of the heads ``rows(h)`` (complete,
    dense ``(T, T)``) with ``budget`` slots at the slot prices the line potentials ``line_pot`` ``(lines, T + 1)``
    set (mass units, e.g. a solve's on truncated rows): a lower bound on the least regret of any of its schedules,
    rounding included, and a supergradient ``(lines, T)`` at the prices (the resident count the tokens' best
    intervals make at each step, minus the slots).

    The dual (Lagrangian relaxation of the lines' conservation; Ahuja, Magnanti & Orlin, *Network Flows*, 1993,
    ch. 16; Lübbecke & Desrosiers, "Selected topics in column generation", *Operations Research* 53, 2005, §2.2):
    with slot prices ``lambda_{l,t} = pi(L_{l,t}) - pi(L_{l,t+1})`` on line ``l`` (one for ``coupled`` with
    ``c_0 = budget``; one per head for ``static`` and the per-head ``OPT``),

        ``g(lambda) = total - max_c sum_l c_l sum_t max(lambda_{l,t}, 0)
                      - sum_{h,i} max(0, max_t (P_h(i, t) - sum_{s=i..t} lambda_{l(h),s}))``,

    the ``max_c`` over the slot splits ``c`` a schedule may use (``coupled``: ``c_0 = budget``; ``static``: ``0 <=
    c_h <= T`` with ``sum_h c_h <= budget``, a greedy fractional knapsack).  Why any prices give a lower bound: a
    schedule keeps token ``i`` of head ``h`` over one interval ``[i, t]`` (or not at all) and holds at most ``c_l``
    tokens on line ``l`` at every step, so adding ``max(lambda, 0)`` times (resident count - ``c_l``) and
    ``min(lambda, 0)`` times the resident count (each ``<= 0``) at every step to its regret ``total - sum P`` lowers
    it; what results splits into one term per token -- at least ``-max(0, max_t (P - sum lambda))`` whatever the schedule picks -- and
    the slot term, at least ``-max_c ...``.  The relaxed problem has the integrality property (each token picks one
    interval), so the dual's maximum is the network LP's optimum, which is the integral optimum: the bound is tight
    at the optimal prices.  One head with its own ``budget``: the per-head optimum ``OPT``; all heads on one line:
    the coupled one, which is also below the static split."""
    pot = np.atleast_2d(np.asarray(line_pot, dtype=np.float64))
    lines, T = pot.shape[0], pot.shape[1] - 1
    if kind not in KINDS or lines != (1 if kind == "coupled" else n_heads):
        raise ParameterError(f"kind {kind!r} with {lines} lines of potentials for {n_heads} heads: need 'coupled' "
                             "with one line or 'static' with one per head")
    lam = pot[:, :-1] - pot[:, 1:]
    price = np.maximum(lam, 0.0)
    starts = np.zeros((lines, T + 1))
    terms, slack, total = 0.0, 0.0, 0.0
    for h in range(n_heads):
        line = 0 if kind == "coupled" else h
        got = best_exits(np.asarray(rows(h), dtype=np.float64), pot[line])
        terms, slack, total = terms + float(got.term.sum()), slack + got.slack, total + got.total
        kept = np.flatnonzero(got.step >= 0)
        np.add.at(starts[line], kept, 1.0)  # token i resident over [i, step]
        np.add.at(starts[line], got.step[kept] + 1, -1.0)
    per_line = price.sum(axis=1)
    slots = np.array([float(budget)]) if kind == "coupled" else _greedy_split(per_line, budget, T)
    held = float(slots @ per_line)
    # the slot term and the sums are formed in doubles: (T + lines + 4) u of their terms' magnitudes covers them
    slack += (T + lines + 4) * 2.0 ** -52 * (total + abs(terms) + budget * float(np.abs(lam).sum()))
    return total - held + terms - slack, np.cumsum(starts, axis=1)[:, :T] - slots[:, None]


def _greedy_split(value: np.ndarray, budget: int, T: int) -> np.ndarray:
    """The split ``c`` maximising ``sum_h c_h value_h`` over ``0 <= c_h <= T``, ``sum_h c_h <= budget`` (``value >=
    0``): the most valuable lines filled first (a fractional knapsack of unit weights)."""
    slots = np.zeros(value.size)
    left = float(budget)
    for h in np.argsort(-value, kind="stable"):
        slots[h] = min(float(T), left)
        left -= slots[h]
    return slots


@dataclass(frozen=True)
class DualBound:
    """What :func:`maximise_dual` found: ``bound`` the best lower bound of its ``evaluations``, ``start`` the first
    (at the given prices), and the prices attaining ``bound`` as line potentials ``(lines, T + 1)``."""

    bound: float
    start: float
    evaluations: int
    line_potentials: np.ndarray


def maximise_dual(rows: Callable[[int], np.ndarray], n_heads: int, line_pot: np.ndarray, budget: int, kind: str,
                  upper: float, evaluations: int = EVALUATIONS) -> DualBound:
    """The best lower bound of at most ``evaluations`` evaluations of the dual :func:`dual_value` (one pass over
    the complete rows each), climbing from the prices of ``line_pot`` ``(lines, T + 1)``.

    The dual is concave in the prices (a minimum of affine functions of them), and maximising it over prices ``>=
    0`` is the Lagrangian dual problem (Lübbecke & Desrosiers 2005, §2.2; Held, Wolfe & Crowder, "Validation of
    subgradient optimization", *Math. Programming* 6, 1974).  Projected subgradient steps with Polyak's step size
    (Polyak, "Minimization of unsmooth functionals", 1969): ``lambda <- max(0, lambda + (upper - g) d / |d|^2)``,
    ``d`` the supergradient with the components that would leave ``lambda >= 0`` set to 0, ``upper`` a known
    upper bound on the optimum (a feasible schedule's regret on the complete rows) standing in for the unknown
    optimal value.  Every evaluation is a valid bound whatever the steps do, so the best is kept, the first being
    the given prices' own; it stops early when ``d = 0`` (the prices are optimal) or the bound reaches ``upper``."""
    pot = np.atleast_2d(np.asarray(line_pot, dtype=np.float64))
    value, d = dual_value(rows, n_heads, pot, budget, kind)
    start, best, best_pot, n = value, value, pot, 1
    lam = np.maximum(pot[:, :-1] - pot[:, 1:], 0.0)
    while n < evaluations:
        d = np.where((lam <= 0.0) & (d < 0.0), 0.0, d)
        norm = float((d * d).sum())
        if norm == 0.0 or best >= upper:
            break
        lam = np.maximum(lam + (upper - value) / norm * d, 0.0)
        pot = np.concatenate([np.zeros((lam.shape[0], 1)), -np.cumsum(lam, axis=1)], axis=1)
        value, d = dual_value(rows, n_heads, pot, budget, kind)
        n += 1
        if value > best:
            best, best_pot = value, pot
    return DualBound(best, start, n, best_pot)


# the capacities around each head's share of a truncated static solve at which its own dual is climbed
# (static_bound): on needle-400-d10 at K = 128, factors 0.5-1.5 in five steps gave 529.7, these eleven 557.7
# (optimum 587.03, the unclimbed bound 394.7)
SHARE_FACTORS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5, 2.0)


def static_bound(rows: Callable[[int], np.ndarray], line_pot: np.ndarray, budget: int, slots, targets,
                 evaluations: int) -> tuple[float, int]:
    """``(bound, evaluations)``: a lower bound on the static optimum ``min_{sum_h k_h <= budget} sum_h OPT_h(k_h)``
    of the heads ``rows(h)`` (complete, dense ``(T, T)``) from a truncated solve's split ``slots`` (one share per
    head), per-head regrets ``targets`` and line potentials ``line_pot`` ``(heads, T + 1)``.

    The static dual itself climbs badly (its slot term is a knapsack over the heads, :func:`dual_value`), so the
    bound is built per head (Lagrangian decomposition of the split; Geoffrion, "Lagrangean relaxation for integer
    programming", *Math. Programming Study* 2, 1974): for each capacity ``c`` among ``SHARE_FACTORS`` times the head's
    share, the head's own dual is climbed (:func:`maximise_dual` with one head, ``evaluations`` each, its share's
    regret as the target); at the prices found, ``g_h(lambda; k) = g_h(lambda; c) + (c - k) sum_t max(lambda_t,
    0)`` is a lower bound on ``OPT_h(k)`` for *every* ``k`` (the dual is affine in the capacity).  So ``f_h(k) =
    max(0, max over the lines)`` is a convex lower bound on ``OPT_h``, and the least ``sum_h f_h(k_h)`` over integer
    splits -- the total at ``k = 0`` less the ``budget`` largest decrements ``f_h(k) - f_h(k + 1)``, which are
    non-increasing in ``k`` for each head (convexity), so the greedy choice is a split -- bounds the static
    optimum."""
    pot = np.atleast_2d(np.asarray(line_pot, dtype=np.float64))
    T = pot.shape[1] - 1
    k = np.arange(T + 1)
    floors, n = np.zeros((pot.shape[0], T + 1)), 0
    for h in range(pot.shape[0]):
        a = np.asarray(rows(h), dtype=np.float64)
        for c in sorted({min(T, max(1, round(slots[h] * f))) for f in SHARE_FACTORS}):
            got = maximise_dual(lambda _: a, 1, pot[h], c, "coupled", float(targets[h]), evaluations)
            lam = got.line_potentials[0, :-1] - got.line_potentials[0, 1:]
            # the slot term at k instead of c, formed in doubles: (T + 5) u of its largest size, k <= T
            line = got.bound + (c - k) * float(np.maximum(lam, 0.0).sum()) - (
                (T + 5) * 2.0 ** -52 * T * float(np.abs(lam).sum()))
            floors[h] = np.maximum(floors[h], line)
            n += got.evaluations
    drops = np.sort((floors[:, :-1] - floors[:, 1:]).ravel())[::-1]
    return float(floors[:, 0].sum() - drops[:budget].sum()), n


def lagrangian_bound(rows: list[np.ndarray], line_pot: np.ndarray, capacity: int) -> float:
    """:func:`dual_value` of the heads ``rows`` sharing one line of ``capacity`` slots at the prices of
    ``line_pot`` ``(T + 1,)``: the bound alone (one head with its own capacity: the per-head optimum ``OPT``)."""
    return dual_value(lambda h: rows[h], len(rows), line_pot, capacity, "coupled")[0]


def verify(rows: list[np.ndarray], res) -> list[tuple[int, int, int, Fraction]]:
    """The exits of the complete network on which ``res``'s exact potentials break complementary slackness, as
    ``(head, token, step, rc)``: an unused exit with ``rc < 0`` or a used one with ``rc > 0`` (``rc = -P(i, t) +
    pi(tau) - pi(L_{t + 1})`` from the rows, summed in exact rationals).  Empty, with the simplex's certificate on
    the arcs it solved, means ``res`` (a :class:`kvcore.optima.priced.PricedResult`) is optimal on complete
    rows.  Small instances only."""
    bad = []
    for h, a in enumerate(rows):
        a = np.asarray(a, dtype=np.float64)
        line, T = res.line_potentials[0 if res.kind == "coupled" else h], a.shape[0]
        for i in range(T):
            P = Fraction(0)
            for t in range(i, T):
                if a[t, i] <= 0:
                    continue
                P += Fraction(float(a[t, i]))
                rc = -P + res.item_potentials[h][i] - line[t + 1]
                if (rc > 0) if res.drops[h, i] == t + 1 else (rc < 0):
                    bad.append((h, i, t, rc))
    return bad


__all__ = ["DualBound", "EVALUATIONS", "KINDS", "SHARE_FACTORS", "dual_value", "lagrangian_bound", "maximise_dual",
           "static_bound", "verify"]
