"""Least frequently used (in-cache counts)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

from .base import Policy
from .heap import KeyedMinHeap
from .registry import register


@register
@dataclass
class LFU(Policy):
    """Evict the resident unprotected item with the fewest requests since it was last admitted.

    Rule: an item's count is 1 when it is admitted and grows by 1 on every hit; eviction forgets it (in-cache LFU).
    Ties go to the least recently used item (last admission or hit).  Heap key ``(count, last use)``, so each step
    is ``O(log k)``.  Attention observations are ignored: LFU counts requests only.

    LFU is not competitive: on ``p_1^m ... p_{k-1}^m (x y)^{m-1}`` it pays ``(k-1) + 2(m-1)`` while the optimum pays
    ``k+1`` (Sleator & Tarjan 1985).  Model: RM only (NM has no requests to count; counting attention is the
    accumulated-attention family of the paper's Section 5, implemented elsewhere).

    Persistable: the exported state is the count at eviction; :meth:`import_state` adds it to the admission's count,
    so a returning item resumes its history instead of starting at 1 (seed 002, persistent policy state).
    """

    name = "LFU"
    signal = "frequency"
    models = frozenset({"rm"})
    citation = "Sleator & Tarjan, Amortized efficiency of list update and paging rules, CACM 1985"
    persistable = True

    def on_reset(self) -> None:
        self._heap = KeyedMinHeap()
        self._count: dict[int, int] = {}
        self._clock = count()

    def _touch(self, item: int, n: int) -> None:
        self._count[item] = n
        self._heap.set(item, (n, next(self._clock)))

    def on_admit(self, t, item, cost):
        self._touch(item, 1)

    def on_hit(self, t, item, cost):
        self._touch(item, self._count[item] + 1)

    def on_evict(self, t, item):
        self._heap.remove(item)
        del self._count[item]

    def victim(self, t, protected):
        return self._heap.min(protected)

    def export_state(self, item):
        return self._count[item]

    def import_state(self, t, item, state):
        self._touch(item, self._count[item] + int(state))
