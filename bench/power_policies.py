"""Policies with known worst ratios or planted flaws for the fuzzer-power benchmark (:mod:`bench.fuzz_power`).

None of them is registered: the fuzzer loads them by ``module:Class`` (``bench.power_policies:LateLIFO``), exactly
as it loads a user's policy, so they run in their own process and the registry (and every claim built on it) never
sees them.  Each states what is known about it:

- :class:`MarkingFIFO` -- a deterministic marking policy (Fiat, Karp, Luby, McGeoch, Sleator & Young, J. Algorithms
  1991): it never evicts an item requested in the current phase, so it is ``k``-competitive.  Sound: the fuzzer
  must not flag it.
- :class:`LateLIFO` -- LRU for its first ``switch_after`` evictions, LIFO afterwards: unbounded ratio, but only
  on traces long enough to reach the switch.
- :class:`PeriodicMRU` -- LRU, except that every ``period``-th eviction drops the most recently used item: the
  adversary re-requests that item, so the ratio exceeds ``k`` (a flaw on one eviction in ``period``).
- :class:`StickyResidue`, :class:`LargeIdMRU` -- LRU with a flaw keyed on id values (a residue, a threshold): only
  a search whose ids take such values finds them (:mod:`adversary.relabel`).
- :class:`LateHeavyDrop` -- no-refetch (NM): R-LRU-H (paper Section 7) for ``switch_after`` evictions, then it
  drops the most recently heavy resident token instead of the least recently attended light one, which breaks Theorem 4's tail bound on traces inside
  the premise.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.base import Policy
from policies.rlruh import RLRUH


@dataclass
class MarkingFIFO(Policy):
    """Marking with the earliest admitted unmarked item as victim: a request marks its item; a fault with every
    resident item marked starts a phase (all unmarked).  A marked item is never evicted within its phase, hence at
    most ``k`` faults per phase against at least one of the optimum's (Fiat et al. 1991)."""

    name = "MarkingFIFO"

    def on_reset(self) -> None:
        self._order: dict[int, None] = {}   # admission order
        self._marked: set[int] = set()

    def on_admit(self, t, item, cost):
        self._order[item] = None
        self._marked.add(item)

    def on_hit(self, t, item, cost):
        self._marked.add(item)

    def on_evict(self, t, item):
        self._order.pop(item, None)
        self._marked.discard(item)

    def victim(self, t, protected):
        unmarked = [i for i in self._order if i not in self._marked and i not in protected]
        if not unmarked:
            self._marked.clear()
            unmarked = [i for i in self._order if i not in protected]
        return unmarked[0]


@dataclass
class _Recency(Policy):
    """Recency order shared by the RM flawed variants: ``_order`` holds residents from least to most recently used,
    and ``evictions`` counts the evictions so far."""

    def on_reset(self) -> None:
        self._order: dict[int, None] = {}
        self.evictions = 0

    def on_admit(self, t, item, cost):
        self._order[item] = None

    def on_hit(self, t, item, cost):
        self._order.pop(item)
        self._order[item] = None

    def on_evict(self, t, item):
        self._order.pop(item, None)
        self.evictions += 1

    def _first(self, items, protected):
        return next(i for i in items if i not in protected)

    def least_recent(self, protected):
        return self._first(self._order, protected)

    def most_recent(self, protected):
        return self._first(reversed(self._order), protected)


@dataclass
class LateLIFO(_Recency):
    """LRU for the first ``switch_after`` evictions, then LIFO (the most recently admitted resident goes)."""

    switch_after: int = 5000
    name = "LateLIFO"

    def on_reset(self) -> None:
        super().on_reset()
        self._admitted: dict[int, None] = {}

    def on_admit(self, t, item, cost):
        super().on_admit(t, item, cost)
        self._admitted[item] = None

    def on_evict(self, t, item):
        super().on_evict(t, item)
        self._admitted.pop(item, None)

    def victim(self, t, protected):
        if self.evictions < self.switch_after:
            return self.least_recent(protected)
        return self._first(reversed(self._admitted), protected)


@dataclass
class PeriodicMRU(_Recency):
    """LRU, except that evictions number ``period``, ``2 period``, ... drop the most recently used item."""

    period: int = 5
    name = "PeriodicMRU"

    def victim(self, t, protected):
        if (self.evictions + 1) % self.period == 0:
            return self.most_recent(protected)
        return self.least_recent(protected)


@dataclass
class LateHeavyDrop(RLRUH):
    """NM: R-LRU-H at the fuzzer's default premise (``rho = 0.5, W = 4, tau = 0.25``) for ``switch_after``
    evictions, then the most recently heavy token goes instead of the least recently attended light one."""

    rho: float = 0.5
    tau: float = 0.25
    W: int = 4
    switch_after: int = 2000
    name = "LateHeavyDrop"

    def on_reset(self) -> None:
        super().on_reset()
        self.evictions = 0

    def on_evict(self, t, item):
        super().on_evict(t, item)
        self.evictions += 1

    def victim(self, t, protected):
        if self.evictions < self.switch_after:
            return super().victim(t, protected)
        self._expire(t)
        return next(reversed(self._heavy)) if self._heavy else self._light.min()


@dataclass
class StickyResidue(_Recency):
    """LRU, except that an item whose id is ``residue`` modulo ``modulus`` is never evicted while another resident
    can be: such an item pins one of the ``k`` slots, and cycling over ``k`` other items then faults every time
    against an optimum that faults about once per ``k - 1`` requests -- a ratio above ``k``, on traces whose ids hit
    the residue (the constructions' and the search's small ids, ``0 ... 3k``, never do at ``k <= 3``)."""

    modulus: int = 16
    residue: int = 11
    name = "StickyResidue"

    def victim(self, t, protected):
        free = [i for i in self._order if i % self.modulus != self.residue and i not in protected]
        return free[0] if free else self.least_recent(protected)


@dataclass
class LargeIdMRU(_Recency):
    """LRU on ids below ``threshold``; when the least recently used resident has an id at or above it, the most
    recently used one goes instead (MRU, unbounded ratio) -- a flaw only traces with large ids reach."""

    threshold: int = 10 ** 6
    name = "LargeIdMRU"

    def victim(self, t, protected):
        lru = self.least_recent(protected)
        return self.most_recent(protected) if lru >= self.threshold else lru
