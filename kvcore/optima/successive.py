"""One head's NM optimum moved one slot at a time: successive shortest paths on its complete network, in doubles.

The network (:mod:`kvcore.optima.nm_flow`): ``k`` units along a line ``L_0 -> ... -> L_T``; at step ``i`` a unit
may leave the line for token ``i``'s node (the take arc) and return at ``L_{t + 1}`` through the exit arc of cost
``-P(i, t)`` (token ``i`` resident from ``i`` through ``t``).  Its least cost with ``k`` units is ``-`` the most
retained mass, so ``OPT(k) = total - retained`` is convex in ``k`` (a min-cost flow's cost is convex in its supply;
Ahuja, Magnanti & Orlin, *Network Flows*, 1993, §9.7) and from an optimal flow at ``k`` with potentials that price
every arc of the complete network at ``rc >= 0`` (a certified priced solve's), the optimum at ``k + 1`` is one
shortest ``L_0 -> L_T`` path away in the residual network, and the optimum at ``k - 1`` one shortest ``L_T -> L_0``
path away (successive shortest paths, Ahuja et al. §9.7; Dijkstra on the reduced costs, then every potential raised
by its distance, capped at the target's, so the reduced costs stay ``>= 0``).  The exits are not stored: a token
node scans its ``T - i`` exits from the column prefix sums ``P(i, t)``, so one path costs ``O(T^2)``
(about 5 ms at 2,000 steps).

This runs in doubles and nothing here is trusted: :mod:`kvcore.optima.static_split` uses the marginals it gives
(``OPT(k) - OPT(k + 1)`` and ``OPT(k - 1) - OPT(k)``) to find a static split, then certifies the split with exact
priced solves.  Rounding can leave a reduced cost slightly below 0; it is read as 0 (Dijkstra needs ``rc >= 0``).
"""

from __future__ import annotations

import heapq
from typing import Callable

import numpy as np

from ..kernels import Kernel


def _shortest(C, T, exit_, flow, pot, source, target, dist, pred):
    """Dijkstra on the residual network of the flow (``exit_[i]``: token ``i``'s exit step, ``-1`` not kept;
    ``flow[t]``: units on the line arc ``L_t -> L_{t + 1}``) from node ``source`` to ``target`` on the reduced
    costs ``c(u, v) + pot[u] - pot[v]`` (each read as ``>= 0``); nodes ``0..T`` are ``L_0..L_T``, ``T + 1 + i``
    token ``i``; ``C[i, t] = P(i, t)`` for ``t >= i``.  Fills ``dist`` (``inf``: not reached) and ``pred``."""
    n = 2 * T + 1
    for v in range(n):
        dist[v] = np.inf
        pred[v] = -1
    # tokens by the line node their exit returns to (the reverse exit arcs leave it)
    count = np.zeros(T + 2, np.int64)
    for i in range(T):
        if exit_[i] >= 0:
            count[exit_[i] + 2] += 1
    for t in range(T + 1):
        count[t + 1] += count[t]
    back = np.empty(T, np.int64)
    fill = count.copy()
    for i in range(T):
        if exit_[i] >= 0:
            back[fill[exit_[i] + 1]] = i
            fill[exit_[i] + 1] += 1
    done = np.zeros(n, np.bool_)
    dist[source] = 0.0
    heap = [(0.0, source)]
    while len(heap) > 0:
        d, u = heapq.heappop(heap)
        if done[u]:
            continue
        done[u] = True
        if u == target:
            break
        if u <= T:  # a line node L_u
            arcs = []
            if u < T:
                arcs.append((u + 1, pot[u] - pot[u + 1]))
                if exit_[u] < 0:
                    arcs.append((T + 1 + u, pot[u] - pot[T + 1 + u]))
            if u > 0 and flow[u - 1] > 0:
                arcs.append((u - 1, pot[u] - pot[u - 1]))
            for j in range(count[u], count[u + 1]):  # a reverse exit: token back[j] no longer returns here
                i = back[j]
                arcs.append((T + 1 + i, C[i, u - 1] + pot[u] - pot[T + 1 + i]))
            for v, rc in arcs:
                nd = d + max(rc, 0.0)
                if nd < dist[v]:
                    dist[v] = nd
                    pred[v] = u
                    heapq.heappush(heap, (nd, v))
        else:
            i = u - T - 1
            if exit_[i] >= 0:  # the reverse take arc: token i not kept
                nd = d + max(pot[u] - pot[i], 0.0)
                if nd < dist[i]:
                    dist[i] = nd
                    pred[i] = u
                    heapq.heappush(heap, (nd, i))
            for t in range(i, T):  # every other exit of token i
                if t == exit_[i]:
                    continue
                nd = d + max(-C[i, t] + pot[u] - pot[t + 1], 0.0)
                if nd < dist[t + 1]:
                    dist[t + 1] = nd
                    pred[t + 1] = u
                    heapq.heappush(heap, (nd, t + 1))


shortest = Kernel(_shortest)


class HeadFlow:
    """One head's optimal flow at ``k`` units and potentials proving it on the complete network (module docstring),
    moved by :meth:`move`; ``up``/``down``: the marginals ``OPT(k) - OPT(k + 1)`` and ``OPT(k - 1) - OPT(k)`` as
    the current shortest paths give them (``-inf``/``inf`` where ``k`` cannot move that way)."""

    def __init__(self, rows: Callable[[], np.ndarray], k: int, drops: np.ndarray, line_pot: np.ndarray,
                 item_pot: np.ndarray):
        """``rows()`` the complete rows ``(T, T)`` (read again after :meth:`release`), ``drops`` an optimal
        schedule's at ``k`` (:class:`kvcore.optima.priced.PricedResult`), ``line_pot`` ``(T + 1,)`` and ``item_pot``
        ``(T,)`` (NaN: a token without a node) its potentials as doubles."""
        T = drops.size
        self.T, self.k, self.rows, self._C = T, int(k), rows, None
        self.exit = np.where(drops > np.arange(T), drops - 1, -1).astype(np.int64)
        resident = np.zeros(T + 1, np.int64)
        kept = np.flatnonzero(self.exit >= 0)
        np.add.at(resident, kept, 1)
        np.add.at(resident, self.exit[kept] + 1, -1)
        self.flow = self.k - np.cumsum(resident)[:T]
        # a token without a node has no positive entry; pricing it at its line node makes every arc of it rc >= 0
        self.pot = np.concatenate([line_pot, np.where(np.isnan(item_pot), line_pot[:T], item_pot)])
        self._paths()

    @property
    def C(self) -> np.ndarray:
        """``C[i, t] = P(i, t)`` ``(T, T)``, made from the rows when first needed after :meth:`release`."""
        if self._C is None:
            self._C = np.ascontiguousarray(np.cumsum(np.tril(self.rows()), axis=0).T)
        return self._C

    def release(self) -> None:
        """Let the prefix sums go (``8 T^2`` bytes); the next move makes them again."""
        self._C = None

    def _path(self, source: int, target: int) -> tuple[float, np.ndarray, np.ndarray]:
        n = 2 * self.T + 1
        dist, pred = np.empty(n), np.empty(n, np.int64)
        shortest(self.C, np.int64(self.T), self.exit, self.flow, self.pot, np.int64(source), np.int64(target),
                 dist, pred)
        return dist[target] + self.pot[target] - self.pot[source], dist, pred

    def _paths(self) -> None:
        T = self.T
        cost_up, *self._up = self._path(0, T) if self.k < T else (np.inf, None, None)
        cost_down, *self._down = self._path(T, 0) if self.k > 0 else (np.inf, None, None)
        self.up, self.down = -cost_up, cost_down

    def prices(self, step: int) -> np.ndarray:
        """The slot prices ``(T,)`` of the potentials the flow at ``k + step`` (``step`` in -1, 0, 1) would have
        after the move (the line potentials' differences; the priced solve starts from the exits near them)."""
        pot = self.pot[:self.T + 1]
        if step:
            dist = (self._up if step > 0 else self._down)[0]
            target = self.T if step > 0 else 0
            pot = pot + np.minimum(dist[:self.T + 1], dist[target])
        return pot[:-1] - pot[1:]

    def move(self, step: int) -> None:
        """Send one unit along the current ``L_0 -> L_T`` (``step = 1``) or ``L_T -> L_0`` (``-1``) shortest path,
        raise the potentials by the distances (capped at the target's) and find the next paths."""
        T = self.T
        dist, pred = self._up if step > 0 else self._down
        source, target = (0, T) if step > 0 else (T, 0)
        self.pot += np.minimum(dist, dist[target])
        v = target
        while v != source:
            u = int(pred[v])
            if u <= T and v <= T:  # along the line, or against it
                if v == u + 1:
                    self.flow[u] += 1
                else:
                    self.flow[v] -= 1
            elif u > T:  # out of token i (walking back, before the arc in): its new exit, or not kept at all; the
                # arc in (its take, or its old exit reversed) changes nothing more
                i = u - T - 1
                self.exit[i] = -1 if v == i else v - 1
            v = u
        self.k += step
        self._paths()


__all__ = ["HeadFlow", "shortest"]
