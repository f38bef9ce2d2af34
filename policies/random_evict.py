"""Uniformly random eviction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Policy
from .registry import register


class IndexedSet:
    """A set of ints with ``O(1)`` add, remove and uniform sampling (swap-with-last removal).

    Sampling draws one ``rng.integers`` per attempt, so a run is a function of the seed and the request history.
    """

    __slots__ = ("_items", "_pos")

    def __init__(self, items=()) -> None:
        self._items: list[int] = []
        self._pos: dict[int, int] = {}
        for i in items:
            self.add(i)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: int) -> bool:
        return item in self._pos

    def add(self, item: int) -> None:
        if item not in self._pos:
            self._pos[item] = len(self._items)
            self._items.append(item)

    def discard(self, item: int) -> None:
        p = self._pos.pop(item, None)
        if p is None:
            return
        last = self._items.pop()
        if p < len(self._items):
            self._items[p] = last
            self._pos[last] = p

    def sample(self, rng: np.random.Generator, exclude: frozenset) -> int:
        """A uniformly random member not in ``exclude`` (raises KeyError if there is none).

        Rejection sampling is uniform on the allowed members; when they are at most half of the set, the allowed
        members are listed instead so that the expected number of draws stays below 2.
        """
        items = self._items
        blocked = sum(1 for i in exclude if i in self._pos) if exclude else 0
        if blocked == len(items):
            raise KeyError("every member is excluded")
        if 2 * blocked <= len(items):
            while True:
                i = items[int(rng.integers(len(items)))]
                if i not in exclude:
                    return i
        allowed = [i for i in items if i not in exclude]
        return allowed[int(rng.integers(len(allowed)))]


@register
@dataclass
class Random(Policy):
    """Evict a resident, unprotected item chosen uniformly at random (with the run's seeded generator).

    RANDOM is ``k``-competitive against an adaptive-online adversary and, like every policy that keeps its cache full,
    has ratio tending to ``H_k`` on i.i.d. uniform requests over ``k+1`` items (Raghavan & Snir 1989).
    Model: RM and NM; in NM the arriving token is a candidate like every other resident token.
    """

    name = "Random"
    signal = "none"
    deterministic = False
    models = frozenset({"rm", "nm"})
    citation = "Raghavan & Snir, Memory versus randomization in on-line algorithms, ICALP 1989"

    def on_reset(self) -> None:
        self._pool = IndexedSet()

    def on_admit(self, t, item, cost):
        self._pool.add(item)

    def on_evict(self, t, item):
        self._pool.discard(item)

    def victim(self, t, protected):
        return self._pool.sample(self.rng, protected)
