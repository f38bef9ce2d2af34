"""Exact offline optimum of the no-refetch model: the schedule with the least regret (paper Eq. 4).

Model (SPEC section 2, NM): token ``t`` arrives at step ``t``; the resident set ``R_t`` is a subset of
``R_{t-1} U {t}`` of at most ``h`` tokens; step ``t`` loses ``sum_{i not in R_t} a[t, i]``.  A token is therefore
resident on one interval of steps starting at its arrival, and the optimum maximizes the retained mass
``sum_t sum_{i in R_t} a[t, i]`` subject to at most ``h`` intervals covering any step.  Regret of the optimum
= total stored mass - max retained mass.

Network (SPEC section 3), 0-based steps, line nodes ``L_0..L_T``, ``h`` units from ``L_0`` to ``L_T``:

* free-slot line ``L_t -> L_{t+1}``, capacity ``h``, cost 0;
* for token ``i`` with stored positive entries at steps ``t_1 < ... < t_m`` (all ``>= i``), chain nodes
  ``n_1..n_m``; arcs ``L_i -> n_1`` and ``n_j -> n_{j+1}`` of capacity 1 and cost ``-a[t_j, i]`` on the arc into
  ``n_j`` (the chain is entered only at the arrival time ``i``: that is the no-refetch rule); exit arcs
  ``n_j -> L_{t_j + 1}`` of capacity 1 and cost 0 (the token is dropped after its ``j``-th attended step).

A unit on token ``i``'s chain occupies one of the ``h`` units across every cut from ``L_i`` to its exit, so the
flow is feasible exactly when at most ``h`` tokens are resident at each step.  Nodes exist only for stored entries
``a[t, i] > 0``: the network has ``T + 1 + nnz`` nodes and ``T + 2 nnz`` arcs, never a dense ``T x T`` object.

The trace's ``residual`` (mass on entries that were not stored) is unattributed: it is not used, only reported as
``OptResult.unattributed``.  The schedule: token ``i`` is dropped at the step after its last retained entry, or on
arrival if none is retained (``evictions`` lists ``(step, token)`` for every drop before ``T``).
"""

from __future__ import annotations

import numpy as np

from ..engine import check_capacity
from ..traces import AttentionTrace
from .mincost import FlowNetwork, check_solver, solve
from .result import OptResult


def entries_by_token(trace: AttentionTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The positive stored entries as ``(token, step, weight)`` arrays sorted by token, then step."""
    step = np.repeat(np.arange(trace.T), np.diff(trace.indptr))
    pos = trace.weights > 0
    tok, step, w = trace.indices[pos], step[pos], trace.weights[pos]
    order = np.lexsort((step, tok))
    return tok[order], step[order], w[order]


def nm_opt(trace: AttentionTrace, capacity: int, solver: str = "highs", record: bool = False) -> OptResult:
    """Least regret of any no-refetch schedule with ``capacity`` slots on ``trace`` (see module docstring)."""
    h = check_capacity(capacity)
    check_solver(solver)
    T = trace.T
    tok, step, w = entries_by_token(trace)
    nnz = tok.size
    node = T + 1 + np.arange(nnz, dtype=np.int64)
    first = np.ones(nnz, dtype=bool)
    first[1:] = tok[1:] != tok[:-1]
    into_tail = np.where(first, tok, np.concatenate([[0], node[:-1]]))
    line = np.arange(T, dtype=np.int64)
    supply = np.zeros(T + 1 + nnz, dtype=np.int64)
    supply[0] += h  # a T = 0 trace has one node, where the two cancel
    supply[T] -= h
    net = FlowNetwork(
        n_nodes=T + 1 + nnz,
        tail=np.concatenate([line, into_tail, node]),
        head=np.concatenate([line + 1, node, step + 1]),
        lower=np.zeros(T + 2 * nnz, dtype=np.int64),
        cap=np.concatenate([np.full(T, h, dtype=np.int64), np.ones(2 * nnz, dtype=np.int64)]),
        cost=np.concatenate([np.zeros(T), -w, np.zeros(nnz)]),
        supply=supply,
    )
    sol = solve(net, solver)
    retained = sol.flow[T:T + nnz] == 1
    lost = ~retained
    evictions = None
    if record:
        drop = np.arange(T, dtype=np.int64)  # on arrival unless some entry is retained
        np.maximum.at(drop, tok[retained], step[retained] + 1)
        tokens = np.flatnonzero(drop < T)
        order = np.lexsort((tokens, drop[tokens]))
        evictions = list(zip(drop[tokens][order].tolist(), tokens[order].tolist()))
    return OptResult(float(w[lost].sum()), int(np.count_nonzero(lost)), h, "nm", evictions, sol.solver,
                     sol.gap_bound, float(trace.residual.sum()))
