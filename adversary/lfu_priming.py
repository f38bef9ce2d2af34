"""LFU priming: early-heavy items pin a frequency rule while two late items alternate (SPEC section 5; paper
Section 2.2 and Section 5, "the least-frequently-used result in disguise")."""

from __future__ import annotations

import numpy as np

from kvcore.numbers import integer
from kvcore.traces import AttentionTrace, PagingTrace

from ._build import attention_from_rows


def lfu_priming(k: int, m: int) -> PagingTrace:
    """The unit-cost sequence ``p_1^m p_2^m ... p_{k-1}^m (x y)^{m-1}`` (SPEC section 5).

    Items: ``p_i = i - 1`` for ``i = 1..k-1``, ``x = k - 1``, ``y = k``.  Length ``(k-1) m + 2 (m-1)``.  With cache
    ``k``, LFU keeps the ``p_i`` (count ``m``) and lets ``x`` and ``y`` (counts below ``m``) evict each other, paying
    ``(k-1) + 2(m-1)``; the optimum evicts one ``p_i`` when ``y`` first arrives and pays ``k+1``.  So LFU's ratio
    grows without bound in ``m`` (Sleator & Tarjan, CACM 1985; Borodin & El-Yaniv, "Online Computation and
    Competitive Analysis", Cambridge 1998, Sec. 3.3).  Deterministic.
    """
    k = integer(k, "k", 1)
    m = integer(m, "m", 1)
    prime = np.repeat(np.arange(k - 1, dtype=np.int64), m)
    alternate = np.tile(np.array([k - 1, k], dtype=np.int64), m - 1)
    return PagingTrace.unit(np.concatenate([prime, alternate]), f"lfu_priming(k={k}, m={m})")


def lfu_priming_attention(k: int, m: int) -> AttentionTrace:
    """Attention analogue of :func:`lfu_priming`: ``k-1`` decoy tokens take all the early mass, then two late
    tokens take turns.

    Every row puts mass 1 on one token (its *target*); the target sequence is the LFU priming sequence with tokens
    relabelled.  Decoy ``p_i`` (``i = 1..k-1``) is token ``(i-1) m``: rows ``(i-1) m .. i m - 1`` all target it, so it
    collects mass ``m`` and the ``m-1`` tokens arriving after it in its block get nothing.  Then ``x = (k-1) m`` and
    ``y = x + 1``: rows ``x + 2j`` target ``x`` and rows ``x + 2j + 1`` target ``y`` for ``j = 0..m-2`` (each collects
    ``m-1`` < ``m``).  Length ``(k-1) m + 2 (m-1)``.

    In NM an accumulated-attention rule that protects the arriving token keeps the decoys and drops ``x`` or ``y``
    as soon as both are present, then loses every later row aimed at the dropped one; the optimum drops a spent
    decoy instead and loses nothing.  Through :func:`kvcore.traces.rm_requests_from_attention` (any ``theta``) the
    requests are ``{t}`` plus the target when it is older than ``t``: the SPEC formula with free arrivals added.
    Deterministic.
    """
    k = integer(k, "k", 1)
    m = integer(m, "m", 1)
    targets = lfu_priming_attention_targets(k, m)
    return attention_from_rows([{int(x): 1.0} for x in targets], f"lfu_priming_attention(k={k}, m={m})")


def lfu_priming_attention_targets(k: int, m: int) -> np.ndarray:
    """The per-row target token of :func:`lfu_priming_attention` (row ``t`` is ``{targets[t]: 1}``)."""
    k = integer(k, "k", 1)
    m = integer(m, "m", 1)
    prime = np.repeat(np.arange(k - 1, dtype=np.int64) * m, m)
    x = (k - 1) * m
    alternate = np.tile(np.array([x, x + 1], dtype=np.int64), m - 1)
    return np.concatenate([prime, alternate])
