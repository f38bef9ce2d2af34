"""One memory budget split over several caches (attention heads): the exact static allocation and the uniform one.

Paper §8 ("Per-head and per-layer budgets are a multi-cache allocation problem") and §11 ("Optimal per-head and
per-layer allocation"): heads ``h = 1..H`` each run with a fixed number ``k_h`` of slots, ``sum_h k_h = B``, and the
quantity to minimize is the summed optimal no-refetch regret ``sum_h OPT_h(k_h)`` (:class:`RegretCurve`).

When every curve is convex (its decreases ``d_h(k) = OPT_h(k - 1) - OPT_h(k)`` are non-increasing in ``k``) the
greedy rule -- hand out the ``B`` slots one at a time, each to the head whose next slot lowers its regret most -- is
exactly optimal: the ``B`` decreases it collects are the ``B`` largest of all decreases, and with non-increasing
decreases per head every allocation collects some ``B`` of them, a prefix per head (separable convex resource
allocation; Gross 1956, Fox, Management Science 1966; Ibaraki & Katoh, *Resource Allocation Problems*, MIT Press
1988, ch. 4).  Its optimality condition is the discrete form of §8's "equal marginal regret reduction per slot":
every head's last slot is worth at least every head's next one, ``min_h d_h(k_h) >= max_h d_h(k_h + 1)``
(:func:`marginal_interval`).  Without convexity greedy can fail; :func:`dp_allocation` (dynamic programming over heads,
exact for any curves, ``O(H B^2)``) and :func:`brute_allocation` (every split, tiny cases) are the references the
tests compare it with.  Every value is an exact rational (:class:`fractions.Fraction`), so the comparisons have no
tolerance.
"""

from __future__ import annotations

import heapq
import itertools
import math
from fractions import Fraction
from typing import Callable, Sequence

from ..errors import ParameterError
from ..traces import AttentionTrace
from .capacity_curve import entries_of, optimum_curve
from .mincost import as_objects


class RegretCurve:
    """``OPT(k)`` of one head for ``k = 0, 1, ...``, exact (a Fraction of stored attention mass), solved on demand and
    remembered; ``OPT(0)`` is the head's whole stored mass.  ``solve(k) -> Fraction`` is the solver (default: the
    certified NM flow of :mod:`kvcore.optima.capacity_curve`; a test passes a perturbed one)."""

    def __init__(self, trace: AttentionTrace | None = None, solve: Callable[[int], Fraction] | None = None,
                 name: str = ""):
        if (trace is None) == (solve is None):
            raise ParameterError("RegretCurve needs a trace or a solve function, not both")
        self.name = name or (trace.source if trace is not None else "curve")
        self.certificates: dict[int, tuple[str, float]] = {}
        self.entries = entries_of([trace]) if trace is not None else None  # the stored entries the flow is solved on
        if self.entries is not None:
            self.total = exact_mass(self.entries.exact, self.entries.unit)
            self._solve = self._flow
        else:
            self._solve = solve
            self.total = solve(0)
        self._values: dict[int, Fraction] = {0: self.total}
        self._flat_from: int | None = None

    def _flow(self, k: int) -> Fraction:
        (point,) = optimum_curve(self.entries, [k], warm=False)
        self.certificates[k] = (point.solver, point.gap_bound)
        return self._lost_mass(point.lost)

    def _lost_mass(self, lost) -> Fraction:
        """The exact mass of the entries ``lost`` marks, summed over the fewer side: at small ``k`` on complete rows
        nearly every entry is lost, and the exact sum of ~190 k integers took most of a curve point (issue 52)."""
        if 2 * int(lost.sum()) <= lost.size:
            return exact_mass(self.entries.exact[lost], self.entries.unit)
        return self.total - exact_mass(self.entries.exact[~lost], self.entries.unit)

    def __call__(self, k: int) -> Fraction:
        """``OPT(k)``.  Once two consecutive solved values are equal, larger ``k`` return that value unsolved: a
        convex non-increasing curve is flat from its first zero decrease on (the greedy allocation assumes
        convexity anyway; :meth:`solved` never takes the shortcut)."""
        if k < 0:
            raise ParameterError(f"{self.name}: capacity {k} < 0")
        if k in self._values:
            return self._values[k]
        if self._flat_from is not None and k > self._flat_from:
            return self._values[self._flat_from]
        return self.solved(k)

    def solved(self, k: int) -> Fraction:
        """``OPT(k)`` from the solver, never inferred."""
        if k not in self._values:
            self._store(k, self._solve(k))
        return self._values[k]

    def _store(self, k: int, value: Fraction) -> None:
        self._values[k] = value
        for j in (k, k + 1):  # the first of two equal consecutive solved values
            if j - 1 in self._values and self._values.get(j) == self._values[j - 1]:
                self._flat_from = min(j, self._flat_from if self._flat_from is not None else j)

    def decrease(self, k: int) -> Fraction:
        """``d(k) = OPT(k - 1) - OPT(k)``, the regret the ``k``-th slot removes (``k >= 1``)."""
        return self(k - 1) - self(k)

    def values(self, upto: int) -> list[Fraction]:
        """``OPT(0..upto)``, every one solved.  The flow curve solves the missing capacities on one network, each
        from the empty cache with its line capacity replaced (:func:`~kvcore.optima.capacity_curve.optimum_curve`,
        ``warm=False``; the same certified optima): building the network is much of a solve on complete rows --
        ``OPT(1..24)`` of the 12 complete heads of 617 steps took 22 s of CPU one network per capacity, 5.5 s on
        one network per head with the lost mass summed over the fewer entries (:meth:`_lost_mass`; measured,
        issue 52)."""
        missing = [k for k in range(1, upto + 1) if k not in self._values]
        if missing and self.entries is not None:
            for point in optimum_curve(self.entries, missing, warm=False):
                self.certificates[point.capacity] = (point.solver, point.gap_bound)
                self._store(point.capacity, self._lost_mass(point.lost))
        return [self.solved(k) for k in range(upto + 1)]


def exact_mass(exact, unit) -> Fraction:
    """``sum(exact) * unit`` as an exact Fraction (``exact``: int64 array or :class:`~kvcore.optima.limbs.Limbs`)."""
    return sum(as_objects(exact).tolist(), 0) * Fraction(unit)


def greedy_order(curves: Sequence[Callable[[int], Fraction]], total: int, limit: int | None = None) -> list[int]:
    """The head that receives each of ``total`` slots handed out one at a time to the largest next decrease (ties:
    the head with fewer slots, then the lower index -- so equal decreases, zeros included, are spread evenly).
    ``limit``: no head gets more slots (a head with ``T`` slots keeps every token).  The first ``B`` entries are
    the greedy allocation of ``B``, for every ``B <= total``."""
    n = _check(curves, total, limit)
    k = [0] * n
    heap = [(-(c(0) - c(1)), 0, h) for h, c in enumerate(curves)]
    heapq.heapify(heap)
    order = []
    for _ in range(total):
        _, _, h = heapq.heappop(heap)
        k[h] += 1
        order.append(h)
        if limit is None or k[h] < limit:
            c = curves[h]
            heapq.heappush(heap, (-(c(k[h]) - c(k[h] + 1)), k[h], h))
    return order


def greedy_allocation(curves: Sequence[Callable[[int], Fraction]], total: int, limit: int | None = None) -> list[int]:
    """The slots of each curve after :func:`greedy_order`.  Exact when every curve is convex (module docstring)."""
    order = greedy_order(curves, total, limit)
    return [order.count(h) for h in range(len(curves))]


def threshold_allocation(curves: Sequence[Callable[[int], Fraction]], total: int, limit: int,
                         rounds: int = 60) -> list[int]:
    """An allocation collecting the ``total`` largest decreases, as :func:`greedy_allocation` does (equal regret; it
    may split tied decreases differently), from far fewer curve values when the budget is large: exact when every
    curve is convex.

    With non-increasing decreases, the slots of head ``h`` whose decrease is ``>= lam`` are a prefix ``1..c_h(lam)``,
    found by bisection on ``k``, and ``S(lam) = sum_h c_h(lam)`` is non-increasing in ``lam``.  Bisect ``lam`` (at
    most ``rounds`` times, each head's bracket for ``c_h`` narrowing with it) to an ``hi`` with ``S(hi) <= total``;
    every decrease ``>= hi`` is among the ``total`` largest, so greedy continued from ``c_h(hi)`` for the remaining
    ``total - S(hi)`` slots collects the ``total`` largest.  About ``log2(limit) + rounds`` values per head instead
    of ``k_h + 1``."""
    n = _check(curves, total, limit)

    def count(h: int, lam: Fraction, lo: int, hi: int) -> int:
        """The largest ``k`` in ``lo..hi`` with ``d_h(k) >= lam`` (``lo`` when none above it is)."""
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if curves[h](mid - 1) - curves[h](mid) >= lam:
                lo = mid
            else:
                hi = mid - 1
        return lo

    top = max(curves[h](0) - curves[h](1) for h in range(n))
    lam_lo, lam_hi = Fraction(0), top + 1
    k_lo, k_hi = [limit] * n, [0] * n  # c_h(lam_lo), c_h(lam_hi)
    for _ in range(rounds):
        if sum(k_lo) - sum(k_hi) <= n:
            break
        lam = (lam_lo + lam_hi) / 2
        k = [count(h, lam, k_hi[h], k_lo[h]) for h in range(n)]
        if sum(k) <= total:
            lam_hi, k_hi = lam, k
        else:
            lam_lo, k_lo = lam, k
    k = list(k_hi)
    heap = [(-(curves[h](k[h]) - curves[h](k[h] + 1)), k[h], h) for h in range(n) if k[h] < limit]
    heapq.heapify(heap)
    for _ in range(total - sum(k)):
        _, _, h = heapq.heappop(heap)
        k[h] += 1
        if k[h] < limit:
            heapq.heappush(heap, (-(curves[h](k[h]) - curves[h](k[h] + 1)), k[h], h))
    return k


def certified_allocation(curves: Sequence[RegretCurve], total: int, limit: int) -> list[int]:
    """:func:`threshold_allocation`'s allocation -- the ``total`` first slots in :func:`greedy_order`'s order, which
    is ``(-d_h(j), j - 1, h)`` over every head's ``j``-th slot -- from a handful of exact values per head.

    The candidate comes from the decreases estimated in floating point (:func:`kvcore.optima.float_curve.
    estimated_allocation`, one shortest path per slot instead of ~90 flows per head); it is accepted only if exact
    values prove it is that prefix: with non-increasing decreases each head's slots come in its order, so a set of
    prefixes is the first ``total`` slots exactly when every head's last slot precedes every head's next one, which
    needs ``OPT_h`` at ``k_h - 1``, ``k_h`` and ``k_h + 1`` only.  Otherwise (a near tie the rounding misordered,
    or curves without stored entries) :func:`threshold_allocation` decides, reusing every value solved.  Measured on
    SmolLM2's 90 heads (three prompts at K = 64 and 128, docs/budgets.md, "In the model"): 45.8-70.3 s of
    CPU for the threshold alone, 4.2-6.6 s this way, the same split each time."""
    from .float_curve import estimated_allocation

    n = _check(curves, total, limit)
    if any(getattr(c, "entries", None) is None for c in curves):
        return threshold_allocation(curves, total, limit)
    k = estimated_allocation([c.entries for c in curves], total, limit)
    last = [(c(x) - c(x - 1), x - 1, h) for h, (c, x) in enumerate(zip(curves, k)) if x > 0]
    nxt = [(c(x + 1) - c(x), x, h) for h, (c, x) in enumerate(zip(curves, k)) if x < limit]
    if not last or not nxt or max(last) < min(nxt):
        return k
    return threshold_allocation(curves, total, limit)


def uniform_allocation(n_heads: int, total: int) -> list[int]:
    """``total // n_heads`` slots each, the remainder one each to the first heads."""
    if n_heads < 1:
        raise ParameterError("no heads to allocate to")
    q, r = divmod(_whole(total), n_heads)
    return [q + (h < r) for h in range(n_heads)]


def dp_allocation(curves: Sequence[Callable[[int], Fraction]], total: int) -> tuple[Fraction, list[int]]:
    """``(min sum_h OPT_h(k_h), k)`` over every split with ``sum k_h = total``, by dynamic programming over heads
    (exact for any curves; ``O(H total^2)`` evaluations of exact sums)."""
    n = _check(curves, total)
    best = [curves[0](b) for b in range(total + 1)]  # best[b]: least regret of heads 0..h with b slots
    choice = [[b for b in range(total + 1)]]
    for h in range(1, n):
        vals = [curves[h](j) for j in range(total + 1)]
        new, pick = [], []
        for b in range(total + 1):
            j = min(range(b + 1), key=lambda j: (best[b - j] + vals[j], j))
            new.append(best[b - j] + vals[j])
            pick.append(j)
        best = new
        choice.append(pick)
    k, b = [0] * n, total
    for h in range(n - 1, 0, -1):
        k[h] = choice[h][b]
        b -= k[h]
    k[0] = b
    return best[total], k


def brute_allocation(curves: Sequence[Callable[[int], Fraction]], total: int) -> Fraction:
    """The least summed regret over every split of ``total`` (tiny cases only: ``C(total + H - 1, H - 1)`` splits)."""
    n = _check(curves, total)
    if math.comb(total + n - 1, n - 1) > 200_000:
        raise ParameterError(f"brute_allocation: {n} heads and {total} slots are too many splits")
    return min(sum(curves[h](k) for h, k in enumerate(split))
               for split in itertools.product(range(total + 1), repeat=n) if sum(split) == total)


def allocation_regret(curves: Sequence[Callable[[int], Fraction]], k: Sequence[int]) -> Fraction:
    return sum((c(x) for c, x in zip(curves, k)), Fraction(0))


def marginal_interval(curves: Sequence[Callable[[int], Fraction]],
                      k: Sequence[int]) -> tuple[Fraction | None, Fraction]:
    """``(least decrease of a last slot, largest decrease of a next slot)`` at allocation ``k``: §8's condition holds
    (no slot moves to another head with a gain) exactly when the first is ``>=`` the second.  Heads with no slot
    have no last slot; with no slot anywhere the first is None."""
    last = [c(x - 1) - c(x) for c, x in zip(curves, k) if x > 0]
    nxt = [c(x) - c(x + 1) for c, x in zip(curves, k)]
    return (min(last) if last else None), max(nxt)


def convexity_violations(values: Sequence[Fraction]) -> dict[str, list[int]]:
    """Where a curve ``values[k]`` (``k = 0, 1, ...``) is not non-increasing (``increase``: ``k`` with
    ``values[k] > values[k - 1]``) or not convex (``concave``: ``k`` with a negative second difference
    ``values[k + 1] - 2 values[k] + values[k - 1]``), in exact arithmetic."""
    inc = [k for k in range(1, len(values)) if values[k] > values[k - 1]]
    conc = [k for k in range(1, len(values) - 1) if values[k + 1] - 2 * values[k] + values[k - 1] < 0]
    return {"increase": inc, "concave": conc}


def _whole(total) -> int:
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ParameterError(f"total budget {total!r}: must be a whole number >= 0")
    return total


def _check(curves, total, limit: int | None = None) -> int:
    """The number of heads, after checking there is one, that ``total`` is a whole number and that the heads hold it
    at ``limit`` slots each (``None``: no limit)."""
    if not curves:
        raise ParameterError("no heads to allocate to")
    _whole(total)
    n = len(curves)
    if limit is not None and total > n * limit:
        raise ParameterError(f"total budget {total} exceeds {n} heads x {limit} slots")
    return n
