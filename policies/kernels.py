"""Array kernels for unit-size paging with one request per step: LRU, FIFO, LFU, Belady, and LRU's miss-ratio curve.

Each kernel takes ``ids`` (a 1-D ``int64`` array of dense item ids in ``[0, n)``), ``n`` and the capacity ``k`` and
returns the per-step hit flags (``bool``, one per request); misses are ``T - hits.sum()``.  The rules are exactly
those of the registered policies run through :func:`kvcore.engine.run_rm` (the plain reference), and the property
tests in ``tests/test_kernels.py`` check equality request by request:

LRU     evict the resident item whose last request is oldest (Sleator & Tarjan, CACM 1985).
FIFO    evict the resident item admitted earliest; hits change nothing.
LFU     evict the resident item with the fewest requests since it was last admitted (the count restarts at 1 on
        every admission, i.e. in-cache counts reset on eviction); among equal counts, the least recently used.
        Kept in O(1) per request with one recency-ordered list per count: an item enters list ``c`` exactly when it
        is requested, so each list is ordered by last request and its head is the tie-break winner.
Belady  evict the resident item whose next request is farthest in the future, items never requested again first
        (Belady, IBM Systems Journal 1966).  An indexed max-heap over the ``k`` resident items: O(log k) per
        request.  Ties occur only among never-again items, and which of them goes does not change any later hit.

Compiled with numba when it is installed (the optional ``fast`` extra); otherwise the same functions run as plain
Python over numpy arrays: identical results, only slower.  ``interpreted(kernel)`` returns the uncompiled function
so the tests check both paths whenever numba is present.

The all-sizes LRU curve uses Mattson et al.'s stack property (IBM Systems Journal 1970): LRU at capacity ``k`` hits a
request exactly when its stack distance -- the number of distinct other items requested since the previous request
of the same item -- is below ``k``.  Distances come from one pass with a Fenwick tree over "this position is the
latest request of its item" markers: O(T log T) for every capacity at once.
"""

from __future__ import annotations

import numpy as np

try:
    import numba

    COMPILED = True
except ImportError:  # the optional ``fast`` extra is absent: run the same code interpreted
    numba = None
    COMPILED = False


def _kernel(fn):
    return numba.njit(cache=True, nogil=True)(fn) if COMPILED else fn


def interpreted(kernel):
    """The plain-Python function behind ``kernel`` (``kernel`` itself when numba is absent)."""
    return getattr(kernel, "py_func", kernel)


@_kernel
def lru_hits(ids, n, k):
    T = ids.size
    hits = np.zeros(T, np.bool_)
    # Circular doubly linked list with sentinel n: after[n] is the least recently used item, before[n] the most.
    before = np.empty(n + 1, np.int64)
    after = np.empty(n + 1, np.int64)
    resident = np.zeros(n, np.bool_)
    before[n] = n
    after[n] = n
    size = 0
    for t in range(T):
        x = ids[t]
        if resident[x]:
            hits[t] = True
            p = before[x]
            q = after[x]
            after[p] = q
            before[q] = p
        else:
            if size == k:
                v = after[n]
                q = after[v]
                after[n] = q
                before[q] = n
                resident[v] = False
            else:
                size += 1
            resident[x] = True
        last = before[n]
        after[last] = x
        before[x] = last
        after[x] = n
        before[n] = x
    return hits


@_kernel
def fifo_hits(ids, n, k):
    T = ids.size
    hits = np.zeros(T, np.bool_)
    ring = np.empty(k, np.int64)  # admission order; ``head`` is the next slot to overwrite = the oldest once full
    resident = np.zeros(n, np.bool_)
    head = 0
    size = 0
    for t in range(T):
        x = ids[t]
        if resident[x]:
            hits[t] = True
            continue
        if size == k:
            resident[ring[head]] = False
        else:
            size += 1
        ring[head] = x
        resident[x] = True
        head += 1
        if head == k:
            head = 0
    return hits


@_kernel
def lfu_hits(ids, n, k, max_count):
    T = ids.size
    hits = np.zeros(T, np.bool_)
    count = np.zeros(n, np.int64)  # 0 = not resident
    before = np.full(n, -1, np.int64)
    after = np.full(n, -1, np.int64)
    first = np.full(max_count + 2, -1, np.int64)  # per count: least recently requested item with that count
    last = np.full(max_count + 2, -1, np.int64)
    min_count = 0
    size = 0
    for t in range(T):
        x = ids[t]
        c = count[x]
        if c > 0:
            hits[t] = True
            p = before[x]
            q = after[x]
            if p >= 0:
                after[p] = q
            else:
                first[c] = q
            if q >= 0:
                before[q] = p
            else:
                last[c] = p
            if min_count == c and first[c] < 0:
                min_count = c + 1
            c += 1
        else:
            if size == k:
                v = first[min_count]
                q = after[v]
                first[min_count] = q
                if q >= 0:
                    before[q] = -1
                else:
                    last[min_count] = -1
                count[v] = 0
            else:
                size += 1
            c = 1
            min_count = 1
        count[x] = c
        tail = last[c]
        before[x] = tail
        after[x] = -1
        if tail >= 0:
            after[tail] = x
        else:
            first[c] = x
        last[c] = x
    return hits


@_kernel
def next_request(ids, n):
    """``nxt[t]`` = the next step requesting ``ids[t]``, or ``T`` when there is none."""
    T = ids.size
    nxt = np.empty(T, np.int64)
    upcoming = np.full(n, T, np.int64)
    for t in range(T - 1, -1, -1):
        x = ids[t]
        nxt[t] = upcoming[x]
        upcoming[x] = t
    return nxt


@_kernel
def belady_hits(ids, n, k, nxt):
    T = ids.size
    hits = np.zeros(T, np.bool_)
    key = np.empty(k, np.int64)  # max-heap on next-request time
    item = np.empty(k, np.int64)
    slot = np.full(n, -1, np.int64)  # heap position of a resident item, -1 if not resident
    size = 0
    for t in range(T):
        x = ids[t]
        i = slot[x]
        if i >= 0:
            hits[t] = True
        else:
            if size == k:
                # The root goes; the last leaf sifts down from the root.
                slot[item[0]] = -1
                size -= 1
                lk = key[size]
                li = item[size]
                j = 0
                while True:
                    c = 2 * j + 1
                    if c >= size:
                        break
                    if c + 1 < size and key[c + 1] > key[c]:
                        c += 1
                    if key[c] <= lk:
                        break
                    key[j] = key[c]
                    item[j] = item[c]
                    slot[item[j]] = j
                    j = c
                if size > 0:
                    key[j] = lk
                    item[j] = li
                    slot[li] = j
            i = size
            size += 1
        # x's key rises from t (the smallest of all resident keys) to its next request: sift up from slot i.
        nk = nxt[t]
        while i > 0:
            p = (i - 1) // 2
            if key[p] >= nk:
                break
            key[i] = key[p]
            item[i] = item[p]
            slot[item[i]] = i
            i = p
        key[i] = nk
        item[i] = x
        slot[x] = i
    return hits


@_kernel
def lru_stack_distances(ids, n):
    """Per request: the number of distinct other items requested since the previous request of the same item,
    or ``-1`` for a first request.  Fenwick tree over positions; a position holds 1 while it is the latest request
    of its item."""
    T = ids.size
    dist = np.empty(T, np.int64)
    tree = np.zeros(T + 1, np.int64)
    latest = np.full(n, -1, np.int64)
    for t in range(T):
        x = ids[t]
        p = latest[x]
        if p >= 0:
            # markers strictly between p and t = prefix(t) - prefix(p + 1)   (prefix(m) = positions < m)
            s = 0
            j = t
            while j > 0:
                s += tree[j]
                j -= j & -j
            j = p + 1
            while j > 0:
                s -= tree[j]
                j -= j & -j
            dist[t] = s
            j = p + 1
            while j <= T:
                tree[j] -= 1
                j += j & -j
        else:
            dist[t] = -1
        j = t + 1
        while j <= T:
            tree[j] += 1
            j += j & -j
        latest[x] = t
    return dist


def miss_curve_from_distances(dist: np.ndarray) -> np.ndarray:
    """``curve[c - 1]`` = LRU misses at capacity ``c`` for ``c = 1..n``, ``n`` = distinct items = first requests:
    the ``n`` first requests plus the requests whose distance is ``>= c`` (a distance is at most ``n - 1``)."""
    n = int(np.count_nonzero(dist < 0))
    hist = np.bincount(dist[dist >= 0], minlength=n)
    at_least = np.cumsum(hist[::-1])[::-1]  # at_least[d] = #{distance >= d}
    return (n + np.append(at_least[1:], 0)[:n]).astype(np.int64)
