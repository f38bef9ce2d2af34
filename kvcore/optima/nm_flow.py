"""Exact offline optimum of the no-refetch model: the schedule with the least regret (paper Eq. 4).

Model (SPEC section 2, NM): token ``t`` arrives at step ``t``; the resident set ``R_t`` is a subset of
``R_{t-1} U {t}`` of at most ``h`` tokens; step ``t`` loses ``sum_{i not in R_t} a[t, i]``.  A token is therefore
resident on one interval of steps starting at its arrival, and the optimum maximizes the retained mass
``sum_t sum_{i in R_t} a[t, i]`` subject to at most ``h`` intervals covering any step.  Regret of the optimum
= total stored mass - max retained mass.

Network (SPEC section 3, with each token's chain contracted), 0-based steps, line nodes ``L_0..L_T``, ``h`` units
from ``L_0`` to ``L_T``:

* free-slot line ``L_t -> L_{t+1}``, capacity ``h``, cost 0 (a slot that holds no token worth keeping);
* for each token ``i`` with stored positive entries at steps ``t_1 < ... < t_m`` (all ``>= i``), one token node
  ``tau_i``, a take arc ``L_i -> tau_i`` of capacity 1 and cost 0 (entered only at the arrival time ``i``: that is
  the no-refetch rule), and exit arcs ``tau_i -> L_{t_j + 1}`` of capacity 1 and cost ``-(a[t_1, i] + ... +
  a[t_j, i])`` for ``j = 1..m``: token ``i`` is resident from ``i`` through ``t_j`` and then dropped.

A unit through ``tau_i`` occupies one of the ``h`` units across every cut from ``L_i`` to its exit, so the flow is
feasible exactly when at most ``h`` tokens are resident at each step, and the take arc lets each token choose one
interval.  SPEC section 3's chain (nodes ``n_1..n_m`` entered from ``L_i``, arcs ``n_j -> n_{j+1}`` collecting
``a[t_{j+1}, i]``, an exit from every ``n_j``) has exactly these source-to-line paths, one per ``j`` with the same
cost; contracting it leaves the same feasible schedules and costs with ``T + 1 + (tokens)`` nodes and
``T + (tokens) + nnz`` arcs instead of ``T + 1 + nnz`` nodes and ``T + 2 nnz`` arcs -- 16x fewer nodes at 32 entries
per row, which is what makes the network simplex fast here (see :mod:`kvcore.optima.mincost`).  The exit costs are
prefix sums, formed in exact integers (:func:`kvcore.optima.mincost.exact_integers`), so no rounding enters.

Rows with more than ``EXIT_COLUMNS`` stored entries (complete rows: every earlier token at every step, ``T^2 / 2``
exits) are solved by column generation: the simplex starts from the exits of each step's ``EXIT_COLUMNS`` heaviest
entries (:func:`heaviest`) and prices the others in (:func:`kvcore.optima.netsimplex.solve_integer_columns`) until
none can lower the cost, so the optimum and its certificate are those of the whole network; on SmolLM2 heads at
T = 1,996 (5 heads, K = 32-256) the simplex then ends on 7-11 % of the 2 x 10^6 exits after 3-9 rounds.

The trace's ``residual`` (mass on entries that were not stored) is unattributed: it is not used, only reported as
``OptResult.unattributed``.  The schedule: token ``i`` is dropped at the step after its last retained entry, or on
arrival if none is retained (``evictions`` lists ``(step, token)`` for every drop before ``T``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..engine import check_capacity
from ..errors import ParameterError
from ..exact_sum import fsum_array
from ..kernels import Kernel
from ..traces import AttentionTrace
from .limbs import Limbs, join, segment_prefix, width_for
from .mincost import DEFAULT_SOLVER, FlowNetwork, bit_length, check_solver, exact_integers, solve
from .result import OptResult


def entries_by_token(trace: AttentionTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The positive stored entries as ``(token, step, weight)`` arrays sorted by token, then step."""
    step = np.repeat(np.arange(trace.T), np.diff(trace.indptr))
    pos = trace.weights > 0
    tok, step, w = trace.indices[pos], step[pos], trace.weights[pos]
    order = stable_order(tok, trace.T)[0]  # steps ascend in the trace's row order, so within a token too
    return tok[order], step[order], w[order]


EXIT_COLUMNS = 64  # exit arcs the simplex starts from per step (and trace), by :func:`heaviest`


def _counting_order(keys, order, start):
    for k in keys:
        start[k + 1] += 1
    for g in range(start.size - 1):
        start[g + 1] += start[g]
    fill = start[:-1].copy()
    for e in range(keys.size):
        order[fill[keys[e]]] = e
        fill[keys[e]] += 1


counting_order = Kernel(_counting_order)


def stable_order(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, start)``: the stable sort of ``keys`` (integers in ``0..n_keys - 1``) by counting, ``O(len + n_keys)``
    (a lexsort of 2 x 10^6 entries took ~0.1 s), and where each key's run starts in it (``start[n_keys]`` = len)."""
    order = np.empty(keys.size, np.int64)
    start = np.zeros(n_keys + 1, np.int64)
    counting_order(np.ascontiguousarray(keys, np.int64), order, start)
    return order, start


def _heaviest(grouped, start, per, threshold):
    for g in range(start.size - 1):
        n = start[g + 1] - start[g]
        if n > per:
            threshold[g] = np.partition(grouped[start[g]:start[g + 1]], n - per)[n - per]


heaviest_kernel = Kernel(_heaviest)


def heaviest(group: np.ndarray, weight: np.ndarray, n_groups: int, per: int) -> np.ndarray:
    """Bool per entry: among the ``per`` heaviest of its group (``group`` in ``0..n_groups - 1``; ties at the
    threshold all count).  Grouped by step, these are the exit arcs :func:`interval_network` lets the simplex start
    from (``FlowNetwork.columns``): a token is worth keeping through a step mostly where it is among that step's
    heaviest; the other exits are priced in only if they can lower the cost, so the optimum is the same exact one
    (:func:`kvcore.optima.netsimplex.solve_integer_columns`).  Measured on complete rows of SmolLM2 heads (1,996
    steps, 2 x 10^6 exits; 6 heads x 4 budgets under cProfile): the simplex 12.0 s on every exit, 2.4 s plus 0.7 s of
    pricing by columns.  64 per step with 16 priced in per token and round was the fastest, or within 2 % of it,
    of 8-64 per step and 1-16 per token tried on four heads."""
    order, start = stable_order(group, n_groups)
    threshold = np.full(n_groups, -np.inf)
    heaviest_kernel(np.ascontiguousarray(weight[order], np.float64), start, np.int64(per), threshold)
    return weight >= threshold[group]


def by_tail_then_head(tail: np.ndarray, head: np.ndarray, n_nodes: int) -> np.ndarray:
    """``np.lexsort((head, tail))`` as two stable counting sorts (least significant key first)."""
    by_head = stable_order(head, n_nodes)[0]
    return by_head[stable_order(tail[by_head], n_nodes)[0]]


def interval_network(T: int, arrival: np.ndarray, item: np.ndarray, step: np.ndarray, exact: np.ndarray,
                     unit: Fraction, capacity: int, heavy: np.ndarray | None = None) -> FlowNetwork:
    """The network of the module docstring for items that each arrive at one step and earn their entries while
    resident on one interval from it: ``arrival`` per item (non-decreasing), and per stored entry its ``item``
    (sorted, every item has one), its ``step`` (sorted within an item, ``>= arrival``) and its weight as the exact
    integer ``exact`` (times ``unit``).  One NM trace has one item per token (``arrival`` = the token); the coupled
    optimum of several heads (:mod:`kvcore.optima.coupled`) has one per (head, token) on one shared line.  Arcs in
    this order: ``T`` line arcs of capacity ``capacity``, one take arc per item, one exit arc per entry.  ``heavy``
    (a bool per entry, e.g. :func:`heaviest`): the exits the simplex starts from, with every line and take arc
    (``FlowNetwork.columns``; ``None`` or all true: every arc from the start)."""
    nnz, n_items = item.size, arrival.size
    counts = np.bincount(item, minlength=n_items)
    # prefix mass of each item's entries up to and including entry j, exactly: a cumulative sum restarted per item
    top = bit_length(exact) + nnz.bit_length()  # no prefix sum is longer
    if isinstance(exact, Limbs) or top > 62:
        prefix = segment_prefix(Limbs.of(exact, width_for(top)), counts)
    else:
        run = np.cumsum(exact)
        first = np.cumsum(counts) - counts
        prefix = run - np.repeat(run[first] - exact[first], counts)
    # nodes in time order, each item's node right after its arrival's line node: the simplex walks the tree along
    # time, and this layout keeps those walks in cache (measured 1.7x faster than line nodes first)
    line_node = np.arange(T + 1, dtype=np.int64) + np.searchsorted(arrival, np.arange(T + 1))
    item_node = arrival + np.arange(n_items, dtype=np.int64) + 1
    supply = np.zeros(T + 1 + n_items, dtype=np.int64)
    supply[line_node[0]] += capacity  # a T = 0 trace has one node, where the two cancel
    supply[line_node[T]] -= capacity
    tail = np.concatenate([line_node[:-1], line_node[arrival], np.repeat(item_node, counts)])
    head = np.concatenate([line_node[1:], item_node, line_node[step + 1]])
    return FlowNetwork(
        n_nodes=T + 1 + n_items,
        tail=tail,
        head=head,
        lower=np.zeros(T + n_items + nnz, dtype=np.int64),
        cap=np.concatenate([np.full(T, capacity, dtype=np.int64), np.ones(n_items + nnz, dtype=np.int64)]),
        cost=join([np.zeros(T + n_items, dtype=np.int64), -prefix]),
        cost_unit=unit,
        supply=supply,
        start=np.concatenate([np.full(T, capacity, dtype=np.int64), np.zeros(n_items + nnz, dtype=np.int64)]),
        # priced node by node in time order: measured 2.3x faster at T = 5,000
        scan_order=by_tail_then_head(tail, head, T + 1 + n_items),
        columns=None if heavy is None or heavy.all() else np.concatenate([np.ones(T + n_items, dtype=bool), heavy]),
    )


def nm_opt(trace: AttentionTrace, capacity: int, solver: str = DEFAULT_SOLVER, record: bool = False) -> OptResult:
    """Least regret of any no-refetch schedule with ``capacity`` slots on ``trace`` (see module docstring).

    ``solver``: a backend of :mod:`kvcore.optima.mincost`; every backend returns a certified exact optimum.  ``cost``
    is the correctly rounded sum of the lost entries."""
    res = _entries_opt(trace.T, *entries_by_token(trace), check_capacity(capacity), solver, record)
    res.unattributed = float(trace.residual.sum())
    return res


def nm_opt_costs(costs: np.ndarray, capacity: int, solver: str = DEFAULT_SOLVER, record: bool = False,
                 what: str = "costs") -> OptResult:
    """The same optimum with an arbitrary non-negative cost per (step, token) instead of an attention row: the
    no-refetch schedule with ``capacity`` slots that minimizes ``sum_t sum_{i <= t, i not in R_t} costs[t, i]``.

    The network of the module docstring never uses that a row sums to 1 (only that each entry's cost is charged at
    its step while the token is absent), so any non-negative per-entry costs give an exact optimum the same way --
    e.g. attention mass times how far a value lies from the output (:mod:`realtrace.quality.value_cost`), whose rows
    do not sum to 1 and which :class:`~kvcore.traces.AttentionTrace` therefore refuses.  ``costs`` is a dense
    ``(T, T)`` array, lower triangular (``costs[t, i]`` for ``i <= t``; an entry above the diagonal, a negative, NaN
    or infinite one is a one-line :class:`~kvcore.errors.ParameterError` naming ``what`` and the step)."""
    c = np.asarray(costs, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ParameterError(f"{what}: must be a square (T, T) array of per-(step, token) costs, got shape {c.shape}")
    for bad, why in ((~np.isfinite(c), "is not finite"), (c < 0, "is negative"),
                     (np.triu(c, 1) != 0, "is a future token's (above the diagonal)")):
        if bad.any():
            t, i = (int(x) for x in np.argwhere(bad)[0])
            raise ParameterError(f"{what}: step {t}: the cost of token {i} {why}: {c[t, i]}")
    step, tok = np.nonzero(c)  # row-major: steps ascend
    order = stable_order(tok, c.shape[0])[0]
    return _entries_opt(c.shape[0], tok[order], step[order], c[step[order], tok[order]], check_capacity(capacity),
                        solver, record)


def _entries_opt(T: int, tok: np.ndarray, step: np.ndarray, w: np.ndarray, h: int, solver: str, record: bool
                 ) -> OptResult:
    """The optimum of the positive entries ``(tok, step, w)`` sorted by token, then step (:func:`entries_by_token`)."""
    check_solver(solver)
    nnz = tok.size
    tokens, first = np.unique(tok, return_index=True)
    counts = np.diff(np.append(first, nnz))  # entries per token
    exact, unit = exact_integers(w)
    net = interval_network(T, tokens, np.repeat(np.arange(tokens.size), counts), step, exact, unit, h,
                           heaviest(step, w, T, EXIT_COLUMNS))
    sol = solve(net, solver)
    exit_at = np.flatnonzero(sol.flow[T + tokens.size:] == 1)  # at most one exit per token: the last retained entry
    kept_until = np.full(T, -1, dtype=np.int64)  # per token: index of its last retained entry, -1 if none
    kept_until[tok[exit_at]] = exit_at
    retained = np.arange(nnz) <= kept_until[tok]
    lost = ~retained
    evictions = None
    if record:
        drop = np.arange(T, dtype=np.int64)  # on arrival unless some entry is retained
        np.maximum.at(drop, tok[retained], step[retained] + 1)
        tokens_dropped = np.flatnonzero(drop < T)
        order = np.lexsort((tokens_dropped, drop[tokens_dropped]))
        evictions = list(zip(drop[tokens_dropped][order].tolist(), tokens_dropped[order].tolist()))
    return OptResult(fsum_array(w[lost]), int(np.count_nonzero(lost)), h, "nm", evictions, sol.solver,
                     sol.gap_bound, 0.0, certified=True)
