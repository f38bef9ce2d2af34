"""The two compiled passes over one head's complete rows that :mod:`kvcore.optima.priced` makes each round.

* :func:`price_head`: every omitted exit's reduced cost from the flow's potentials, in doubles with a proven
  tolerance, the ones that price out, and the head's term of the Lagrangian bound
  (:func:`kvcore.optima.lagrangian.lagrangian_bound`); :func:`best_exits` the same pass with every exit blocked:
  only the bound's terms and each token's best exit (one evaluation of the Lagrangian dual,
  :func:`kvcore.optima.lagrangian.maximise_dual`);
* :func:`exact_prefix`: the exact prefix masses ``P(i, t)`` of the exits that enter, in int64 limbs
  (:mod:`kvcore.optima.limbs`) -- only their columns are read.

Both walk the dense ``(T, T)`` rows row by row (their memory order) and are compiled by numba
(:class:`kvcore.kernels.Kernel`; ``py_func`` is the plain function the tests also run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..kernels import Kernel
from .limbs import Limbs, normalize


@dataclass(frozen=True)
class _Priced:
    """One head's pricing: the exits to add ``(token, step)``, the omitted positive entries priced and the least
    ``rc - tol`` among them (``inf`` when none), and the head's term of the Lagrangian bound (:func:`price_head`) with
    its rounding allowance."""

    token: np.ndarray
    step: np.ndarray
    omitted: int
    margin: float
    bound_term: float
    bound_slack: float


@dataclass(frozen=True)
class BestExits:
    """One head's Lagrangian terms against line potentials (:func:`best_exits`): ``term`` ``(T,)`` each token's
    ``min(0, min_t (-P(i, t) + pi(L_i) - pi(L_{t + 1})))``, ``step`` the ``t`` attaining it (``-1``: none below 0,
    the token is not kept), ``total`` the head's total mass, and ``slack`` the rounding allowance of ``term.sum()``."""

    term: np.ndarray
    step: np.ndarray
    total: float
    slack: float


def _price_rows(a, blocked, line_pot, item_pot, per, gamma, cand_rc, cand_step, n_cand, term, term_step, total):
    """Row by row (the rows' memory order), each token's running prefix ``P`` in ``total``; per positive entry the
    Lagrangian path ``-P + pi(L_i) - pi(L_{t + 1})`` (least kept in ``term``, its step in ``term_step``) and, unless
    ``blocked`` (in the network, or skipped), ``rc`` and ``rc - tol``: the ``per`` most negative candidates per token
    kept sorted in ``cand_rc`` / ``cand_step`` (``n_cand`` of them).  Returns ``(omitted, least rc - tol)``."""
    T = a.shape[0]
    omitted = 0
    least = np.inf
    for t in range(T):
        lt = line_pot[t + 1]
        for i in range(t + 1):
            w = a[t, i]
            if w <= 0.0:
                continue
            P = total[i] + w
            total[i] = P
            path = -P + line_pot[i] - lt
            if path < term[i]:
                term[i] = path
                term_step[i] = t
            if blocked[t, i]:
                continue
            omitted += 1
            rc = -P + item_pot[i] - lt
            margin = rc - gamma * (P + abs(item_pot[i]) + abs(lt))
            if margin < least:
                least = margin
            if margin < 0.0:
                n = n_cand[i]
                if n < per or rc < cand_rc[i, n - 1]:
                    j = n if n < per else per - 1
                    while j > 0 and cand_rc[i, j - 1] > rc:
                        cand_rc[i, j] = cand_rc[i, j - 1]
                        cand_step[i, j] = cand_step[i, j - 1]
                        j -= 1
                    cand_rc[i, j] = rc
                    cand_step[i, j] = t
                    if n < per:
                        n_cand[i] = n + 1
    return omitted, least


price_rows = Kernel(_price_rows)


def price_head(a: np.ndarray, exits: tuple[np.ndarray, np.ndarray], line_pot: np.ndarray, item_pot: np.ndarray,
           per_item: int, skip: Callable | None) -> _Priced:
    """Price head ``a``'s omitted exits (:func:`_price_rows`, compiled): add those with reduced cost below ``tol``,
    at most ``per_item`` per token, most negative first.  ``line_pot`` ``(T + 1,)`` and ``item_pot`` ``(T,)`` are
    the potentials as doubles (NaN for a token without a node: it has no positive entry, so it is never priced).
    ``skip(t, i) -> bool mask``: entries not priced (only the tests' deliberately broken pricing passes one).

    The prefix ``P`` is summed in the order ``numpy.cumsum`` sums a column (the tolerance's premise), and the bound
    term is ``sum_i min(0, min_t (-P(i, t) + pi(L_i) - pi(L_{t + 1})))`` over every exit of the complete network, in
    use or not -- token ``i``'s best interval against the slot prices the line potentials set
    (:func:`kvcore.optima.lagrangian.lagrangian_bound`)."""
    T = a.shape[0]
    blocked = np.zeros((T, T), dtype=np.bool_)
    blocked[exits[1], exits[0]] = True
    if skip is not None:
        blocked |= skip(*np.indices((T, T)))
    per = min(per_item, T)
    cand_rc, cand_step = np.full((T, per), np.inf), np.zeros((T, per), np.int64)
    n_cand, term, term_step, total = np.zeros(T, np.int64), np.zeros(T), np.full(T, -1, np.int64), np.zeros(T)
    omitted, least = price_rows(np.ascontiguousarray(a), blocked, np.ascontiguousarray(line_pot, np.float64),
                                np.ascontiguousarray(item_pot, np.float64), np.int64(per), (T + 4) * 2.0 ** -52,
                                cand_rc, cand_step, n_cand, term, term_step, total)
    tok = np.repeat(np.arange(T, dtype=np.int64), n_cand)
    step = cand_step[np.arange(per)[None, :] < n_cand[:, None]]
    order = np.lexsort((step, tok))
    return _Priced(tok[order], step[order], int(omitted), float(least), float(term.sum()),
                   _term_slack(total, line_pot))


def _term_slack(total: np.ndarray, line_pot: np.ndarray) -> float:
    """The rounding allowance of a head's summed Lagrangian terms: each path is within ``(T + 4) 2^-52 (P + |pi(L_i)|
    + |pi(L_{t + 1})|)`` of the exact one (the reduced costs' tolerance, :mod:`kvcore.optima.priced`)."""
    T = total.size
    return (T + 4) * 2.0 ** -52 * float((total + np.abs(line_pot[:T]) + np.abs(line_pot).max()).sum())


def best_exits(a: np.ndarray, line_pot: np.ndarray) -> BestExits:
    """Each token's best residency interval against the slot prices the line potentials ``line_pot`` ``(T + 1,)``
    set (:class:`BestExits`): the pass of :func:`price_head` with every exit blocked, so no reduced cost is formed."""
    T = a.shape[0]
    term, step, total = np.zeros(T), np.full(T, -1, np.int64), np.zeros(T)
    none = np.zeros((T, 1), np.int64)
    price_rows(np.ascontiguousarray(a), np.ones((T, T), dtype=np.bool_), np.ascontiguousarray(line_pot, np.float64),
               np.zeros(T), np.int64(1), 0.0, np.full((T, 1), np.inf), none, np.zeros(T, np.int64), term, step, total)
    return BestExits(term, step, float(total.sum()), _term_slack(total, line_pot))


def _column_prefix(a, cols, req_start, req_step, lsb, out):
    """Exact running sums of the columns ``cols`` of ``a`` (rows in memory order), in units of ``2**lsb`` as
    unnormalized 31-bit limbs: at each requested step ``req_step[req_start[j]:req_start[j + 1]]`` (ascending) of
    column ``j`` its sum so far is copied to that request's row of ``out``.  Each double is ``m 2**(e - 53)`` with an
    integer mantissa ``m < 2**53`` (``frexp``); shifted by ``e - 53 - lsb >= 0`` bits (after dropping trailing zero
    bits, the only ones that may lie below the unit) its two 31-bit halves are added limb by limb, each addition
    below ``2**31``, so no limb can overflow before ``2**32`` entries."""
    T = a.shape[0]
    W = out.shape[1]
    acc = np.zeros((cols.size, W), np.int64)
    ptr = req_start[:-1].copy()
    for t in range(T):
        for j in range(cols.size):
            i = cols[j]
            if i > t or ptr[j] == req_start[j + 1]:
                continue
            w = a[t, i]
            if w > 0.0:
                f, e = math.frexp(w)
                m = np.int64(f * 9007199254740992.0)  # f * 2**53: exact, f has 53 significant bits
                sh = e - 53 - lsb
                while sh < 0:
                    m >>= 1
                    sh += 1
                q = sh // 31
                r = sh - 31 * q
                x = (m & 2147483647) << r
                acc[j, q] += x & 2147483647
                acc[j, q + 1] += x >> 31
                y = (m >> 31) << r
                acc[j, q + 1] += y & 2147483647
                acc[j, q + 2] += y >> 31
            while ptr[j] < req_start[j + 1] and req_step[ptr[j]] == t:
                for k in range(W):
                    out[ptr[j], k] = acc[j, k]
                ptr[j] += 1


column_prefix = Kernel(_column_prefix)


def exact_prefix(a: np.ndarray, lsb: int, width: int, token: np.ndarray, step: np.ndarray) -> Limbs:
    """The exact ``P(i, t)`` of the exits ``(token, step)`` (sorted by token, then step) in units of ``2**lsb``
    (:func:`_column_prefix`, compiled: only the exits' columns are read, up to their last requested step)."""
    cols, first = np.unique(token, return_index=True)
    out = np.zeros((token.size, width), np.int64)
    column_prefix(np.ascontiguousarray(a), cols.astype(np.int64), np.append(first, token.size).astype(np.int64),
                  step.astype(np.int64), np.int64(lsb), out)
    normalize(out)
    return Limbs(out)


__all__ = ["BestExits", "best_exits", "column_prefix", "exact_prefix", "price_head", "price_rows"]
