"""Run libCacheSim (the ``libcachesim`` PyPI package, optional ``bench`` extra) on our unit-size traces.

Each trace is written once as an oracleGeneral binary file -- packed little-endian records ``(uint32 time,
uint64 id, uint32 size, int64 next access)`` -- because libCacheSim's Belady reads every request's next access
time from the trace: given a trace without them its Belady answer is wrong.  Sizes are 1 and the cache size is
``k``, so byte capacity = object capacity.  The next access field is the index of the next request of the same id,
``-1`` when there is none (libCacheSim maps ``-1`` to "never").

libCacheSim's LFU keeps in-cache counts (an object is inserted with frequency 1 and its count is dropped on
eviction) and evicts the oldest entry of the lowest frequency's list; an object joins a frequency's list when it
is requested, so "oldest in the list" is "least recently used among the least frequent" -- the same rule as our
LFU.  Miss counts are recovered from the object miss ratio it returns (exact: the ratio times ``T`` is within
``1e-6`` of an integer, checked).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from kvcore import kernels

ORACLE_GENERAL = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
CLASS_NAMES = {"lru": "LRU", "fifo": "FIFO", "lfu": "LFU", "belady": "Belady"}


def write_oracle_general(items: np.ndarray, path: str | Path, next_access: bool = True) -> Path:
    """Write the unit-size request stream ``items`` as an oracleGeneral binary trace with next-access times, or with
    ``next_access=False`` with every next-access field "unknown" (-1), for libCacheSim's converter to fill in."""
    rec = np.empty(items.size, dtype=ORACLE_GENERAL)
    rec["time"] = np.arange(items.size, dtype=np.uint32)
    rec["id"] = items.astype(np.uint64)
    rec["size"] = 1
    if next_access:
        ids, n = kernels.dense_ids(items)
        nxt = kernels.next_requests(ids, n)
        rec["next"] = np.where(nxt == items.size, -1, nxt)
    else:
        rec["next"] = -1
    path = Path(path)
    rec.tofile(path)
    return path


def misses(name: str, path: str | Path, n_requests: int, capacity: int) -> tuple[int, float]:
    """libCacheSim's miss count and wall seconds for policy ``name`` (lru/fifo/lfu/belady) at its default
    settings, processing the whole oracleGeneral trace in C."""
    import libcachesim

    reader = libcachesim.TraceReader(str(path), libcachesim.TraceType.ORACLE_GENERAL_TRACE)
    cache = getattr(libcachesim, CLASS_NAMES[name.lower()])(capacity)
    start = time.perf_counter()
    miss_ratio, _ = cache.process_trace(reader)
    seconds = time.perf_counter() - start
    count = miss_ratio * n_requests
    if abs(count - round(count)) > 1e-6:
        raise RuntimeError(f"libCacheSim {name}: miss ratio {miss_ratio!r} x {n_requests} is not an integer")
    return int(round(count)), seconds
