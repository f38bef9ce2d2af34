"""OnlineMin: an H_k-competitive randomized paging algorithm (the optimal ratio of Eq. 9)."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from itertools import compress, count
from operator import lt

from .base import Policy
from .registry import register


@register
@dataclass
class OnlineMin(Policy):
    """Keep the lowest-priority cache the offline optimum could hold; on a fault evict the highest priority allowed.

    Rule (Brodal, Moruz & Negoescu, WAOA 2011, LNCS 7164, and Theory Comput. Syst. 56, 2015; stated in our words).

    *Layers.*  After a request sequence, the configurations (sets of k pages) in which the offline optimum can be
    at minimal cost are described by the layer partition of Koutsoupias & Papadimitriou (FOCS 1994): disjoint sets
    ``L_0, L_1, ..., L_k``, where a set C of k pages is such a configuration iff ``|C ∩ (L_0 ∪ ... ∪ L_j)| <= j``
    for every j.  A request to p moves p into a new last layer ``{p}``; if p was in ``L_i`` (i > 0), ``L_{i-1}``
    and ``L_i \\ {p}`` merge (for i = 1 into ``L_0``, the pages no optimal configuration holds); if p was in
    ``L_0``, ``L_{k-1}`` and ``L_k`` merge.  The optimum's cost grows by one exactly on requests to ``L_0``.
    Every layer is a run of consecutive pages in recency order, so it is stored as k cut points on the request
    clock: a page's layer is the number of cuts at or below its last request time.

    *Selection.*  Every request gives the requested page a fresh uniform priority.  The cache is at all times the
    configuration of least total priority among those above (greedy in increasing priority; a matroid basis).  This
    cache changes by one page on a fault and not at all on a hit, and its distribution is that of Equitable
    (Achlioptas, Chrobak & Noga, Theoret. Comput. Sci. 234, 2000), which is ``H_k``-competitive against an
    oblivious adversary (Brodal et al.'s theorem; the tests check the bound exactly on every short sequence).
    Re-drawing a priority at each request or drawing it once per page gives the same cache law at every step (the
    cache is a function of the layers and of i.i.d. priorities), hence the same expected cost; re-drawing only on
    faults does not (a page that stays cached keeps a priority biased low) and breaks the bound.

    *Replacement rule* (what the selection implies; derived and checked against the greedy selection for every
    priority order by ``tests/test_hk_policy.py``).  Order the cached pages by last request time,
    ``x_1`` oldest.  The prefix ``x_1..x_j`` is tight when it fills the j oldest layers (``x_j`` lies in
    ``L_1 ∪ ... ∪ L_j``).  On a fault on p in layer i (take i = k when p is in ``L_0``), let t be the first tight
    prefix length ``>= i``; evict the page of highest priority among ``x_1..x_t``.  A hit evicts nothing.

    Empty start: k phantom pages, never requested, fill the first k layers and hold priority +inf, so each fault
    takes a phantom while one is left (a free slot) -- the offset function of an empty cache with cold misses.
    Several requests in one step are served one after another, hits first, and a victim is never an item of the
    step (no published rule covers simultaneous requests; the ``H_k`` bound is for one request per step).

    Cost per request: a hit costs ``O(log k)`` (bisections) plus list moves of ``O(k)`` pointers; a fault on a page
    in ``L_0`` (one the optimum pays too) takes the whole-cache maximum from a lazily cleaned heap, ``O(log k)``
    amortized; a fault on a page still in a layer scans the allowed prefix, ``O(k)`` in C-level list operations.
    Memory: ``O(k)`` plus the last request time of every page still in a layer above ``L_0``.  Model: RM, unit
    costs.
    """

    name = "OnlineMin"
    signal = "recency"
    deterministic = False
    models = frozenset({"rm"})
    citation = ("Brodal, Moruz & Negoescu, OnlineMin: a fast strongly competitive randomized paging algorithm, "
                "WAOA 2011 (LNCS 7164) and Theory Comput. Syst. 56, 2015")
    guarantee = "H_k"
    weighted = False

    def on_reset(self) -> None:
        k = self.k
        self._clock = 0
        # cut j-1 is the earliest request time of layer j; phantom j was "requested" at time j-k-1, so sits in L_j
        self._cuts = list(range(-k, 0))
        # the cached pages, oldest last request first: request time, item (None for a phantom), priority
        self._times = list(range(-k, 0))
        self._items: list[int | None] = [None] * k
        self._priority = [math.inf] * k
        # max-heap of (-priority, request time, item) over the cached pages, with stale entries (a page requested
        # again or evicted since) dropped when they reach the top: the whole-cache maximum in O(log k)
        self._heap = [(-math.inf, when, None) for when in self._times]
        self._last: OrderedDict[int, int] = OrderedDict()  # page -> last request time, oldest first
        self._served: set[int] = set()  # misses of this step already served while choosing victims

    def on_hit(self, t, item, cost):
        self._serve(item, frozenset())

    def victims(self, t, need, protected):
        chosen = []
        for item in sorted(protected - self.resident):
            victim = self._serve(item, protected)
            self._served.add(item)
            if victim is not None:
                self.drop(t, victim)
                chosen.append(victim)
        return chosen

    def on_admit(self, t, item, cost):
        if item in self._served:
            self._served.discard(item)
            return
        # the engine admits without asking for victims only while a slot is free, i.e. a phantom is cached
        victim = self._serve(item, frozenset((item,)))
        if victim is not None:
            raise RuntimeError(f"OnlineMin: step {t}: item {item} was admitted into a free slot but the rule "
                               f"evicted {victim}")

    def _serve(self, item: int, protected: frozenset) -> int | None:
        """Apply one request: evict on a fault (return the evicted real item, None for a phantom or a hit), then
        update the layers and give ``item`` a fresh priority."""
        k, cuts, times, items, priority = self.k, self._cuts, self._times, self._items, self._priority
        last = self._last.get(item)
        layer = 0 if last is None else bisect_right(cuts, last)
        pos = -1 if last is None else bisect_left(times, last)
        evicted = None
        if 0 <= pos < k and times[pos] == last:  # hit
            del times[pos], items[pos], priority[pos]
        else:
            start = layer or k
            tight = next(compress(count(start), map(lt, times[start - 1:k - 1], cuts[start:])), k)
            pos = self._highest(tight, protected)
            evicted = items[pos]
            del times[pos], items[pos], priority[pos]
        self._clock += 1
        now = self._clock
        del cuts[(layer or k) - 1]
        cuts.append(now)
        times.append(now)
        items.append(item)
        fresh = float(self.rng.random())
        priority.append(fresh)
        heap = self._heap
        heappush(heap, (-fresh, now, item))
        if len(heap) > 2 * k + 16:
            heap[:] = [(-pr, when, who) for pr, when, who in zip(priority, times, items)]
            heapify(heap)
        self._last[item] = now
        self._last.move_to_end(item)
        # pages that fell into L_0 behave exactly like pages never requested: forget them
        while self._last:
            page, when = next(iter(self._last.items()))
            if when >= cuts[0]:
                break
            del self._last[page]
        return evicted

    def _highest(self, prefix: int, protected: frozenset) -> int:
        """Position of the highest-priority cached page among the ``prefix`` oldest, skipping this step's items
        (only possible when a step requests several items; then the whole cache is searched if the prefix is
        all protected)."""
        priority, times = self._priority, self._times
        if len(protected) <= 1:  # one request per step: the faulting item is not cached, nothing to skip
            if prefix < len(times):
                return priority.index(max(priority[:prefix]), 0, prefix)
            heap = self._heap
            while True:
                when = heap[0][1]
                pos = bisect_left(times, when)
                if pos < len(times) and times[pos] == when:
                    return pos
                heappop(heap)
        items = self._items
        allowed = [p for p in range(prefix) if items[p] not in protected]
        if not allowed:
            allowed = [p for p in range(len(items)) if items[p] not in protected]
        return max(allowed, key=priority.__getitem__)
