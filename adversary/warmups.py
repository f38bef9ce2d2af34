"""Warm-up prefixes put before an adversarial suffix, and the concatenation of a prefix with a trace.

A competitive ratio is a property of arbitrarily long inputs, and many real rules change behaviour once statistics
accumulate (a mode switch after a number of evictions, a learned score, a decayed counter).  A construction run on
an empty cache never reaches that state; run after a warm-up it does.  The prefixes here are deliberately plain:

``benign``  a working set of ``k`` items that slides by one item every ``k`` requests: few faults, and every
            fault is one eviction (a rule's "good times");
``random``  uniform requests over ``2k`` items: many faults, and counts spread over many items;
``cyclic``  another construction -- the cyclic sequence over ``k + 1`` items, which makes every request an eviction
            for LRU and FIFO.

NM prefixes are rows of attention, ``random`` (sparse random rows) or ``benign`` (each row on the last few tokens);
an NM suffix is shifted past the prefix's tokens by :func:`concat_attention`.  Every prefix takes a seed.
"""

from __future__ import annotations

import numpy as np

from kvcore.engine import make_rng
from kvcore.numbers import integer
from kvcore.traces import AttentionTrace, PagingTrace

RM_WARMUPS = ("benign", "random", "cyclic")
NM_WARMUPS = ("benign", "random")


def rm_warmup(kind: str, k: int, T: int, seed: int | np.random.Generator | None = 0) -> PagingTrace:
    """A unit-cost warm-up of ``T`` requests for cache ``k`` (module docstring: ``kind`` one of :data:`RM_WARMUPS`)."""
    k, T = integer(k, "k", 1), integer(T, "T", 0)
    t = np.arange(T, dtype=np.int64)
    if kind == "benign":
        items = t // k + (t % k)             # window [j, j + k) for the j-th block of k requests
    elif kind == "random":
        items = make_rng(seed).integers(0, 2 * k, size=T, dtype=np.int64)
    elif kind == "cyclic":
        items = t % (k + 1)
    else:
        raise ValueError(f"warm-up kind {kind!r}: expected one of {RM_WARMUPS}")
    return PagingTrace.unit(items, f"{kind} warm-up (k={k}, T={T})")


def concat_paging(prefix: PagingTrace, trace: PagingTrace) -> PagingTrace:
    """The unit-cost trace ``prefix`` followed by ``trace`` (item ids kept: the prefix's state carries over)."""
    return PagingTrace.unit(np.concatenate([prefix.items, trace.items]), f"{prefix.source} + {trace.source}")


def nm_warmup(kind: str, T: int, seed: int | np.random.Generator | None = 0, support: int = 4) -> AttentionTrace:
    """``T`` rows of attention: ``random`` puts Dirichlet mass on up to ``support`` random earlier tokens (and the
    arriving one); ``benign`` spreads each row evenly over the last ``support`` tokens."""
    T, support = integer(T, "T", 0), integer(support, "support", 1)
    rng = make_rng(seed)
    indptr, indices, weights = [0], [], []
    for t in range(T):
        if kind == "benign":
            idx = np.arange(max(0, t - support + 1), t + 1)
            w = np.full(idx.size, 1.0 / idx.size)
        elif kind == "random":
            idx = np.unique(np.append(rng.integers(0, t + 1, size=min(support, t + 1) - 1), t))
            w = rng.dirichlet(np.ones(idx.size))
        else:
            raise ValueError(f"warm-up kind {kind!r}: expected one of {NM_WARMUPS}")
        indices.append(idx)
        weights.append(w / w.sum())
        indptr.append(indptr[-1] + idx.size)
    return AttentionTrace(np.array(indptr, dtype=np.int64), np.concatenate(indices).astype(np.int64),
                          np.concatenate(weights), None, f"{kind} attention warm-up (T={T})")


def concat_attention(prefix: AttentionTrace, trace: AttentionTrace) -> AttentionTrace:
    """``prefix``'s rows, then ``trace``'s with every token id shifted by ``prefix.T`` (its tokens arrive after the
    prefix's); residual masses are kept."""
    indptr = np.concatenate([prefix.indptr, prefix.indptr[-1] + trace.indptr[1:]])
    indices = np.concatenate([prefix.indices, trace.indices + prefix.T])
    weights = np.concatenate([prefix.weights, trace.weights])
    residual = np.concatenate([prefix.residual, trace.residual])
    return AttentionTrace(indptr, indices, weights, residual, f"{prefix.source} + {trace.source}")
