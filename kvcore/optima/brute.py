"""Brute-force references for the exact optima: dynamic programming over every reachable resident set.

They follow the engine's step semantics literally (SPEC section 2, :mod:`kvcore.engine`), independently of the flow
formulations: room is made only when needed, and then by evicting any subset (of at least the needed size) of the
evictable items.  The state after step ``t`` is the resident set; the DP keeps, per reachable state, the least cost
so far.  Exponential: tiny instances only, above the limits below they raise ParameterError.

RM: from ``S`` and the step's requests ``Q`` (costs ``c``), the step costs ``sum_{q in Q \\ S} c_q``; if
``|S U Q| <= h`` the next state is ``S U Q``, otherwise ``(S U Q) \\ V`` for every ``V`` of ``S \\ Q`` with
``|V| >= |S U Q| - h``.
NM: from ``R`` and arriving token ``t``, the next state is ``R U {t}`` if it fits, otherwise ``(R U {t}) \\ V`` for
every nonempty ``V``; the step's regret is ``sum_{i not in next state} a[t, i]``.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..engine import check_capacity
from ..errors import ParameterError
from ..traces import AttentionTrace, PagingTrace
from .rm_flow import check_fits
from .result import OptResult

BRUTE_RM_MAX_ITEMS = 8
BRUTE_RM_MAX_STEPS = 64
BRUTE_NM_MAX_STEPS = 10


def _subsets_at_least(pool: frozenset, smallest: int):
    members = sorted(pool)
    for size in range(max(smallest, 0), len(members) + 1):
        for drop in combinations(members, size):
            yield frozenset(drop)


def _best(table: dict[frozenset, tuple[float, int]]) -> tuple[float, int]:
    return min(table.values())


def brute_rm(trace: PagingTrace, capacity: int) -> OptResult:
    """Exact RM optimum by exhaustive DP (at most 8 distinct items and 64 steps)."""
    h = check_capacity(capacity)
    n_items = trace.distinct_items().size
    if n_items > BRUTE_RM_MAX_ITEMS or trace.T > BRUTE_RM_MAX_STEPS:
        raise ParameterError(f"{trace.source}: brute_rm handles at most {BRUTE_RM_MAX_ITEMS} items and "
                             f"{BRUTE_RM_MAX_STEPS} steps, got {n_items} and {trace.T}")
    check_fits(trace, h)
    table: dict[frozenset, tuple[float, int]] = {frozenset(): (0.0, 0)}
    for _, items, costs in trace.steps():
        q = frozenset(items.tolist())
        price = dict(zip(items.tolist(), costs.tolist()))
        nxt: dict[frozenset, tuple[float, int]] = {}
        for s, (cost, misses) in table.items():
            missing = q - s
            step_cost = cost + sum(price[i] for i in missing), misses + len(missing)
            full = s | q
            need = len(full) - h
            options = [full] if need <= 0 else [full - v for v in _subsets_at_least(s - q, need)]
            for state in options:
                if step_cost < nxt.get(state, (np.inf, 0)):
                    nxt[state] = step_cost
        table = nxt
    cost, misses = _best(table)
    return OptResult(float(cost), misses, h, "rm", None, "brute", certified=True)


def brute_nm(trace: AttentionTrace, capacity: int) -> OptResult:
    """Exact NM optimum (least regret, Eq. 4) by exhaustive DP (at most 10 steps)."""
    h = check_capacity(capacity)
    if trace.T > BRUTE_NM_MAX_STEPS:
        raise ParameterError(f"{trace.source}: brute_nm handles at most {BRUTE_NM_MAX_STEPS} steps, got {trace.T}")
    table: dict[frozenset, tuple[float, int]] = {frozenset(): (0.0, 0)}
    for t, idx, w in trace.rows():
        row = [(i, x) for i, x in zip(idx.tolist(), w.tolist()) if x > 0]
        nxt: dict[frozenset, tuple[float, int]] = {}
        for r, (regret, misses) in table.items():
            full = r | {t}
            options = [full] if len(full) <= h else [full - v for v in _subsets_at_least(full, len(full) - h)]
            for state in options:
                lost = [x for i, x in row if i not in state]
                value = regret + sum(lost), misses + len(lost)
                if value < nxt.get(state, (np.inf, 0)):
                    nxt[state] = value
        table = nxt
    regret, misses = _best(table)
    return OptResult(float(regret), misses, h, "nm", None, "brute", 0.0, float(trace.residual.sum()), certified=True)
