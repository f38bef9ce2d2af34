"""Seeded synthetic workloads for the benchmarks: Zipf request streams and sparse attention traces."""

from __future__ import annotations

import numpy as np

from kvcore.traces import AttentionTrace, PagingTrace


def zipf_items(n_requests: int, n_objects: int, alpha: float = 1.0, seed: int = 0) -> np.ndarray:
    """``n_requests`` ids in ``[0, n_objects)`` drawn i.i.d. with ``P(i) proportional to (i + 1)^-alpha``
    (inverse-CDF sampling, the same law as libCacheSim's synthetic Zipf reader)."""
    weights = np.arange(1, n_objects + 1, dtype=np.float64) ** -alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    u = np.random.default_rng(seed).random(n_requests)
    return np.minimum(np.searchsorted(cdf, u), n_objects - 1).astype(np.int64)


def weighted_zipf_trace(n_requests: int, n_objects: int, seed: int = 0, max_cost: int = 8) -> PagingTrace:
    """One request per step (Zipf(1.0) ids) with integer fault costs uniform in ``1..max_cost``: a trace where
    Belady is not optimal and the RM flow is needed."""
    items = zipf_items(n_requests, n_objects, 1.0, seed)
    costs = np.random.default_rng(seed + 1).integers(1, max_cost + 1, n_requests).astype(np.float64)
    return PagingTrace(items, costs, np.arange(n_requests + 1, dtype=np.int64), source=f"zipf-weighted-{n_requests}")


def attention_trace(steps: int, nnz: int = 32, seed: int = 0) -> AttentionTrace:
    """Row ``t`` attends to ``min(t + 1, nnz)`` tokens: token 0 (a sink), the window ``t-8..t``, and the rest drawn
    uniformly without replacement from the older tokens ``1..t-9``; weights are exponential draws normalized to 1."""
    rng = np.random.default_rng(seed)
    indptr = np.zeros(steps + 1, dtype=np.int64)
    indices, weights = [], []
    for t in range(steps):
        fixed = np.union1d([0], np.arange(max(0, t - 8), t + 1))
        extra = min(t + 1, nnz) - fixed.size
        older = rng.choice(t - 9, size=extra, replace=False) + 1 if extra > 0 else np.empty(0, dtype=np.int64)
        row = np.sort(np.concatenate([fixed, older]).astype(np.int64))
        w = rng.exponential(size=row.size)
        indices.append(row)
        weights.append(w / w.sum())
        indptr[t + 1] = indptr[t] + row.size
    return AttentionTrace(indptr, np.concatenate(indices), np.concatenate(weights), source=f"synthetic-nm-{steps}")
