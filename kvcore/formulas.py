"""Closed-form quantities of the paper, each with its equation and section.  Pure functions of their arguments.

Figures draw these; claims compare computed numbers to the paper's words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import portable_math
from .errors import ParameterError

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


@dataclass(frozen=True)
class Guarantee:
    """A competitive bound a policy can promise (policy metadata ``guarantee``, :mod:`policies.registry`).

    ``value(k, h)`` is the bound on ``ALG_k / OPT_h`` with additive constant 0 (both caches start empty, cold misses
    count).  ``expectation``: a bound on the expected cost of a randomized policy, against an oblivious adversary.
    ``augmentation``: stated for every ``h <= k``; otherwise only for ``h = k``.
    """

    name: str
    expectation: bool
    augmentation: bool
    source: str

    def value(self, k: int, h: int | None = None) -> float:
        h = k if h is None else h
        if not self.applies(k, h):
            raise ValueError(f"{self.name} is stated for h = k only (got h = {h}, k = {k})")
        if self.name == "k/(k-h+1)":
            return landlord_bound(k, h)
        if self.name == "2H_k-1":
            return 2 * harmonic(k) - 1
        return harmonic(k)

    def applies(self, k: int, h: int) -> bool:
        return self.augmentation or h == k


GUARANTEES = {g.name: g for g in (
    Guarantee("k/(k-h+1)", False, True, "Sleator & Tarjan, CACM 1985; Young, Algorithmica 2002 (Eq. 8)"),
    Guarantee("2H_k-1", True, False, "Fiat et al., J. Algorithms 1991; Achlioptas, Chrobak & Noga, TCS 2000"),
    Guarantee("H_k", True, False, "McGeoch & Sleator, Algorithmica 1991 (optimal randomized ratio, Eq. 9)"),
)}


# ---------------------------------------------------------------------------------------------------------------
# Figure-level quantities (issue 5): model shapes, Eq. 3 throughput, Zipf tail mass, decode roofline, Lemma 1 decay.
# ---------------------------------------------------------------------------------------------------------------


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise ParameterError(message)


@dataclass(frozen=True)
class ModelShape:
    """The Eq. 2 coefficients of one decoder plus what the decode roofline needs.

    ``params`` is the nominal parameter count (weights are ``params * bytes_per_elem`` bytes); ``q_heads`` is the
    number of query heads (equal to ``kv_heads`` unless the model uses grouped-query attention).
    """

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_elem: float
    params: float
    q_heads: int

    @property
    def bytes_per_token(self) -> float:
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, self.bytes_per_elem)

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_elem


# The three configurations of the paper's Section 2.1 / Figure 2, fp16 (2 bytes per element).  The paper states the
# 7B shape; the 13B and 70B shapes are the Llama 2 ones (Touvron et al., "Llama 2", arXiv 2307.09288, 2023, Table 1
# and Section 2.2: 70B uses grouped-query attention with 8 KV heads and 64 query heads).  Parameter counts are nominal.
CONFIG_7B = ModelShape("7B (32 layers, 32 KV heads, d=128, fp16)", 32, 32, 128, 2, 7e9, 32)
CONFIG_13B = ModelShape("13B (40 layers, 40 KV heads, d=128, fp16)", 40, 40, 128, 2, 13e9, 40)
CONFIG_70B_GQA = ModelShape("70B GQA (80 layers, 8 KV heads, d=128, fp16)", 80, 8, 128, 2, 70e9, 64)
PAPER_CONFIGS = (CONFIG_7B, CONFIG_13B, CONFIG_70B_GQA)


@dataclass(frozen=True)
class Accelerator:
    """Peak numbers of one accelerator for the decode roofline (Figure 15)."""

    name: str
    bandwidth: float  # bytes per second
    peak_flops: float  # dense fp16 FLOP per second
    memory_bytes: float
    source: str


# NVIDIA A100 Tensor Core GPU datasheet (2021 revision, "A100 80GB SXM" column): HBM2e bandwidth 2,039 GB/s, dense
# FP16 Tensor Core 312 TFLOPS (624 with structured sparsity, not used here), 80 GB of memory (taken as 80e9 bytes).
A100_80GB = Accelerator("A100-80GB SXM", 2.039e12, 312e12, 80e9,
                        "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column")


def free_memory(model: ModelShape, hw: Accelerator) -> float:
    """``M`` of Eq. 3: the accelerator memory left for the KV cache once the model's weights are loaded.

    ParameterError when the weights alone do not fit.
    """
    free = hw.memory_bytes - model.weight_bytes
    _need(free > 0, f"{model.name} weights do not fit in {hw.name}")
    return free


def max_batch(free_bytes: float, tokens_per_sequence: int, bytes_per_token: float) -> int:
    """Eq. 3, first half (paper Section 3): ``B_max = floor(M / (k * P_kv))``.

    ``M`` is the free memory above the weights, ``k`` the tokens each sequence keeps (the budget, or the full
    sequence length ``S`` without eviction) and ``P_kv`` the Eq. 2 bytes per token.  The paper's text describes this
    equation in words only ("the number of concurrent sequences a device can hold is set by how much cache each
    consumes"); the floor is ours, because a batch is a whole number of sequences.
    """
    _need(free_bytes >= 0, f"free_bytes = {free_bytes}: need >= 0")
    _need(tokens_per_sequence >= 1, f"tokens_per_sequence = {tokens_per_sequence}: need >= 1")
    _need(bytes_per_token > 0, f"bytes_per_token = {bytes_per_token}: need > 0")
    return int(free_bytes // (tokens_per_sequence * bytes_per_token))


def throughput_gain(seq_len: int, budget: int) -> float:
    """Eq. 3, second half (paper Sections 3 and 4): memory-bound batch and throughput gain ``G = S / k``.

    Evicting down to ``k`` of ``S`` tokens lets ``S/k`` times as many sequences share the memory, and in the
    memory-bound regime throughput scales with batch.  A budget above ``S`` buys nothing, so ``k`` is capped at ``S``.
    """
    _need(seq_len >= 1, f"seq_len = {seq_len}: need >= 1")
    _need(budget >= 1, f"budget = {budget}: need >= 1")
    return seq_len / min(budget, seq_len)


def batch_gain(free_bytes: float, seq_len: int, budget: int, bytes_per_token: float) -> float:
    """Eq. 3 with whole sequences: ``B_max(k) / B_max(S)`` (``inf`` when not even one full-length sequence fits)."""
    full = max_batch(free_bytes, seq_len, bytes_per_token)
    evicted = max_batch(free_bytes, min(budget, seq_len), bytes_per_token)
    return math.inf if full == 0 else evicted / full


def zipf_tail_mass(s: float, n: int, k: int) -> float:
    """Light-tail mass of a Zipf(s) attention row over ``n`` tokens beyond its top ``k`` (Section 7, Figure 13).

    ``M_tail = sum_{i=k+1}^{n} i^-s / sum_{i=1}^{n} i^-s``.  This is Eq. 13's per-step bound at the threshold
    ``tau*`` where the heavy set has exactly ``k`` members (ties aside), i.e. the smallest bound Theorem 4 gives.
    """
    _need(n >= 1, f"n = {n}: need >= 1")
    _need(0 <= k <= n, f"k = {k}, n = {n}: need 0 <= k <= n")
    _need(math.isfinite(s) and s >= 0, f"s = {s}: need a finite exponent >= 0")
    weights = portable_math.power(np.arange(1, n + 1, dtype=np.float64), -float(s))
    # Sum the small terms first so the tail is not lost against the head.
    total = math.fsum(weights[::-1])
    return math.fsum(weights[k:][::-1]) / total


def decode_step_bytes(model: ModelShape, batch: int, cached_tokens: int) -> float:
    """Bytes one decode step streams from memory: all weights once plus every sequence's cache (Eq. 2)."""
    _need(batch >= 0 and cached_tokens >= 0, f"batch = {batch}, cached_tokens = {cached_tokens}: need >= 0")
    return model.weight_bytes + batch * cached_tokens * model.bytes_per_token


def decode_step_flops(model: ModelShape, batch: int, cached_tokens: int) -> float:
    """FLOPs of one decode step: ``B * (2 * N_params + 4 * L * n_q * d_h * c)``.

    ``2 N`` is one multiply-add per weight per token (Kaplan et al., "Scaling Laws for Neural Language Models",
    arXiv 2001.08361, 2020, Section 2.1); ``4 L n_q d_h c`` is the score ``q.k`` and the weighted sum over ``c``
    cached tokens (two multiply-adds per cached element pair, every layer and query head).
    """
    _need(batch >= 0 and cached_tokens >= 0, f"batch = {batch}, cached_tokens = {cached_tokens}: need >= 0")
    per_token = 2.0 * model.params + 4.0 * model.layers * model.q_heads * model.head_dim * cached_tokens
    return batch * per_token


def decode_step_time(model: ModelShape, hw: Accelerator, batch: int, cached_tokens: int) -> float:
    """Roofline decode step time (paper Section 10, Figure 15): ``max(bytes / bandwidth, flops / peak)`` seconds."""
    return max(decode_step_bytes(model, batch, cached_tokens) / hw.bandwidth,
               decode_step_flops(model, batch, cached_tokens) / hw.peak_flops)


def decode_throughput(model: ModelShape, hw: Accelerator, batch: int, cached_tokens: int) -> float:
    """Generated tokens per second at batch ``B``: ``B / decode_step_time``."""
    _need(batch >= 1, f"batch = {batch}: need >= 1")
    return batch / decode_step_time(model, hw, batch, cached_tokens)


def roofline_crossover_batch(model: ModelShape, hw: Accelerator, cached_tokens: int) -> float:
    """Batch where the decode step turns compute-bound: the ``B`` solving ``bytes(B)/bandwidth = flops(B)/peak``.

    ``B* = (W / bw) / (f / peak - c * P_kv / bw)`` with ``W`` the weight bytes and ``f`` the per-token FLOPs; ``inf``
    when the per-sequence cache traffic alone outweighs its arithmetic (the step never turns compute-bound).
    """
    per_seq_flops = decode_step_flops(model, 1, cached_tokens)
    per_seq_bytes = cached_tokens * model.bytes_per_token
    slope = per_seq_flops / hw.peak_flops - per_seq_bytes / hw.bandwidth
    return math.inf if slope <= 0 else (model.weight_bytes / hw.bandwidth) / slope


def max_throughput_gain(model: ModelShape, hw: Accelerator, seq_len: int, budget: int) -> float:
    """Roofline throughput gain of evicting to ``k`` at each budget's largest batch (Figure 15, right panel).

    ``T(B_max(k), k) / T(B_max(S), S)`` with ``T`` = :func:`decode_throughput` and ``B_max`` from Eq. 3 on the free
    memory ``M = memory - weights``.  Equals Eq. 3's ``S/k`` (up to the floors) while both batches stay memory-bound;
    falls below it once ``B_max(k)`` passes the crossover batch.
    """
    free = free_memory(model, hw)
    full = max_batch(free, seq_len, model.bytes_per_token)
    _need(full >= 1, f"not one {seq_len}-token sequence of {model.name} fits in {hw.name}")
    kept = min(budget, seq_len)
    evicted = max_batch(free, kept, model.bytes_per_token)
    return decode_throughput(model, hw, evicted, kept) / decode_throughput(model, hw, full, seq_len)


def decayed_scores(rows, gamma: float):
    """Lemma 1's score (paper Section 5): ``D_i(t) = sum_{s <= t} gamma^(t-s) a[s, i]`` for every step and token.

    ``rows`` is a dense ``T x n`` array of attention rows (small illustrations only; traces stay sparse elsewhere).
    ``gamma = 1`` is the undecayed accumulated score of ACC (Theorem 2).  Returns a ``T x n`` array.
    """
    _need(0 < gamma <= 1, f"gamma = {gamma}: need 0 < gamma <= 1")
    a = np.asarray(rows, dtype=np.float64)
    _need(a.ndim == 2, f"rows must be a 2-D array, got shape {a.shape}")
    out = np.empty_like(a)
    running = np.zeros(a.shape[1])
    for t in range(a.shape[0]):
        running = gamma * running + a[t]
        out[t] = running
    return out


def decay_window(gamma: float, eps: float) -> float:
    """Lemma 1's window: ``W_gamma = ln(1/eps) / ln(1/gamma)`` steps for a unit contribution to fall below ``eps``."""
    _need(0 < gamma < 1, f"gamma = {gamma}: need 0 < gamma < 1")
    _need(0 < eps < 1, f"eps = {eps}: need 0 < eps < 1")
    return math.log(1 / eps) / math.log(1 / gamma)


def kv_block_bytes(tokens_per_block: int, layers: int, kv_heads: int, head_dim: int, bytes_per_elem: float) -> float:
    """Bytes of one cache block of ``tokens_per_block`` tokens, every head of every layer: ``tokens * P_kv`` (Eq. 2).

    Seed 002's unit: 16 tokens at 80 layers, 8 KV heads, d = 128, fp16 (Llama-2-70B, GQA) is 5 MiB exactly.
    """
    return tokens_per_block * kv_bytes_per_token(layers, kv_heads, head_dim, bytes_per_elem)


def blocks_in_budget(budget_bytes: float, block_bytes: float) -> int:
    """Cache capacity in whole blocks: ``floor(budget / block_bytes)`` (a partial block cannot hold a block)."""
    _need(budget_bytes >= 0 and block_bytes > 0,
          f"budget = {budget_bytes}, block = {block_bytes} bytes: need budget >= 0 and block > 0")
    return int(budget_bytes // block_bytes)


# ---------------------------------------------------------------------------------------------------------------
# The figure page's block scoring (seed 002): LRFU-style EMA score and the recency-decayed eviction priority.
# ---------------------------------------------------------------------------------------------------------------


def ema_update(score: float, new_score: float, alpha: float) -> float:
    """One EMA step: ``alpha * new_score + (1 - alpha) * score`` (seed 002)."""
    return alpha * new_score + (1.0 - alpha) * score


def ema_decayed(score: float, steps: int, alpha: float) -> float:
    """The score after ``steps`` unattended steps (``new = 0`` each): ``score * (1 - alpha) ** steps``."""
    return score * (1.0 - alpha) ** steps


def ema_half_life(alpha: float) -> float:
    """Steps for an unattended score to halve: ``ln 0.5 / ln(1 - alpha)`` (seed 002: 13.5 at alpha = 0.05)."""
    if not 0.0 < alpha < 1.0:
        raise ParameterError(f"alpha = {alpha}: the half-life needs 0 < alpha < 1")
    return math.log(0.5) / math.log1p(-alpha)


def recency_decay(steps: float, beta: float) -> float:
    """``1 - exp(-beta * steps)`` (seed 002): 0 for a block accessed now, towards 1 for a long-idle block."""
    return -math.expm1(-beta * steps)


def eviction_priority(score: float, steps: float, beta: float) -> float:
    """Seed 002's eviction priority ``(1 - score) * (1 - exp(-beta * steps))``; the highest is evicted."""
    return (1.0 - score) * recency_decay(steps, beta)
