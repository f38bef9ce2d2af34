"""The network simplex on a time-line network, solved half by half and warm-started upwards (divide and conquer).

Networks: nodes ``0..n-1`` in time order, every arc forward in time (``tail < head``), ``h`` units entering at node
0 and leaving at node ``n - 1``, a line arc ``t -> t+1`` for every ``t``, and a feasible start in which every line
arc carries its capacity and every other arc nothing (the RM flow of :mod:`kvcore.optima.rm_flow`: all slots idle).

Method.  A node range ``[s, e]`` defines the sub-network of the arcs with both ends inside it, with ``h`` units
entering at ``s`` and leaving at ``e``.  A range longer than ``leaf`` nodes is split in two halves ``[s, mid-1]`` and
``[mid, e]``; each half is solved (recursively), and the range is then solved by the same exact primal network
simplex (:mod:`kvcore.optima.netsimplex`) starting from the two halves' optimal flows and spanning trees.  That start
is feasible: the line arc ``mid-1 -> mid`` and the arcs that cross from one half into the other keep their start
values (capacity ``h`` on the line arc, which carries exactly the ``h`` units the left half delivers; nothing on the
crossing arcs, at their lower bound), so conservation holds at every node.  It is a strongly feasible basis: each
half's tree hangs from the common artificial root, so their union is a spanning tree of the range, every node keeps
its tree arc and orientation, and the crossing arcs, at a bound, are outside it.  The simplex then only repairs what
the crossing arcs change near the cut.  The whole network is the last range, so the answer is the network simplex's
own (its exact duality certificate covers every arc): the split changes the starting basis, never the optimum.

Why (RM optimum, bench trace, h = 1,000; CPU seconds on the shared 2-core machine, same costs throughout): the
simplex on the whole network makes pivots whose cycles follow long stretches of the time line, and its time grows
about as ``T**1.5`` (T = 10^5: 4.6 s, T = 10^6: 173 s).  Ranges of ``leaf`` steps cost the short cycles of a small
network, and each merge repairs one cut.  This is the classical decomposition of a problem along a separator with
the LP warm-started from the parts' bases (e.g. Ahuja, Magnanti & Orlin, *Network Flows*, Prentice Hall 1993,
ch. 11 on re-optimization from an advanced basis); docs/performance.md ("Exact offline optima") has the numbers
(``python -m bench.rm_optimum``).

Also measured at T = 10^6 (issue 30), not adopted: column generation, the simplex on the 697 k densest of the 908 k
gaps (total length twice the capacity) and the rest priced with its potentials (31 violated, one re-solve): 228 s
against 202 s on the whole network in the same conditions; the long gaps are not what makes the pivots expensive.
Fixing gaps that every optimum keeps (at every step of the gap, fewer than the free slots are covered by gaps other
than those that contain it and cost strictly less): 5,092 of 907,843 qualify.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .mincost import FlowNetwork, FlowSolution, solve_netsimplex

# h = 1,000, bench trace, CPU: at T = 10^6 leaves of 20 k / 50 k / 100 k steps took 39 / 43 / 47 s (a prototype of
# this module, same scheme); at 3 x 10^5, 5 k / 10 k / 20 k steps 8.9 / 8.7 / 9.6 s (this module)
LEAF_STEPS = 20_000


def check_time_line(net: FlowNetwork) -> int:
    """``h``, the flow through the line; ValueError if ``net`` is not a time-line network: arc ``t`` (``t < n - 1``)
    is the line arc ``t -> t+1`` and starts with the ``h`` units that enter at node 0 and leave at node ``n - 1``;
    every other arc goes forward in time and starts empty at lower bound 0."""
    n = net.n_nodes
    h = int(net.supply[0]) if n > 1 else 0
    expected = np.zeros(n, np.int64)
    expected[0] += h
    expected[n - 1] -= h
    line = np.arange(n - 1)
    rest = slice(n - 1, None)
    if (not np.array_equal(net.supply, expected) or net.n_arcs < n - 1 or not np.array_equal(net.tail[line], line)
            or not np.array_equal(net.head[line], line + 1) or (net.start[line] != h).any()
            or (net.tail[rest] >= net.head[rest]).any() or net.start[rest].any() or net.lower[rest].any()):
        raise ValueError("time split: not a time-line network (line arcs first carrying the supply, every other arc "
                         "forward in time and empty at lower bound 0)")
    return h


def check_leaf(leaf: int) -> int:
    """ParameterError unless ``leaf`` (``rm_opt``'s ``split_steps``) is at least 2 nodes."""
    if leaf < 2:
        raise ParameterError(f"split_steps = {leaf}: must be at least 2 (or None: the whole network at once)")
    return leaf


def solve_time_split(net: FlowNetwork, leaf: int = LEAF_STEPS) -> FlowSolution:
    """The certified minimum-cost flow of the time-line network ``net`` (module docstring), ranges of at most
    ``leaf`` nodes solved from scratch and every larger range warm-started from its halves."""
    check_leaf(leaf)
    h = check_time_line(net)
    by_tail = np.argsort(net.tail, kind="stable")
    tails = net.tail[by_tail]
    flow = net.start.astype(np.int64).copy()
    tree = np.full(net.n_nodes, -1, np.int64)  # each node's tree arc (global index), -1: hung from the root
    # explicit post-order over the ranges (a recursion would be as deep as log2(n / leaf) only, but a stack keeps
    # the order obvious: both halves of a range are solved before the range itself)
    todo = [(0, net.n_nodes - 1, False)]
    sol = FlowSolution(flow, "netsimplex", 0.0)  # a one-node network has no arc to solve
    while todo:
        s, e, halves_done = todo.pop()
        n = e - s + 1
        if n > leaf and not halves_done:
            mid = s + n // 2
            todo += [(s, e, True), (mid, e, False), (s, mid - 1, False)]
            continue
        sol = _solve_range(net, by_tail, tails, s, e, h, flow, tree, warm=halves_done) or sol
    return FlowSolution(flow, sol.solver, sol.gap_bound)


def _solve_range(net: FlowNetwork, by_tail: np.ndarray, tails: np.ndarray, s: int, e: int, h: int,
                 flow: np.ndarray, tree: np.ndarray, warm: bool) -> FlowSolution | None:
    """Solve the sub-network of nodes ``s..e`` from ``flow`` (and, when ``warm``, the halves' ``tree``); write its
    optimal flow and final tree back into ``flow`` and ``tree``.  None for a range without arcs (a single node)."""
    lo, hi = np.searchsorted(tails, [s, e])  # tail in [s, e): every arc of the range leaves a node before e
    arcs = by_tail[lo:hi]
    arcs = np.sort(arcs[net.head[arcs] <= e])
    if arcs.size == 0:
        return None
    n = e - s + 1
    supply = np.zeros(n, np.int64)
    supply[0] += h
    supply[n - 1] -= h
    tail, head = net.tail[arcs] - s, net.head[arcs] - s
    sub = FlowNetwork(n_nodes=n, tail=tail, head=head, lower=net.lower[arcs], cap=net.cap[arcs], cost=net.cost[arcs],
                      cost_unit=net.cost_unit, supply=supply, start=flow[arcs],
                      scan_order=np.lexsort((tail, head)))  # priced by head time, as rm_flow measured best
    start_tree = None
    if warm:
        own = tree[s:e + 1]
        start_tree = np.where(own >= 0, np.searchsorted(arcs, np.maximum(own, 0)), -1)
    sol, final = solve_netsimplex(sub, start_tree)
    flow[arcs] = sol.flow
    tree[s:e + 1] = np.where(final >= 0, arcs[np.maximum(final, 0)], -1)
    return sol
