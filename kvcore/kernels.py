"""Array kernels for unit-cost paging with one request per step: LRU, FIFO, LFU, Belady, LRU's miss-ratio curve.

Each simulation kernel takes ``ids`` (a 1-D integer array of dense item ids in ``[0, n)``), ``n``, the capacity
``k`` and an output array ``hits``; it returns the number of misses and, when ``hits`` has one slot per request,
writes the per-request hit flags into it (pass an empty array to skip them: a long trace then needs no O(T) output).
The rules are exactly those of the registered policies run through the checked engine (:func:`kvcore.engine.run_rm`
with ``kernel=False``, the plain reference); ``tests/test_kernels.py`` checks equality request by request:

LRU     evict the resident item whose last request is oldest (Sleator & Tarjan, CACM 1985).
FIFO    evict the resident item admitted earliest; hits change nothing.
LFU     evict the resident item with the fewest requests since it was last admitted (the count restarts at 1 on
        every admission, i.e. in-cache counts reset on eviction); among equal counts, the least recently used.
        Kept in O(1) per request with one recency-ordered list per count: an item enters list ``c`` exactly when it
        is requested, so each list is ordered by last request and its head is the tie-break winner.
Belady  evict the resident item whose next request is farthest in the future, items never requested again first
        (Belady, IBM Systems Journal 1966).  A next-access pre-pass (one backward sweep) and an indexed max-heap over
        the ``k`` resident items: O(log k) per request.  Ties occur only among never-again items, and which of them
        goes changes no later hit, so the miss count equals :func:`kvcore.optima.belady`'s reference loop.

The all-sizes LRU curve uses Mattson et al.'s stack property (IBM Systems Journal 1970): LRU at capacity ``k`` hits a
request exactly when its stack distance -- the number of distinct other items requested since the previous request
of the same item -- is below ``k``.  Distances come from one pass with a Fenwick tree over "this position is the
latest request of its item" markers: O(T log T) for every capacity at once.

Compilation.  numba (a base dependency) compiles each kernel on its first call, not at import -- ``import kvcore``
stays cheap for commands that never simulate -- with ``cache=True``, so a second process loads the machine code from
``__pycache__`` instead of compiling again.  Without numba (or with ``NUMBA_DISABLE_JIT=1``) the same functions run
as plain Python over numpy arrays: identical results, only slower.  ``kernel.py_func`` is always the plain function,
so the tests check both paths.

Which policies run here.  kvcore imports nothing from the policy package, so the policy side registers its kernel
classes with :func:`register_policy` (``policies/kernels.py``).  :func:`kernel_for` accepts a policy only when its
type is *exactly* a registered class (a subclass may override any hook), none of the class's interface methods or
hooks has been replaced since registration, the instance shadows none of them, and the registered predicate accepts
its parameters.  Everything else runs through the checked engine.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable

import numpy as np

# Methods whose behaviour the kernels reproduce: if any of them is not the one registered, the policy is not the
# registered rule any more and must run through the engine.
_BEHAVIOUR = ("reset", "admit", "hit", "evict", "observe", "victims", "victim", "drop", "on_reset", "on_admit",
              "on_hit", "on_evict", "on_observe")


class Kernel:
    """A kernel function compiled by numba on its first call (see module docstring); ``py_func`` is the plain one."""

    def __init__(self, fn: Callable):
        self.py_func = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self._compiled: Callable | None = None

    def __call__(self, *args):
        fn = self._compiled
        if fn is None:
            fn = self._compiled = _compile(self.py_func)
        return fn(*args)


def compiled() -> bool:
    """True when the kernels run compiled: numba is installed and ``NUMBA_DISABLE_JIT`` is not set."""
    return importlib.util.find_spec("numba") is not None and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")


# Plain helpers the kernels call (see :func:`_inlined`); numba learns them on the first compilation.
_HELPERS: list[Callable] = []


def _compile(fn: Callable) -> Callable:
    if not compiled():
        return fn
    import numba
    from numba.extending import register_jitable

    while _HELPERS:
        register_jitable(inline="always")(_HELPERS.pop())
    return numba.njit(cache=True, nogil=True)(fn)


def _inlined(fn: Callable) -> Callable:
    """A helper for the kernels that stays a plain function: run as plain Python by the plain kernels, and inlined
    into the compiled ones (``numba.extending.register_jitable``, applied on the first compilation so that importing
    this module does not import numba)."""
    _HELPERS.append(fn)
    return fn


NO_HITS = np.zeros(0, np.bool_)


# --------------------------------------------------------------------------------------------------------------------
# Simulation kernels
# --------------------------------------------------------------------------------------------------------------------


@_inlined
def list_unlink(before, after, x):
    """Take node ``x`` out of its circular doubly linked list (``before``/``after``: each node's neighbours).  Shared
    with :mod:`kvcore.block_kernel`."""
    p = before[x]
    q = after[x]
    after[p] = q
    before[q] = p


@_inlined
def list_append(before, after, sentinel, x):
    """Insert node ``x`` at the tail of the circular list of ``sentinel`` (just before it)."""
    tail = before[sentinel]
    after[tail] = x
    before[x] = tail
    after[x] = sentinel
    before[sentinel] = x


@Kernel
def lru(ids, n, k, hits):
    T = ids.size
    record = hits.size == T
    # Circular doubly linked list with sentinel n: after[n] is the least recently used item, before[n] the most.
    before = np.empty(n + 1, np.int64)
    after = np.empty(n + 1, np.int64)
    resident = np.zeros(n, np.bool_)
    before[n] = n
    after[n] = n
    size = 0
    misses = 0
    for t in range(T):
        x = ids[t]
        if resident[x]:
            if record:
                hits[t] = True
            list_unlink(before, after, x)
        else:
            misses += 1
            if record:
                hits[t] = False
            if size == k:
                v = after[n]
                list_unlink(before, after, v)
                resident[v] = False
            else:
                size += 1
            resident[x] = True
        list_append(before, after, n, x)
    return misses


@Kernel
def fifo(ids, n, k, hits):
    T = ids.size
    record = hits.size == T
    ring = np.empty(k, np.int64)  # admission order; ``head`` is the next slot to overwrite = the oldest once full
    resident = np.zeros(n, np.bool_)
    head = 0
    size = 0
    misses = 0
    for t in range(T):
        x = ids[t]
        if resident[x]:
            if record:
                hits[t] = True
            continue
        misses += 1
        if record:
            hits[t] = False
        if size == k:
            resident[ring[head]] = False
        else:
            size += 1
        ring[head] = x
        resident[x] = True
        head += 1
        if head == k:
            head = 0
    return misses


@Kernel
def lfu(ids, n, k, max_count, hits):
    T = ids.size
    record = hits.size == T
    count = np.zeros(n, np.int64)  # 0 = not resident
    # One circular list per count c with sentinel n + c: after[n + c] is the least recently requested item with
    # count c, and the list is empty when that is the sentinel itself.
    before = np.arange(n + max_count + 2, dtype=np.int64)
    after = before.copy()
    min_count = 0
    size = 0
    misses = 0
    for t in range(T):
        x = ids[t]
        c = count[x]
        if c > 0:
            if record:
                hits[t] = True
            list_unlink(before, after, x)
            if min_count == c and after[n + c] == n + c:
                min_count = c + 1
            c += 1
        else:
            misses += 1
            if record:
                hits[t] = False
            if size == k:
                v = after[n + min_count]
                list_unlink(before, after, v)
                count[v] = 0
            else:
                size += 1
            c = 1
            min_count = 1
        count[x] = c
        list_append(before, after, n + c, x)
    return misses


@Kernel
def next_request(ids, n, nxt):
    """Fill ``nxt[t]`` with the next step requesting ``ids[t]``, or ``T`` when there is none (one backward sweep)."""
    T = ids.size
    upcoming = np.full(n, T, np.int64)
    for t in range(T - 1, -1, -1):
        x = ids[t]
        nxt[t] = upcoming[x]
        upcoming[x] = t
    return nxt


@Kernel
def belady(ids, n, k, nxt, hits):
    T = ids.size
    record = hits.size == T
    key = np.empty(k, np.int64)  # max-heap on next-request time
    item = np.empty(k, np.int64)
    slot = np.full(n, -1, np.int64)  # heap position of a resident item, -1 if not resident
    size = 0
    misses = 0
    for t in range(T):
        x = ids[t]
        i = slot[x]
        if i >= 0:
            if record:
                hits[t] = True
        else:
            misses += 1
            if record:
                hits[t] = False
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
        nk = np.int64(nxt[t])
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
    return misses


@Kernel
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


@Kernel
def renumber(items, out):
    """Write into ``out`` the index of each item's first appearance among the distinct items (0, 1, 2, ... in order
    of first request) and return the number of distinct items.  Open addressing with linear probing, the table
    doubled at half load, so it stays O(distinct) in memory and O(1) expected per request.  The hash mixes the id
    modulo the Mersenne prime 2^31 - 1 (no intermediate exceeds 2^47, so the plain-Python path cannot overflow)."""
    T = items.size
    size = 1024
    keys = np.full(size, -1, np.int64)
    vals = np.empty(size, np.int64)
    n = 0
    for t in range(T):
        x = np.int64(items[t])
        mask = size - 1
        h = ((x % 2147483647) * 48271 % 2147483647) & mask
        while keys[h] != -1 and keys[h] != x:
            h = (h + 1) & mask
        if keys[h] == x:
            out[t] = vals[h]
            continue
        keys[h] = x
        vals[h] = n
        out[t] = n
        n += 1
        if 2 * n > size:
            old_keys = keys
            old_vals = vals
            size *= 2
            mask = size - 1
            keys = np.full(size, -1, np.int64)
            vals = np.empty(size, np.int64)
            for j in range(old_keys.size):
                y = old_keys[j]
                if y != -1:
                    g = ((y % 2147483647) * 48271 % 2147483647) & mask
                    while keys[g] != -1:
                        g = (g + 1) & mask
                    keys[g] = y
                    vals[g] = old_vals[j]
    return n


# --------------------------------------------------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------------------------------------------------

NAMES = ("lru", "fifo", "lfu", "belady")


def _pick(kernel: Kernel, compiled: bool) -> Callable:
    return kernel if compiled else kernel.py_func


def dense_ids(items: np.ndarray, compiled: bool = True) -> tuple[np.ndarray, int]:
    """Item ids mapped into ``[0, n)``: ``(ids, n)``.  Non-negative int64 ids that are already compact
    (``max + 1 <= 2 * len``) are used as they are, without a copy (a memory-mapped trace stays mapped), so the
    kernels' per-item arrays stay O(T); other ids are renumbered in order of first request (:func:`renumber`)."""
    items = np.asarray(items)
    if items.size == 0:
        return np.zeros(0, np.int64), 0
    top = int(items.max()) + 1
    if top <= 2 * items.size:
        return np.ascontiguousarray(items, dtype=np.int64), top
    ids = np.empty(items.size, np.int64)
    n = _pick(renumber, compiled)(np.ascontiguousarray(items), ids)
    return ids, int(n)


def next_requests(ids: np.ndarray, n: int, compiled: bool = True) -> np.ndarray:
    """``nxt[t]`` = the next step requesting ``ids[t]`` (``T`` = never), as int32 when ``T`` fits (half the memory
    of the pre-pass on a long trace), else int64."""
    T = ids.size
    nxt = np.empty(T, np.int32 if T < np.iinfo(np.int32).max else np.int64)
    return _pick(next_request, compiled)(ids, n, nxt)


def simulate(name: str, items: np.ndarray, capacity: int, record_hits: bool = False,
             compiled: bool = True) -> tuple[int, np.ndarray | None]:
    """``(misses, hits)`` of kernel ``name`` (one of :data:`NAMES`) on the request stream ``items`` (non-negative
    integer ids, one unit-cost request per step) with ``capacity`` slots; ``hits`` (a bool per request) only when
    ``record_hits``.  ``compiled=False`` runs the plain-Python form of every kernel involved."""
    if name not in NAMES:
        raise ValueError(f"kernel {name!r}: must be one of {NAMES}")
    ids, n = dense_ids(items, compiled)
    hits = np.empty(ids.size, np.bool_) if record_hits else NO_HITS
    k = int(capacity)
    if name == "lru":
        misses = _pick(lru, compiled)(ids, n, k, hits)
    elif name == "fifo":
        misses = _pick(fifo, compiled)(ids, n, k, hits)
    elif name == "lfu":
        max_count = int(np.bincount(ids, minlength=1).max()) if ids.size else 0
        misses = _pick(lfu, compiled)(ids, n, k, max_count, hits)
    else:
        misses = _pick(belady, compiled)(ids, n, k, next_requests(ids, n, compiled), hits)
    return int(misses), (hits if record_hits else None)


def miss_curve_from_distances(dist: np.ndarray) -> np.ndarray:
    """``curve[c - 1]`` = LRU misses at capacity ``c`` for ``c = 1..n``, ``n`` = distinct items = first requests:
    the ``n`` first requests plus the requests whose distance is ``>= c`` (a distance is at most ``n - 1``)."""
    n = int(np.count_nonzero(dist < 0))
    hist = np.bincount(dist[dist >= 0], minlength=n)
    at_least = np.cumsum(hist[::-1])[::-1]  # at_least[d] = #{distance >= d}
    return (n + np.append(at_least[1:], 0)[:n]).astype(np.int64)


def lru_miss_curve(items: np.ndarray, compiled: bool = True) -> np.ndarray:
    """``curve[c - 1]`` = LRU misses at capacity ``c`` for every ``c = 1..n`` (``n`` distinct items), one pass."""
    ids, n = dense_ids(items, compiled)
    return miss_curve_from_distances(_pick(lru_stack_distances, compiled)(ids, n))


# --------------------------------------------------------------------------------------------------------------------
# Which policies the kernels stand for
# --------------------------------------------------------------------------------------------------------------------

_POLICY_KERNELS: dict[type, tuple[str, Callable[[Any], bool], dict[str, Any]]] = {}


def behaviour_of(cls: type) -> dict[str, Any]:
    """The interface methods and hooks of ``cls`` (the ones a kernel reproduces), as they are now."""
    return {m: getattr(cls, m, None) for m in _BEHAVIOUR}


def unaltered_entry(registry: dict[type, tuple], policy: Any) -> tuple | None:
    """``registry[type(policy)]`` (entries end with the class's :func:`behaviour_of` at registration) when the type
    of ``policy`` is exactly a registered class, no method of the class was replaced since and the instance shadows
    none of them; else None.  Shared by the kernels of this module and :mod:`kvcore.closed_loop`."""
    entry = registry.get(type(policy))
    if entry is None:
        return None
    behaviour = entry[-1]
    if behaviour_of(type(policy)) != behaviour:
        return None  # a method of the class was replaced after registration
    if getattr(policy, "__dict__", {}).keys() & behaviour.keys():
        return None
    return entry


def register_policy(cls: type, kernel: str, accepts: Callable[[Any], bool] | None = None) -> None:
    """Declare that instances of exactly ``cls`` behave as kernel ``kernel`` in RM on unit-cost single-request
    traces whenever ``accepts(instance)`` is true (default: always; a parameter that changes the rule must make it
    false).  Called by the policy package for its built-in rules."""
    if kernel not in NAMES:
        raise ValueError(f"kernel {kernel!r}: must be one of {NAMES}")
    _POLICY_KERNELS[cls] = (kernel, accepts or (lambda policy: True), behaviour_of(cls))


def kernel_for(policy: Any) -> str | None:
    """The kernel that reproduces ``policy`` exactly, or None (see module docstring for the conditions)."""
    entry = unaltered_entry(_POLICY_KERNELS, policy)
    if entry is None or not entry[1](policy):
        return None
    return entry[0]
