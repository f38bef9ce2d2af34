"""A keyed min-heap with lazy deletion: ``O(log n)`` push/update, amortized ``O(log n)`` minimum.

Updating an item's key pushes a new entry; entries whose key no longer matches are discarded when they reach the top.
The heap is rebuilt when stale entries outnumber live ones, so memory stays ``O(live items)``.  Keys are any
comparable values (tuples give tie-breaks); equal keys fall back to the item id.
"""

from __future__ import annotations

import heapq
from typing import Any, Iterable


class KeyedMinHeap:
    __slots__ = ("_heap", "_key")

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int]] = []
        self._key: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._key)

    def __contains__(self, item: int) -> bool:
        return item in self._key

    def key(self, item: int) -> Any:
        return self._key[item]

    def items(self) -> Iterable[int]:
        return self._key.keys()

    def set(self, item: int, key: Any) -> None:
        """Insert ``item`` or change its key."""
        self._key[item] = key
        heapq.heappush(self._heap, (key, item))
        if len(self._heap) > 2 * len(self._key) + 64:
            self._heap = [(k, i) for i, k in self._key.items()]
            heapq.heapify(self._heap)

    def remove(self, item: int) -> None:
        self._key.pop(item, None)

    def _clean_top(self) -> None:
        heap, keys = self._heap, self._key
        while heap:
            k, i = heap[0]
            if keys.get(i, _MISSING) == k:
                return
            heapq.heappop(heap)

    def min(self, exclude: frozenset | set = frozenset()) -> int:
        """The item with the smallest key that is not in ``exclude`` (raises KeyError if none)."""
        self._clean_top()
        heap = self._heap
        if not exclude:
            if not heap:
                raise KeyError("empty heap")
            return heap[0][1]
        held = []
        try:
            while True:
                self._clean_top()
                if not heap:
                    raise KeyError("every item is excluded")
                k, i = heap[0]
                if i not in exclude:
                    return i
                held.append(heapq.heappop(heap))
        finally:
            for e in held:
                heapq.heappush(heap, e)

    def pop(self, exclude: frozenset | set = frozenset()) -> int:
        i = self.min(exclude)
        del self._key[i]
        return i


_MISSING = object()
