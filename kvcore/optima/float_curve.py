"""A regret curve's decreases in floating point, one slot at a time, by successive shortest paths: an estimate.

``OPT(h)`` of one head is the least cost of a flow of ``h`` units through the interval network of
:mod:`kvcore.optima.nm_flow` (``h`` units from the first line node to the last; the line arcs never bind once their
capacity is at least the flow), so the curve is the cost of a min-cost flow as a function of its value.  Successive
shortest paths (Ahuja, Magnanti & Orlin, *Network Flows*, 1993, §9.7) raise the value one unit at a time along a
cheapest path of the residual network, and the ``k``-th path costs ``OPT(k) - OPT(k - 1) = -d(k)``: the curve's
decreases in order, each from one Dijkstra search on costs reduced by node potentials (Edmonds & Karp, JACM 1972).
The network is acyclic in time, so the first potentials come from one pass in time order.  A cheapest path never
costs more than the empty line's 0, so every decrease is ``>= 0`` and, the paths' costs rising, they do not increase.

The sums are rounded doubles: these are estimates, and :func:`kvcore.optima.allocation.certified_allocation` decides
nothing from them without the exact solver's check.  Compiled by numba like :mod:`kvcore.kernels`; the exact curve
(:class:`kvcore.optima.allocation.RegretCurve`) is the reference ``tests/test_allocation_estimate.py`` compares with.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..kernels import Kernel
from .capacity_curve import Entries

ZERO = 1e-9  # a decrease below this fraction of the head's stored mass is taken as 0: rounding, or the flat tail


def _first_paths(topo, adj_start, adj_arc, head, cost, pi, pred):
    """Cheapest paths from node 0 with no flow yet, the nodes taken in time order ``topo`` (every arc points
    forward): ``pi`` the distances, ``pred`` the arc each node is reached by (``a + 1``: forward)."""
    pi[:] = np.inf
    pi[topo[0]] = 0.0
    for u in topo:
        for e in range(adj_start[u], adj_start[u + 1]):
            a = adj_arc[e]
            if a >= 0:
                v = head[a]
                if pi[u] + cost[a] < pi[v]:
                    pi[v] = pi[u] + cost[a]
                    pred[v] = a + 1


first_paths = Kernel(_first_paths)


def _next_path(sink, adj_start, adj_arc, tail, head, cost, cap, flow, pi, pred, dist, done, key, node):
    """Send one unit along the path ``pred`` describes (``a + 1`` forward, ``-(a + 1)`` backward on arc ``a``), then
    find the cheapest path of the new residual network by Dijkstra on reduced costs, raise ``pi`` by the distances
    and return the path's cost (``pi[sink] - pi[0]``, with ``pi[0] = 0``).  ``adj_arc`` lists each node's residual
    arcs: ``a`` for an arc it is the tail of, ``-(a + 1)`` for one it is the head of.  Every node stays reachable:
    the line arcs keep spare capacity and a token's node is entered by its take arc or back along its used exit."""
    v = sink
    while v != 0:
        p = pred[v]
        if p > 0:
            flow[p - 1] += 1
            v = tail[p - 1]
        else:
            flow[-p - 1] -= 1
            v = head[-p - 1]
    dist[:] = np.inf
    done[:] = False
    dist[0] = 0.0
    key[0], node[0], size = 0.0, 0, 1  # a binary min-heap of (distance, node) in key[:size], node[:size]
    while size > 0:
        d, u = key[0], node[0]
        size -= 1  # pop: the last entry sifts down from the root
        k, w, i = key[size], node[size], 0
        while 2 * i + 1 < size:
            child = 2 * i + 1
            if child + 1 < size and key[child + 1] < key[child]:
                child += 1
            if key[child] >= k:
                break
            key[i], node[i], i = key[child], node[child], child
        key[i], node[i] = k, w
        if done[u]:
            continue
        done[u] = True
        for e in range(adj_start[u], adj_start[u + 1]):
            a = adj_arc[e]
            if a >= 0:
                if flow[a] >= cap[a]:
                    continue
                v, c, p = head[a], cost[a], a + 1
            else:
                if flow[-a - 1] <= 0:
                    continue
                v, c, p = tail[-a - 1], -cost[-a - 1], a
            if done[v]:
                continue
            reduced = c + pi[u] - pi[v]
            nd = d + (reduced if reduced > 0.0 else 0.0)  # a rounding error below 0 would break Dijkstra's order
            if nd < dist[v]:
                dist[v] = nd
                pred[v] = p
                i = size  # push: sift up from the end
                size += 1
                while i > 0 and key[(i - 1) // 2] > nd:
                    key[i], node[i], i = key[(i - 1) // 2], node[(i - 1) // 2], (i - 1) // 2
                key[i], node[i] = nd, v
    for v in range(pi.size):
        pi[v] += dist[v]
    return pi[sink]


next_path = Kernel(_next_path)


class FloatCurve:
    """One head's successive shortest paths (module docstring): :attr:`decrease` is the estimate of ``d(k + 1)``
    after ``k`` calls of :meth:`advance`.  ``limit``: the most slots it will be asked for."""

    def __init__(self, entries: Entries, limit: int):
        e = entries
        T, n_items, nnz = e.T, e.arrival.size, e.item.size
        # node t is line node t, node T + 1 + i item i; arcs: the line, one take per item, one exit per entry
        self.tail = np.concatenate([np.arange(T), e.arrival, T + 1 + e.item]).astype(np.int64)
        self.head = np.concatenate([np.arange(1, T + 1), T + 1 + np.arange(n_items), e.step + 1]).astype(np.int64)
        prefix = np.cumsum(e.weight)  # the mass an item earns resident through each of its entries
        first = np.searchsorted(e.item, np.arange(n_items))
        prefix = prefix - np.repeat(prefix[first] - e.weight[first], np.diff(np.append(first, nnz)))
        self.cost = np.concatenate([np.zeros(T + n_items), -prefix])
        self.cap = np.concatenate([np.full(T, limit + 1), np.ones(n_items + nnz)]).astype(np.int64)
        self.flow = np.zeros(self.cap.size, np.int64)
        m, n_nodes = self.cap.size, T + 1 + n_items
        arcs = np.arange(m, dtype=np.int64)
        ends = np.concatenate([self.tail, self.head])
        order = np.argsort(ends, kind="stable")
        self.adj_arc = np.concatenate([arcs, -(arcs + 1)])[order]
        self.adj_start = np.searchsorted(ends[order], np.arange(n_nodes + 1)).astype(np.int64)
        self.sink = T
        self.pi, self.pred = np.empty(n_nodes), np.zeros(n_nodes, np.int64)
        self.dist, self.done = np.empty(n_nodes), np.empty(n_nodes, np.bool_)
        self.key, self.node = np.empty(2 * m + 1), np.empty(2 * m + 1, np.int64)
        topo = np.argsort(np.concatenate([2 * np.arange(T + 1), 2 * e.arrival + 1]), kind="stable")
        first_paths(topo.astype(np.int64), self.adj_start, self.adj_arc, self.head, self.cost, self.pi, self.pred)
        self.zero = ZERO * max(float(e.weight.sum()), 1.0)
        self.decrease = self._rounded(-self.pi[T])

    def _rounded(self, d: float) -> float:
        return 0.0 if d <= self.zero else d

    def advance(self) -> float:
        """Take the next slot: send one more unit, and return the estimate of the next decrease.  A curve once
        flat stays flat (the decreases do not increase), so no path is searched after a 0."""
        if self.decrease > 0.0:
            self.decrease = self._rounded(-next_path(
                self.sink, self.adj_start, self.adj_arc, self.tail, self.head, self.cost, self.cap, self.flow,
                self.pi, self.pred, self.dist, self.done, self.key, self.node))
        return self.decrease


def estimated_allocation(entries: list[Entries], total: int, limit: int) -> list[int]:
    """Slots per head after handing out ``total`` one at a time to the largest estimated next decrease, ties to the
    head with fewer slots, then the lower index (the order of :func:`kvcore.optima.allocation.greedy_order`), no
    head over ``limit``."""
    curves = [FloatCurve(e, limit) for e in entries]
    k = [0] * len(curves)
    heap = [(-c.decrease, 0, h) for h, c in enumerate(curves)]
    heapq.heapify(heap)
    for _ in range(total):
        _, _, h = heapq.heappop(heap)
        k[h] += 1
        if k[h] < limit:
            heapq.heappush(heap, (-curves[h].advance(), k[h], h))
    return k


__all__ = ["FloatCurve", "estimated_allocation"]
