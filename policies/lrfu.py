"""LRFU: the least-recently/frequently-used spectrum (Lee et al., SIGMETRICS 1999)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvcore.numbers import real

from .base import Policy
from .decay import RisingKeyHeap
from .registry import register


@register
@dataclass
class LRFU(Policy):
    """Evict the item of least combined recency-and-frequency value ``C_i(t) = sum_j F(t - t_j)``.

    Rule (Lee, Choi, Kim, Noh, Min, Cho & Kim, On the existence of a spectrum of policies that subsumes the least
    recently used (LRU) and least frequently used (LFU) policies, SIGMETRICS 1999): ``F(x) = (1/2)^(lambda x)``
    and ``t_j`` are the times of the item's references since it was admitted; the victim is the unprotected item of
    least ``C_i(t)``, ties to the least recently referenced.  Time is Lee et al.'s: it advances by one at every
    reference (a virtual clock), so references never share a time -- an engine step with several references (an RM
    step with several requests, an NM row) advances it several times, in the order the engine reports them.
    ``lambda = 0`` is LFU (``C`` counts references; in-cache counts, since ``C`` restarts at admission);
    ``lambda >= 1`` is LRU (the latest reference outweighs all earlier ones together, ``sum_{j<n} 2^-(n-j) < 1``).
    With a step clock instead, two items referenced in the same step would tie on recency and ``lambda = 1`` would
    no longer be LRU.

    References: an admission (RM fetch or NM arrival) and an RM hit are references of weight 1; an observed
    attention entry with ``a >= threshold`` is a reference of weight 1 (with the default ``threshold = 0`` every observed entry is one, as for LRU in
    NM), or of weight ``a`` when ``mass_weighted`` (positive entries only)
    (then ``C`` is a decayed attention mass, the accumulated-attention family with ``gamma = 2^-lambda``).  In RM
    runs built from attention, a token requested at step ``t`` is also observed at ``t``: both count.

    Incremental ordering key (log space, no per-step pass): ``key_i = log2 C_i(t_last) + lambda t_last
    = log2 sum_j m_j 2^(lambda t_j)`` (``m_j`` the reference weights).  Since ``C_i(t) = 2^(key_i - lambda t)`` for
    every item at the current time ``t``, ordering by ``key`` is ordering by ``C(t)``, and a new reference at ``t``
    only changes its own item: ``key <- log2(2^key + m 2^(lambda t))`` (computed as ``max + log2(1 + 2^-|diff|)``,
    so it never overflows).  Keys only rise, so the heap is :class:`policies.decay.RisingKeyHeap` with key
    ``(key, time of last reference)``.  Checked: ``key`` equals a brute-force recomputation of ``C``; ``lambda = 0`` evicts
    exactly as LFU and ``lambda = 1`` exactly as LRU (``tests/test_lrfu.py``).  Persistable: the exported state is
    the key (time-independent); re-admission merges it with the admission's reference.
    """

    lam: float = 0.1
    threshold: float = 0.0
    mass_weighted: bool = False

    name = "LRFU"
    signal = "hybrid"
    models = frozenset({"rm", "nm"})
    citation = ("Lee et al., On the existence of a spectrum of policies that subsumes the LRU and LFU policies, "
                "SIGMETRICS 1999")
    persistable = True

    def __post_init__(self) -> None:
        real(self.lam, f"policy {self.name}: lam", 0.0)
        real(self.threshold, f"policy {self.name}: threshold", 0.0, finite=False)

    def on_reset(self) -> None:
        self._heap = RisingKeyHeap()
        self._clock = 0  # virtual time: one tick per reference

    @property
    def clock(self) -> int:
        """The current virtual time (number of references so far)."""
        return self._clock

    def crf(self, item: int) -> float:
        """``C_item`` at the current virtual time, from its key."""
        return 2.0 ** (self._heap.key[item][0] - self.lam * self._clock)

    def _reference(self, item: int, mass: float) -> None:
        self._clock = now = self._clock + 1
        key = self._heap.key
        key[item] = (_log2_add(key[item][0], math.log2(mass) + self.lam * now), now)

    def on_admit(self, t, item, cost):
        self._clock = now = self._clock + 1
        self._heap.add(item, (self.lam * now, now))

    def on_hit(self, t, item, cost):
        self._reference(item, 1.0)

    def on_observe(self, t, items, weights):
        ref, thr = self._reference, self.threshold
        if self.mass_weighted:
            for i, a in zip(items.tolist(), weights.tolist()):
                if a >= thr and a > 0.0:
                    ref(i, a)
        else:
            for i, a in zip(items.tolist(), weights.tolist()):
                if a >= thr:
                    ref(i, 1.0)

    def on_evict(self, t, item):
        self._heap.remove(item)

    def victim(self, t, protected):
        return self._heap.min(protected)

    def export_state(self, item):
        return self._heap.key[item][0]

    def import_state(self, t, item, state):
        key = self._heap.key
        key[item] = (_log2_add(key[item][0], float(state)), key[item][1])


def _log2_add(x: float, y: float) -> float:
    """``log2(2^x + 2^y)`` without overflow."""
    hi, lo = (x, y) if x >= y else (y, x)
    return hi + math.log2(1.0 + 2.0 ** (lo - hi))
