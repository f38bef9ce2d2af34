"""The small fixed traces on which a statement of the paper fails, each found by search and checked by hand.

Every function returns a validated trace (or a pair of them) and states what it separates; the claims save them as
counterexample files and the tests assert the separation exactly.
"""

from __future__ import annotations

import numpy as np

from kvcore.traces import AttentionTrace, PagingTrace, rm_requests_from_attention

# Theorem 4 in NM (paper Section 7): k = 3, rho = tau = 0.5, W = 1.  The paper's premise holds, yet R-LRU-H loses
# 0.9 > tail 0.4: token 0 is dropped while cold and attended again later, which no NM policy can undo.
THM4_NM_ROWS = ({0: 1.0}, {1: 1.0}, {2: 1.0}, {3: 1.0}, {0: 0.4, 4: 0.6}, {0: 0.5, 5: 0.5})

# Theorem 3 with per-request costs (found by random search over 3 items, costs {1, 9}, k = h = 2; brute_rm agrees
# with rm_opt): GD-A (= Landlord here) pays 40, OPT 4.  Credits are set from the request that admitted or last hit
# an item; an item last requested cheaply is evicted first and then re-requested at cost 9, which Young's
# fixed-weight potential never allows.
VARYING_COST_ITEMS = (1, 2, 2, 1, 0, 1, 0, 2, 1, 1, 2)
VARYING_COSTS = (1.0, 1.0, 9.0, 1.0, 1.0, 9.0, 9.0, 1.0, 9.0, 1.0, 9.0)


def thm4_nm_counterexample() -> AttentionTrace:
    """:data:`THM4_NM_ROWS` as a trace (Theorem 4's premise holds, its bound fails in NM)."""
    return AttentionTrace.from_rows([dict(r) for r in THM4_NM_ROWS], "thm4 NM counterexample")


def future_mass_counterexample() -> AttentionTrace:
    """NM, ``h = 1``: ``a = [[1], [.6, .4], [0, .4, .6]]``.  Keeping the most future mass loses 1, the optimum 0.8
    (kvcore/optima/future_mass.py works it by hand)."""
    return AttentionTrace.from_dense(np.array([[1, 0, 0], [0.6, 0.4, 0], [0, 0.4, 0.6]]), "future-mass counterexample")


def position_cost_counterexample() -> PagingTrace:
    """RM requests from a 6-token attention trace (threshold 0.25, position-growing recompute costs, free arrivals),
    ``k = 3``: the furthest-next-request rule pays 1.5, the optimum 7/6."""
    a = np.eye(6)
    for t, i in [(3, 1), (4, 0), (5, 2)]:
        a[t, i], a[t, t] = 0.25, 0.75
    return rm_requests_from_attention(AttentionTrace.from_dense(a, "position-cost counterexample"), 0.25)


def varying_cost_counterexample() -> PagingTrace:
    """:data:`VARYING_COST_ITEMS` with :data:`VARYING_COSTS`: an item's fault cost changes between its requests."""
    return PagingTrace(np.asarray(VARYING_COST_ITEMS), np.asarray(VARYING_COSTS),
                       np.arange(len(VARYING_COST_ITEMS) + 1), "per-request costs")


def unrequested_refresh_counterexample(T: int = 40) -> tuple[PagingTrace, AttentionTrace]:
    """Requests ``0, 100, 101, 100, 101, ...`` with observed rows putting 0.05 on item 0 at every step (``k = 2``).
    A Landlord rule that also refreshes credits on attention (GD-A's literal Section 6 reading) keeps item 0 and
    faults on every request (cost ``T``); Belady with ``h = k = 2`` pays 3."""
    req = PagingTrace.unit([0, 100] + [101 if t % 2 == 0 else 100 for t in range(2, T)], "unrequested refresh")
    rows = AttentionTrace.from_rows([{0: 1.0}] + [{0: 0.05, t: 0.95} for t in range(1, T)])
    return req, rows
