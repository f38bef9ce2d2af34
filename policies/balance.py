"""Balance for weighted caching."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import count

from .base import Policy
from .heap import KeyedMinHeap
from .registry import register


@register
@dataclass
class Balance(Policy):
    """The balance rule on the weighted-cache metric: the cache slot that has paid least so far takes the fault.

    Source of the rule.  Chrobak, Karloff, Payne & Vishwanathan (New results on server problems, SIAM J. Discrete
    Math. 4, 1991) treat weighted caching as the ``k``-server problem on the metric where moving a server to point
    ``x`` from anywhere costs ``w(x)``, and give a ``k``-competitive algorithm for it; Young (SODA 1991; Algorithmica
    1994) names it the balance algorithm.  The balance rule of Manasse, McGeoch & Sleator (J. Algorithms 1990) serves
    a request ``r`` with the server ``s`` minimizing ``D_s + d(s, r)``, ``D_s`` the distance ``s`` has travelled.
    On this metric ``d(s, r) = w(r)`` for every server, so the rule is:

    * each of the ``k`` slots keeps ``D_s`` = total fault cost of the items it has loaded (0 at the start);
    * on a fault, the resident unprotected item whose slot has the least ``D_s`` is evicted and the fetched item
      takes that slot, whose ``D_s`` grows by the fault cost; hits change nothing.

    (The full text of the 1991 paper was not available to us; the rule above is assembled from its abstract's metric
    and the balance rule, and it is the no-hit-reset case of Greedy-Dual/Landlord, which Young shows generalizes
    balance.)  Free slots are used before any eviction (the engine evicts only when full).  Several faults at one step
    take the freed slots in the order the engine admits them.  Ties in ``D_s`` go to the item admitted earliest, so
    with unit costs Balance is exactly FIFO (not LRU, as the paper's Section 4 says of both Balance and Landlord:
    Balance never looks at hits).  Model: RM only.
    """

    name = "Balance"
    signal = "cost"
    models = frozenset({"rm"})
    citation = ("Chrobak, Karloff, Payne & Vishwanathan, New results on server problems, SIAM J. Discrete Math. 1991; "
                "Young, On-line caching as cache size varies, SODA 1991")

    def on_reset(self) -> None:
        self._heap = KeyedMinHeap()
        self._free_slots: deque[float] = deque([0.0] * self.k)
        self._clock = count()

    def on_admit(self, t, item, cost):
        self._heap.set(item, (self._free_slots.popleft() + cost, next(self._clock)))

    def on_evict(self, t, item):
        self._free_slots.append(self._heap.key(item)[0])
        self._heap.remove(item)

    def victim(self, t, protected):
        return self._heap.min(protected)
