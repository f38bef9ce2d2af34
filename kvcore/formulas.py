"""Closed-form quantities of the paper, each with its equation and section.  Pure functions of their arguments.

Figures draw these; claims compare computed numbers to the paper's words.
"""

from __future__ import annotations

import math

GiB = 2**30
MiB = 2**20


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_elem: float) -> float:
    """Eq. 2 (paper Section 2.1): ``P_kv = 2 * L * n_kv * d_h * b`` bytes per token (keys and values, every layer).

    The cache of a batch is ``B * S * P_kv``.
    """
    return 2.0 * layers * kv_heads * head_dim * bytes_per_elem


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_elem: float, seq_len: int,
                   batch: int = 1) -> float:
    """Eq. 2: total cache bytes ``B * S * P_kv``."""
    return batch * seq_len * kv_bytes_per_token(layers, kv_heads, head_dim, bytes_per_elem)


def harmonic(k: int) -> float:
    """``H_k = sum_{i=1}^k 1/i`` (Eq. 9's optimal randomized ratio)."""
    if k < 0:
        raise ValueError(f"k = {k}: harmonic number needs k >= 0")
    return math.fsum(1.0 / i for i in range(1, k + 1))


def landlord_bound(k: int, h: int) -> float:
    """Eq. 8 (Young 1994/2002): Landlord with cache ``k`` against OPT with cache ``h <= k``: ``k / (k - h + 1)``."""
    if not 1 <= h <= k:
        raise ValueError(f"h = {h}, k = {k}: need 1 <= h <= k")
    return k / (k - h + 1)
