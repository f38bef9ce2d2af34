"""Belady's furthest-in-future rule: the exact optimum of unit-cost paging with one request per step.

Rule (Belady, IBM Systems Journal 1966; optimality by an exchange argument, e.g. Borodin & El-Yaniv, *Online
Computation and Competitive Analysis*, CUP 1998, ch. 3): on a fault with a full cache, evict the resident item whose
next request is furthest in the future (never requested again counts as infinitely far).  Both start empty and cold
misses count, as in the engine (SPEC section 2); the cost is the number of faults.  Ties between items that are
never requested again are broken toward the smaller item id (any choice is optimal).

``O(T log h)``.  Without ``record`` the count comes from the compiled kernel :func:`kvcore.kernels.belady` (a
next-access pre-pass, then an indexed max-heap over the ``h`` resident items).  With ``record`` this module's own
loop runs, which also lists the evictions: the next-use index of every request is computed once (vectorized);
resident items sit in a heap keyed by next use.  A hit changes an item's key, which pushes a fresh entry; stale
entries are recognised (their key differs from the item's current next use) and dropped when they reach the top, and
the heap is rebuilt from the live entries when it grows past ``2h`` entries, so it never holds more than ``O(h)``
entries.  The two are independent implementations, property-tested equal (``tests/test_kernels.py``).
"""

from __future__ import annotations

import heapq

import numpy as np

from .. import kernels
from ..engine import check_capacity
from ..errors import ParameterError
from ..traces import PagingTrace, require_trace
from .result import OptResult


def belady(trace: PagingTrace, capacity: int, record: bool = False) -> OptResult:
    """Fault count of Belady's rule on a unit-cost, one-request-per-step trace with ``capacity`` slots;
    ``record=True`` also returns the evictions."""
    require_trace(trace, "trace", (PagingTrace,))
    h = check_capacity(capacity)
    if not trace.is_unit_single:
        raise ParameterError(f"{trace.source}: Belady needs unit costs and one request per step; use rm_opt")
    if not record:
        misses, _ = kernels.simulate("belady", trace.items, h)
        return OptResult(float(misses), misses, h, "rm", None, "belady", 0.0, certified=True)
    T = trace.T
    ids, seq = np.unique(trace.items, return_inverse=True)
    order = np.lexsort((np.arange(T), seq))
    next_use = np.full(T, T, dtype=np.int64)  # T stands for "never again"
    same = seq[order[1:]] == seq[order[:-1]]
    next_use[order[:-1][same]] = order[1:][same]
    key = np.full(ids.size, -1, dtype=np.int64)  # current next use of each resident item, -1 if not resident
    heap: list[tuple[int, int]] = []  # (-next use, item): the top is the furthest-in-future resident item
    resident = 0
    misses = 0
    evictions: list[tuple[int, int]] = []
    for t, (p, nu) in enumerate(zip(seq.tolist(), next_use.tolist())):
        if key[p] < 0:
            misses += 1
            if resident == h:
                while True:
                    neg, q = heapq.heappop(heap)
                    if key[q] == -neg:
                        break
                key[q] = -1
                evictions.append((t, int(ids[q])))
            else:
                resident += 1
        key[p] = nu
        heapq.heappush(heap, (-nu, p))
        if len(heap) > 2 * h + 16:
            heap = [(neg, q) for neg, q in heap if key[q] == -neg]
            heapq.heapify(heap)
    return OptResult(float(misses), misses, h, "rm", evictions, "belady", 0.0, certified=True)
