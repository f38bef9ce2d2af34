"""Exact offline optimum of the recompute/paging model with per-request costs and several requests per step.

Model (SPEC section 2, RM): demand paging without bypass, both start empty, cold misses count, evictions only of
items not requested at the step, capacity ``h`` (``h <= k`` for resource augmentation, paper Eq. 8).

Network (SPEC section 3; the interval-scheduling flow of Arkin & Silverberg, Discrete Applied Math. 1987, used for
weighted paging by e.g. Chrobak, Karloff, Payne & Vishwanathan, SIAM J. Discrete Math. 1991), 0-based steps
``t = 0..T-1`` and nodes ``u_0..u_T``:

* ``h`` units of flow enter at ``u_0`` and leave at ``u_T``;
* line arc ``u_t -> u_{t+1}`` with bounds ``[|Q_t|, h]``, cost 0: the slots not used to keep items through a gap
  (at least the ``|Q_t|`` slots of the step's own requests);
* for consecutive requests of one item at steps ``s < t`` with ``t >= s + 2``, gap arc ``u_{s+1} -> u_t``,
  capacity 1, cost ``-c`` where ``c`` is the fault cost of the request at ``t``: one unit on it means the item
  stays resident through steps ``s+1..t-1`` and the request at ``t`` hits.

Requests at consecutive steps (``t = s + 1``) always hit (the item is protected at ``t``), so they get no arc.
The flow across the cut before ``u_{t+1}`` is ``h``, so items kept through step ``t`` number at most
``h - |Q_t|``: exactly the capacity constraint; conversely any demand-paging schedule keeps each item through some
of its gaps, and keeping an item when it is not requested again never saves anything.  Hence
``OPT = total request cost - max saved``; the cost is summed over the faulting requests of the optimal flow.

The schedule is read off the flow: gap arcs with flow 1 are kept; every other resident item leaves at the step
after its request (``evictions`` lists ``(s + 1, item)``), which is legal and costs exactly ``cost``.
"""

from __future__ import annotations

import numpy as np

from ..engine import check_capacity
from ..errors import ParameterError
from ..exact_sum import fsum_array
from ..traces import PagingTrace
from .limbs import join
from .mincost import DEFAULT_SOLVER, FlowNetwork, check_solver, exact_integers, solve
from .result import OptResult
from .time_split import LEAF_STEPS, check_leaf, solve_time_split


def check_fits(trace: PagingTrace, capacity: int) -> np.ndarray:
    """Requests per step; ParameterError naming the first step that requests more items than ``capacity``."""
    per_step = np.diff(trace.offsets)
    over = np.flatnonzero(per_step > capacity)
    if over.size:
        t = int(over[0])
        raise ParameterError(f"{trace.source}: step {t}: {int(per_step[t])} items requested but capacity is "
                             f"{capacity}")
    return per_step


def next_request(trace: PagingTrace) -> tuple[np.ndarray, np.ndarray]:
    """For every request ``r``: its step, and the index of the next request of the same item (-1 if none)."""
    step_of = np.repeat(np.arange(trace.T), np.diff(trace.offsets))
    order = np.lexsort((step_of, trace.items))  # by item, then by step
    nxt = np.full(trace.n_requests, -1, dtype=np.int64)
    same = trace.items[order[1:]] == trace.items[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return step_of, nxt


def rm_opt(trace: PagingTrace, capacity: int, solver: str = DEFAULT_SOLVER, record: bool = False,
           split_steps: int | None = LEAF_STEPS) -> OptResult:
    """Minimum total fault cost of serving ``trace`` with a cache of ``capacity`` items (see module docstring).

    ``solver``: a backend of :mod:`kvcore.optima.mincost`; every backend returns a certified exact optimum
    (``certified``, ``gap_bound``).  With ``"netsimplex"`` the network is solved in halves of the time line
    warm-started upwards (:mod:`kvcore.optima.time_split`, ranges of at most ``split_steps`` steps solved from
    scratch; ``None``: the whole network in one simplex run, the previous default, the benchmark's baseline).
    ``cost`` is the correctly rounded sum of the faulting requests' costs.  Raises ParameterError for a capacity
    below 1, ``split_steps`` below 2 or a step requesting more than ``capacity`` items (costs are any valid trace's:
    finite, non-negative, with a finite total, see :mod:`kvcore.traces`).
    """
    h = check_capacity(capacity)
    check_solver(solver)
    if split_steps is not None:
        check_leaf(split_steps)
    per_step = check_fits(trace, h)
    T, costs = trace.T, trace.costs
    step_of, nxt = next_request(trace)
    has_next = nxt >= 0
    later = nxt[has_next]
    gap_start = step_of[has_next] + 1
    gap_end = step_of[later]
    adjacent = gap_end == gap_start
    g_tail, g_head, g_req = gap_start[~adjacent], gap_end[~adjacent], later[~adjacent]
    exact, unit = exact_integers(costs[g_req])
    line = np.arange(T, dtype=np.int64)
    supply = np.zeros(T + 1, dtype=np.int64)
    supply[0] += h  # a T = 0 trace has one node, where the two cancel
    supply[T] -= h
    tail, head = np.concatenate([line, g_tail]), np.concatenate([line + 1, g_head])
    net = FlowNetwork(
        n_nodes=T + 1,
        tail=tail,
        head=head,
        lower=np.concatenate([per_step, np.zeros(g_tail.size, dtype=np.int64)]),
        cap=np.concatenate([np.full(T, h, dtype=np.int64), np.ones(g_tail.size, dtype=np.int64)]),
        cost=join([np.zeros(T, dtype=np.int64), -exact]),
        cost_unit=unit,
        supply=supply,
        start=np.concatenate([np.full(T, h, dtype=np.int64), np.zeros(g_tail.size, dtype=np.int64)]),
        scan_order=np.lexsort((tail, head)),  # priced by head time: measured 1.6x faster than line arcs first
    )
    if split_steps is not None and solver == "netsimplex":
        sol = solve_time_split(net, split_steps)
    else:
        sol = solve(net, solver)
    hit = np.zeros(trace.n_requests, dtype=bool)
    hit[later[adjacent]] = True
    hit[g_req[sol.flow[T:] == 1]] = True
    cost = fsum_array(costs[~hit])  # correctly rounded: scaling every cost by 2**j scales it exactly
    misses = int(np.count_nonzero(~hit))
    evictions = None
    if record:
        stays = np.zeros(trace.n_requests, dtype=bool)
        stays[has_next] = hit[later]
        leave = np.flatnonzero(~stays & (step_of + 1 < T))
        order = np.lexsort((trace.items[leave], step_of[leave]))
        evictions = list(zip((step_of[leave][order] + 1).tolist(), trace.items[leave][order].tolist()))
    return OptResult(cost, misses, h, "rm", evictions, sol.solver, sol.gap_bound, certified=True)
