"""Slot prices near the Lagrangian dual's optimum, found on held rows, to start the priced optima from.

:mod:`kvcore.optima.priced` solves the coupled and static optima by pricing: a network on some of the exits, solved
exactly, every omitted exit priced from its potentials, repeated until none prices out.  How many rounds that takes
depends on the first network.  Started from each row's heaviest entries, the first potentials are far from the
complete network's, and at 2,000 tokens x 90 heads every round priced in about a million exits and each re-solve
took minutes (issue 52).  Started from the exits the *optimal* slot prices make each token choose, one round nearly
suffices -- so this module finds such prices first, from the rows alone, before any flow is solved.

The Lagrangian dual (:func:`kvcore.optima.lagrangian.dual_value`; Lübbecke & Desrosiers, *Operations Research* 53,
2005, §2.2) as an upper bound on the retained mass, with slot prices ``lambda_{l,t} >= 0`` on each line ``l`` and
``c_l`` slots on it::

    U(lambda) = sum_l c_l sum_t lambda_{l,t} + sum_{h,i} max(0, max_{t >= i} sum_{s=i..t} (a_h[s, i] - lambda_{l(h),s}))

is convex and piecewise linear; ``c_l - n_{l,t}(lambda)`` is a subgradient (``n_{l,t}`` the tokens of line ``l``
resident at step ``t`` when each keeps its best interval ``[i, t*]``).  Its minimum over ``lambda >= 0`` is the
network LP's optimum, hence the integral optimum's retained mass (the network matrix is totally unimodular).
:func:`dual_prices` minimises it with L-BFGS-B (Byrd, Lu, Nocedal & Zhu, *SIAM J. Sci. Comput.* 16, 1995), which on a
sum of 180,000 piecewise-linear terms behaves as on a smooth function: on needle-2000-d50 at K = 128 (coupled,
1,996 prices) 70 evaluations, 12.9 s of CPU, came within 8e-3 of the optimum's 12,885.27 (a relative 6e-7).  Nothing
here is trusted: the prices only choose the first network's exits (:func:`near_exits`), and the exact simplex and
the pricing of every omitted exit certify whatever the solve ends with.

The rows are held as each head's lower triangle, packed row by row in float64 (:class:`HeldRows`: ``H T (T + 1) /
2`` doubles, 1.44 GB at 2,000 tokens x 90 heads), because one evaluation reads them all and recomputing them from
the model each time would cost more than the whole solve.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..kernels import Kernel

# at most this many dual evaluations per line (needle-2000-d50: the coupled line stopped at 70, most of the 90
# static lines ran all 200)
EVALUATIONS = 200
MEMORY = 10  # L-BFGS-B correction pairs
HOLD_BYTES = 3 * 2**30  # rows held up to this size; beyond it the priced optima start from the heaviest entries


class HeldRows:
    """The complete rows of ``n_heads`` heads of ``T`` steps, each head's lower triangle packed row by row
    (``packed[h, t (t + 1) / 2 + i] = a_h[t, i]``, ``i <= t``)."""

    def __init__(self, n_heads: int, T: int, packed: np.ndarray | None = None):
        self.T = T
        self.packed = np.empty((n_heads, T * (T + 1) // 2)) if packed is None else packed
        self._low = _lower(T)

    def head(self, h: int) -> "HeldRows":
        """Head ``h``'s rows alone, a view (no copy)."""
        return HeldRows(1, self.T, self.packed[h:h + 1])

    @staticmethod
    def size(n_heads: int, T: int) -> int:
        """Bytes the rows of ``n_heads`` heads of ``T`` steps take held."""
        return 8 * n_heads * (T * (T + 1) // 2)

    def hold(self, h: int, a: np.ndarray) -> None:
        self.packed[h] = a[self._low]

    def dense(self, h: int) -> np.ndarray:
        """Head ``h``'s rows as the dense ``(T, T)`` array (zero above the diagonal)."""
        a = np.zeros((self.T, self.T))
        a[self._low] = self.packed[h]
        return a


@lru_cache(maxsize=4)
def _lower(T: int) -> tuple[np.ndarray, np.ndarray]:
    """The lower triangle's indices, made once per ``T`` (16 ms at 2,000 steps, and every one-head solve of the
    static split holds its rows)."""
    return np.tril_indices(T)


def _best_intervals(packed, T, lam, best, arg):
    """Each token's best interval against the slot prices ``lam`` ``(T,)``: ``best[i] = max(0, max_{t >= i}
    sum_{s=i..t} (a[s, i] - lam[s]))`` and ``arg[i]`` the first ``t`` attaining it (``-1``: none above 0, the token
    is not kept), one pass over the packed rows in memory order with a running sum per token."""
    run = np.zeros(T)
    for i in range(T):
        best[i] = 0.0
        arg[i] = -1
    base = 0
    for t in range(T):
        price = lam[t]
        for i in range(t + 1):
            s = run[i] + packed[base + i] - price
            run[i] = s
            if s > best[i]:
                best[i] = s
                arg[i] = t
        base += t + 1


best_intervals = Kernel(_best_intervals)


def _dual_pass(held: HeldRows, heads: np.ndarray, lam: np.ndarray) -> tuple[float, np.ndarray]:
    """``(sum of the tokens' terms, resident count at each step)`` of the heads ``heads`` on one line at its prices
    ``lam`` ``(T,)`` (each token kept over its best interval, :func:`_best_intervals`)."""
    T = held.T
    best, arg, starts = np.empty(T), np.empty(T, np.int64), np.zeros(T + 1)
    terms = 0.0
    for h in heads:
        best_intervals(held.packed[h], np.int64(T), lam, best, arg)
        terms += float(best.sum())
        kept = np.flatnonzero(arg >= 0)
        starts += np.bincount(kept, minlength=T + 1) - np.bincount(arg[kept] + 1, minlength=T + 1)
    return terms, np.cumsum(starts)[:T]


def dual_prices(held: HeldRows, capacity: np.ndarray, line_of: np.ndarray, evaluations: int = EVALUATIONS,
                start: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """``(lambda (lines, T), evaluations used)``: slot prices minimising ``U`` (module docstring) for lines with
    ``capacity[l]`` slots, head ``h`` on line ``line_of[h]``, by L-BFGS-B from ``start`` (default 0).  ``U`` is a
    sum over the lines, so each line is minimised on its own (at most ``evaluations`` passes over its heads): one
    L-BFGS-B run over all of them at once converged more slowly (on needle-400-d10 with 90 lines of one head each,
    the static start: 200 joint passes, 4.5 s, reached the regret bound 591.01; 130 passes per line on average,
    2.4 s, reached 591.09)."""
    lines, T = capacity.size, held.T
    x0 = np.zeros((lines, T)) if start is None else np.maximum(np.asarray(start, dtype=np.float64), 0.0)
    lam, used = np.empty((lines, T)), 0
    for line in range(lines):
        heads = np.flatnonzero(line_of == line)
        lam[line], n = _line_prices(held, heads, float(capacity[line]), evaluations, x0[line])
        used += n
    return lam, used


def _line_prices(held: HeldRows, heads: np.ndarray, capacity: float, evaluations: int, x0: np.ndarray
                 ) -> tuple[np.ndarray, int]:
    """One line's prices (:func:`dual_prices`) for its ``heads``."""
    from scipy.optimize import minimize

    used = [0]

    def value(lam: np.ndarray) -> tuple[float, np.ndarray]:
        terms, resident = _dual_pass(held, heads, lam)
        used[0] += 1
        return terms + capacity * float(lam.sum()), capacity - resident

    got = minimize(value, x0, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * held.T,
                   options={"maxfun": evaluations, "maxiter": evaluations, "maxcor": MEMORY})
    return got.x, used[0]  # L-BFGS-B keeps every iterate within the bounds


def _near_intervals(packed, T, lam, best, slack, token, step):
    """The exits ``(token, step)`` at positive entries whose interval is within ``slack`` of the token's best
    (``sum_{s=i..t} (a[s, i] - lam[s]) >= best[i] - slack``), by step; returns how many (``token`` and ``step``
    sized for them, or empty to count only)."""
    run = np.zeros(T)
    n = 0
    base = 0
    for t in range(T):
        price = lam[t]
        for i in range(t + 1):
            w = packed[base + i]
            s = run[i] + w - price
            run[i] = s
            if w > 0.0 and s >= best[i] - slack:
                if n < token.size:
                    token[n] = i
                    step[n] = t
                n += 1
        base += t + 1
    return n


near_intervals = Kernel(_near_intervals)


def near_exits(held: HeldRows, lam: np.ndarray, line_of: np.ndarray, slack: float
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per head ``(token, step)`` by token, then step: every exit whose interval is within ``slack`` of its token's
    best at the prices ``lam`` (:func:`_near_intervals`; with ``slack = 0`` each kept token's best exit and its
    exact ties), a positive entry each."""
    H, T = held.packed.shape[0], held.T
    best, arg, out = np.empty(T), np.empty(T, np.int64), []
    none = np.zeros(0, np.int64)
    for h in range(H):
        row, price = held.packed[h], lam[line_of[h]]
        best_intervals(row, np.int64(T), price, best, arg)
        n = near_intervals(row, np.int64(T), price, best, float(slack), none, none)
        tok, step = np.empty(n, np.int64), np.empty(n, np.int64)
        near_intervals(row, np.int64(T), price, best, float(slack), tok, step)
        order = np.lexsort((step, tok))
        out.append((tok[order], step[order]))
    return out


def resident_share(held: HeldRows, lam: np.ndarray, budget: int) -> np.ndarray:
    """Each head's share of ``budget`` for a static split, read from the coupled prices ``lam`` ``(1, T)``: its mean
    resident count over the steps at which the heads together hold more than ``budget`` tokens, scaled to sum to
    ``budget``.  On needle-400-d10 at K = 128 this came within 3.1 % (mean) of the exact static split."""
    H, T = held.packed.shape[0], held.T
    resident = np.array([_dual_pass(held, [h], lam[0])[1] for h in range(H)])
    full = np.flatnonzero(H * (np.arange(T) + 1) > budget)
    share = resident[:, full].mean(axis=1) if full.size else resident.mean(axis=1)
    share = np.maximum(share, 1e-9)
    return np.minimum(share * (budget / share.sum()), float(T))


__all__ = ["EVALUATIONS", "HOLD_BYTES", "HeldRows", "best_intervals", "dual_prices", "near_exits",
           "near_intervals", "resident_share"]
