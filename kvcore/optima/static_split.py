"""The exact static split of a budget over many heads, from one-head solves and the exchange condition.

Problem (SPEC section 3; paper §8, §11): ``min sum_h OPT_h(k_h)`` over integer splits ``sum_h k_h = B``, ``0 <= k_h
<= T``, each ``OPT_h(k)`` head ``h``'s NM optimum with ``k`` slots on its complete rows.  Each ``OPT_h`` is convex in
``k`` (the one-head network's least cost is convex in its supply and integral at every integer supply;
:mod:`kvcore.optima.successive`), so a separable convex allocation: a split is optimal exactly when no unit moved
between two heads lowers the sum, i.e. when

    ``max_h [OPT_h(k_h) - OPT_h(k_h + 1)]  <=  min_h [OPT_h(k_h - 1) - OPT_h(k_h)]``

(the most any head gains from one more slot is at most the least any head loses from one fewer; by convexity no
larger move gains either; Gross, "A class of discrete-type minimization problems", RAND RM-1644, 1956; Ibaraki &
Katoh, *Resource Allocation Problems*, 1988, ch. 4).  The one network over every head that picks the split itself
(:mod:`kvcore.optima.priced`, ``start="top"``) needs no convexity but a long tail of pricing rounds as the split
moves: 18 rounds, 183 s of CPU on needle-2000-d50 at K = 128 (issue 52).  Here:

1. the coupled slot prices (:func:`kvcore.optima.dual_start.dual_prices`) suggest a split
   (:func:`kvcore.optima.dual_start.resident_share`, rounded to whole slots summing to ``B``);
2. each head is solved exactly at its share by the one-head priced solve, starting from the exits near its own
   prices there (``SHARE_EVALUATIONS`` dual steps from the coupled ones);
3. from those optima, successive shortest paths in doubles move one slot at a time from the head that loses least to
   the one that gains most, while the gain exceeds the loss (:class:`kvcore.optima.successive.HeadFlow`, about 5 ms
   a path at 2,000 steps);
4. every head is solved exactly at ``k_h - 1``, ``k_h`` and ``k_h + 1`` (starting from the exits near the prices
   the paths left), and the condition above is checked on the exact regrets (Fractions).  Where it fails -- the
   doubles misjudged a near tie -- one slot moves on the exact values and the two heads' new neighbours are solved,
   until it holds: each such move lowers the exact sum, so this ends.

Only step 4 certifies; steps 1-3 choose where it looks.  The split is the static optimum whenever every one-head
solve is certified and the condition holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from .dual_start import HeldRows, dual_prices, resident_share
from .successive import HeadFlow

PREFIX_HELD = 8  # heads whose prefix sums (8 T^2 bytes each, 32 MB at 2,000 steps) stay made between moves
# dual evaluations per head at its share before its first exact solve: on needle-2000-d50 (K = 128), ten heads took
# 0.49 s each from the coupled prices (13 rounds), 0.37 s after 20 evaluations (5 rounds), 0.43 s after 100 (4)
SHARE_EVALUATIONS = 20
NOISE = 1e-9  # a move in doubles needs its gain to exceed its loss by this much (mass units; rounding is far below)


@dataclass(frozen=True)
class Split:
    """What :func:`exchange_split` found: ``slots`` per head, ``results`` each head's one-head optimum there (and
    ``solved`` every one-head result it computed, for the certificate's sums), ``moves`` in doubles and
    ``exact_moves`` on the exact values, ``gain`` = ``max_h OPT_h(k_h) - OPT_h(k_h + 1)`` and ``loss`` = ``min_h
    OPT_h(k_h - 1) - OPT_h(k_h)`` (``None`` where no head can move that way), ``certified``: every solve certified
    and ``gain <= loss``; ``evaluations`` of the Lagrangian dual (the coupled line's, then each head's at its
    share)."""

    slots: np.ndarray
    results: list
    solved: list
    moves: int
    exact_moves: int
    gain: Fraction | None
    loss: Fraction | None
    certified: bool
    evaluations: int


def whole_slots(share: np.ndarray, budget: int, T: int) -> np.ndarray:
    """``share`` (non-negative, summing to ``budget``) as whole slots in ``[0, T]`` summing to ``budget`` (at most
    ``len(share) T``): each rounded down, then the largest remainders up (Hamilton's method), then any slots a cap
    at ``T`` left spread over the heads with room."""
    share = np.minimum(np.maximum(np.asarray(share, dtype=np.float64), 0.0), float(T))
    k = np.floor(share).astype(np.int64)
    order = np.argsort(-(share - k), kind="stable")
    for h in order:
        if k.sum() >= budget:
            break
        if k[h] < T:
            k[h] += 1
    while k.sum() < budget:  # only when capped shares fell short of the budget
        k[np.flatnonzero(k < T)[0]] += 1
    return k


def _line(res) -> np.ndarray:
    """A one-head result's line potentials ``(T + 1,)`` as doubles."""
    return np.array([float(x) for x in res.line_potentials[0]])


def _prices(res) -> np.ndarray:
    """The slot prices ``(T,)`` of a one-head result's line potentials."""
    line = _line(res)
    return line[:-1] - line[1:]


def _flow(res, rows: Callable[[], np.ndarray]) -> HeadFlow:
    item = np.array([np.nan if x is None else float(x) for x in res.item_potentials[0]])
    return HeadFlow(rows, res.budget, res.drops[0], _line(res), item)


def exchange_split(held: HeldRows, budget: int, solve: Callable, say: Callable[[str], None] | None = None) -> Split:
    """The exact static split (module docstring) of the heads ``held`` holds with ``budget`` slots.  ``solve(h, k,
    prices)`` returns head ``h``'s exact one-head optimum with ``k`` slots (a
    :class:`kvcore.optima.priced.PricedResult`) starting from the exits near the slot prices ``prices`` ``(T,)``."""
    H, T = held.packed.shape[0], held.T
    say = say or (lambda _: None)
    lam, evaluations = dual_prices(held, np.array([float(budget)]), np.zeros(H, np.int64))
    k = whole_slots(resident_share(held, lam, budget), budget, T)
    solved: list[dict] = [{} for _ in range(H)]
    everything: list = []

    def exact(h: int, c: int, prices: np.ndarray):
        if c not in solved[h]:
            solved[h][c] = solve(h, c, prices)
            everything.append(solved[h][c])
        return solved[h][c]

    def stopped(results) -> Split:  # a one-head solve stopped uncertified: no exchange can be trusted
        return Split(k, results, everything, 0, 0, None, None, False, evaluations)

    flows = []
    for h in range(H):  # each head's own prices at its share, a few dual steps from the coupled ones, then exact
        own, more = dual_prices(held.head(h), np.array([float(k[h])]), np.zeros(1, np.int64), SHARE_EVALUATIONS,
                                start=lam)
        evaluations += more
        res = exact(h, int(k[h]), own[0])
        if not res.certificate.certified:
            return stopped([exact(g, int(k[g]), lam[0]) for g in range(H)])
        flows.append(_flow(res, lambda h=h: held.dense(h)))
        if h >= PREFIX_HELD:
            flows[h - PREFIX_HELD].release()
    say(f"static split: {H} heads solved at their shares of the coupled prices")
    moves = _move(flows)
    k = np.array([f.k for f in flows])
    say(f"static split: {moves} slots moved by shortest paths")
    for h in range(H):  # the exact neighbours, from the exits near the prices the paths left
        for step in (-1, 0, 1):
            if 0 <= k[h] + step <= T and not exact(h, int(k[h] + step), flows[h].prices(step)).certificate.certified:
                return stopped([exact(g, int(k[g]), flows[g].prices(0)) for g in range(H)])
    del flows
    exact_moves = 0
    while True:
        regret = [{c: r.exact_regret for c, r in s.items()} for s in solved]
        gains = {h: regret[h][k[h]] - regret[h][k[h] + 1] for h in range(H) if k[h] < T}
        losses = {h: regret[h][k[h] - 1] - regret[h][k[h]] for h in range(H) if k[h] > 0}
        b = max(gains, key=gains.get) if gains else None
        a = min(losses, key=losses.get) if losses else None
        if b is None or a is None or gains[b] <= losses[a]:
            break
        k[b], k[a] = k[b] + 1, k[a] - 1  # the exact sum falls by gains[b] - losses[a] > 0
        exact_moves += 1
        for h, c in ((b, k[b] + 1), (a, k[a] - 1)):
            if 0 <= c <= T and not exact(h, int(c), _prices(solved[h][k[h]])).certificate.certified:
                return stopped([solved[g][k[g]] for g in range(H)])
    say(f"static split: {exact_moves} slots moved on exact values; {len(everything)} one-head solves")
    return Split(k, [solved[h][k[h]] for h in range(H)], everything, moves, exact_moves,
                 gains[b] if gains else None, losses[a] if losses else None, True, evaluations)


def _move(flows: list[HeadFlow]) -> int:
    """Move slots between the heads in doubles while the most any gains from one more exceeds the least any loses
    from one fewer (by more than ``NOISE``); at most ``sum_h k_h`` moves (each lowers the sum, a guard against
    rounding).  Keeps the prefix sums of the ``PREFIX_HELD`` heads used last."""
    up = np.array([f.up for f in flows])
    down = np.array([f.down for f in flows])
    recent: list[int] = []
    moves, limit = 0, sum(f.k for f in flows)
    while moves < limit:
        b, a = int(np.argmax(up)), int(np.argmin(down))
        if a == b or not up[b] > down[a] + NOISE:
            break
        for h, step in ((b, 1), (a, -1)):
            flows[h].move(step)
            up[h], down[h] = flows[h].up, flows[h].down
            if h in recent:
                recent.remove(h)
            recent.append(h)
            if len(recent) > PREFIX_HELD:
                flows[recent.pop(0)].release()
        moves += 1
    for f in flows:
        f.release()
    return moves


__all__ = ["NOISE", "PREFIX_HELD", "SHARE_EVALUATIONS", "Split", "exchange_split", "whole_slots"]
