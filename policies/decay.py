"""Shared machinery of the score-based attention policies: lazy geometric decay and a rising-key min-heap.

Not a policy (nothing here is registered).  ACC, DecayedACC, H2O, GD-A, LRFU and the Section 10 default policy keep
one score per resident item and evict a minimum; these two structures make a step cost ``O(nnz)`` dictionary updates
plus amortized ``O(log k)`` heap work per eviction, with no per-step pass over all ``k`` items.

``LazyDecay`` (geometric decay by a lazy multiplicative offset)
    A decayed score ``s_i(t) = sum_{s <= t} gamma^(t-s) a[s, i]`` is stored as ``x_i = s_i(t) * gamma^-(t - base)``.
    Adding an observation ``a`` at step ``t`` is ``x_i += a * gamma^-(t - base)``; no other item changes, and the
    order of the ``x_i`` at any moment is the order of the true scores (all share the factor).  The factor grows
    without bound, so when it passes ``LIMIT`` (2^256) every stored value is multiplied by ``gamma^(t - base)`` and
    ``base`` moves to ``t`` (an ``O(k)`` rescale once every ``256 ln 2 / ln(1/gamma)`` steps, i.e. amortized
    ``O(k ln(1/gamma) / 177)`` per step: about 0.06 item-operations per step at ``k = 1024, gamma = 0.99``).
    Scores that fall below ``2^-1074`` of the newest contributions underflow to exactly 0 at a rescale; the
    policies treat them as never-attended (their true value is below any double anyway).

``RisingKeyHeap`` (lazy increase-key)
    Every key in these policies only ever rises while the item is resident (mass is added, credits are refreshed
    upward, recency counters grow).  So a raise just overwrites the item's current key; the heap keeps the older,
    smaller entry as a lower bound.  ``min`` looks at the top entry: if it is stale (its key differs from the
    item's current key) it is re-pushed with the current key and the search goes on; if it is current it is the
    exact minimum, because every other item's current key is at least its own entry, which is at least the top.
    Equal keys fall back to the smaller item id (entries are ``(key, item)`` tuples), exactly as in
    :class:`policies.heap.KeyedMinHeap`.  Each raise causes at most one re-push, so ``min`` is amortized
    ``O(log k)`` per raise that reaches the top; memory is kept ``O(items)`` by rebuilding when entries outnumber
    items two to one.  (``KeyedMinHeap`` pushes on every key change, which costs a ``heappush`` per observed entry;
    this structure costs a dictionary write.)
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

_MISSING = object()


class LazyDecay:
    """The lazy multiplicative offset of geometric decay (module docstring)."""

    LIMIT = 2.0 ** 256
    __slots__ = ("gamma", "base")

    def __init__(self, gamma: float) -> None:
        self.gamma = gamma
        self.base = 0

    def scale(self, t: int) -> float:
        """``gamma^-(t - base)``: multiply an observation at step ``t`` by this before adding it."""
        return 1.0 if self.gamma == 1.0 else self.gamma ** (self.base - t)

    def renormalize(self, t: int) -> float:
        """Move ``base`` to ``t``; return the factor every stored value must be multiplied by."""
        factor = self.gamma ** (t - self.base)
        self.base = t
        return factor

    def true_value(self, stored: float, t: int) -> float:
        """The decayed score at step ``t`` of a stored value."""
        return stored / self.scale(t)


class RisingKeyHeap:
    """Min-heap of items whose keys only rise while present (module docstring).  ``key`` maps item -> current key."""

    __slots__ = ("_heap", "key", "pops")

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int]] = []
        self.key: dict[int, Any] = {}
        self.pops = 0  # entries popped or replaced at the top: each is one O(log n) sift (operation counts)

    def __len__(self) -> int:
        return len(self.key)

    def __contains__(self, item: int) -> bool:
        return item in self.key

    def add(self, item: int, key: Any) -> None:
        """Insert a new item (or reset a present one to any key, which pushes a fresh entry)."""
        self.key[item] = key
        heapq.heappush(self._heap, (key, item))
        if len(self._heap) > 2 * len(self.key) + 64:
            self.rebuild()

    def remove(self, item: int) -> None:
        self.key.pop(item, None)

    def rebuild(self, transform: Callable[[Any], Any] | None = None) -> None:
        """Rebuild from current keys, optionally mapping every key through an order-preserving ``transform``."""
        if transform is not None:
            self.key = {i: transform(k) for i, k in self.key.items()}
        self._heap = [(k, i) for i, k in self.key.items()]
        heapq.heapify(self._heap)

    def min(self, exclude: frozenset | set = frozenset()) -> int:
        """The item with the smallest ``(key, item)`` not in ``exclude``; raises KeyError if there is none."""
        heap, key = self._heap, self.key
        held = []
        try:
            while heap:
                k, i = heap[0]
                cur = key.get(i, _MISSING)
                self.pops += 1
                if cur is _MISSING:
                    heapq.heappop(heap)
                elif cur != k:
                    heapq.heapreplace(heap, (cur, i))
                elif exclude and i in exclude:
                    held.append(heapq.heappop(heap))
                else:
                    self.pops -= 1  # the top was only looked at
                    return i
            raise KeyError("no item left outside the excluded set")
        finally:
            for e in held:
                heapq.heappush(heap, e)
