"""The paper's Section 10 default: recency floor + pinned sinks + decayed score + random ties."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvcore.errors import ParameterError
from kvcore.numbers import integer, real

from .base import Policy
from .decay import LazyDecay, RisingKeyHeap
from .registry import register


@register
@dataclass
class DefaultPolicy(Policy):
    """Never evict the ``recent`` newest tokens or the first ``n_sinks``; else drop the lowest decayed score.

    Rule (paper Section 10, "a concrete default policy"): the tokens ``t-recent+1 .. t`` (the recency floor) and
    ``0 .. n_sinks-1`` (attention sinks) are kept.  Every token carries the decayed observed attention
    ``S_i <- gamma S_i + a[t, i]`` with ``gamma = 2^(-1/half_life)``; ``half_life`` defaults to ``recent`` (the paper:
    "a half-life on the order of the recent-token floor").  The victim is a token of least score among the others,
    chosen uniformly at random (``self.rng``) among all tokens whose score equals that least score exactly -- in
    practice the never-attended tokens at score 0.  When no such token exists (the floor and the sinks fill the
    budget) the floor yields first, oldest token first, and the sinks last, newest first, so the rule is total for
    every ``k`` (with ``recent + n_sinks >= k`` it is StreamingLLM's sliding window).

    Model: NM.  Randomized (``deterministic = False``): the same seed gives the same run.  Cost: ``O(nnz)`` per step,
    ``O(1)`` per zero-score eviction (an indexed set sampled uniformly), amortized ``O(log k)`` otherwise (a
    :class:`policies.decay.RisingKeyHeap`, with ``O(m log k)`` for a tie among ``m`` equal positive scores).
    Checked against hand-worked NM traces and by a frequency test of the tie-break
    (``tests/test_attention_policies.py``).
    """

    recent: int = 256
    n_sinks: int = 4
    half_life: float | None = None

    name = "Default"
    signal = "hybrid"
    deterministic = False
    models = frozenset({"nm"})
    citation = "the paper, Section 10 (GD-A with a recency floor)"

    def __post_init__(self) -> None:
        integer(self.recent, f"policy {self.name}: recent", 0)
        integer(self.n_sinks, f"policy {self.name}: n_sinks", 0)
        if self.half_life is None and self.recent == 0:
            raise ParameterError("policy Default: recent = 0 needs an explicit half_life (it defaults to recent)")
        if self.half_life is not None:
            real(self.half_life, f"policy {self.name}: half_life", 0.0)
            if self.half_life <= 0:
                raise ParameterError(f"policy Default: half_life = {self.half_life!r} must be > 0")

    @property
    def gamma(self) -> float:
        return 2.0 ** (-1.0 / (self.recent if self.half_life is None else self.half_life))

    def on_reset(self) -> None:
        self._decay = LazyDecay(self.gamma)
        self._score: dict[int, float] = {}
        self._floor: deque[int] = deque()
        self._sinks: list[int] = []
        self._zero: list[int] = []  # pool tokens of score exactly 0, with their positions for O(1) removal
        self._zero_at: dict[int, int] = {}
        self._heap = RisingKeyHeap()  # pool tokens of positive score

    def _zero_add(self, item: int) -> None:
        self._zero_at[item] = len(self._zero)
        self._zero.append(item)

    def _zero_remove(self, item: int) -> None:
        pos = self._zero_at.pop(item)
        last = self._zero.pop()
        if last != item:
            self._zero[pos] = last
            self._zero_at[last] = pos

    def _to_pool(self, item: int) -> None:
        v = self._score[item]
        if v > 0.0:
            self._heap.add(item, v)
        else:
            self._zero_add(item)

    def on_admit(self, t, item, cost):
        self._score[item] = 0.0
        if item < self.n_sinks:
            self._sinks.append(item)
            return
        floor = self._floor
        floor.append(item)
        while floor and floor[0] <= t - self.recent:
            self._to_pool(floor.popleft())

    def on_observe(self, t, items, weights):
        decay, score, heap = self._decay, self._score, self._heap
        s = decay.scale(t)
        if s > decay.LIMIT:
            self._renormalize(t)
            s = 1.0
        key, zero_at = heap.key, self._zero_at
        for i, a in zip(items.tolist(), (weights * s).tolist()):
            v = score[i] + a
            score[i] = v
            if i in key:
                key[i] = v
            elif v > 0.0 and i in zero_at:
                self._zero_remove(i)
                heap.add(i, v)

    def _renormalize(self, t: int) -> None:
        f = self._decay.renormalize(t)
        score = self._score
        for i in score:
            score[i] *= f
        underflowed = [i for i in self._heap.key if score[i] == 0.0]
        for i in underflowed:
            self._heap.remove(i)
            self._zero_add(i)
        self._heap.rebuild(lambda v: v * f)

    def on_evict(self, t, item):
        del self._score[item]
        if item in self._zero_at:
            self._zero_remove(item)
        elif item in self._heap:
            self._heap.remove(item)
        elif self._floor and self._floor[0] == item:
            self._floor.popleft()
        else:
            self._sinks.remove(item)

    def pick_tie(self, ties: list[int]) -> int:
        """The victim among tokens of exactly equal least score: uniform at random (the Section 10 rule)."""
        return ties[int(self.rng.integers(len(ties)))] if len(ties) > 1 else ties[0]

    def victim(self, t, protected):
        if self._zero:
            return self.pick_tie(self._zero)
        heap = self._heap
        if len(heap):
            first = heap.min()
            low = heap.key[first]
            ties = [first]
            while len(ties) < len(heap):
                nxt = heap.min(frozenset(ties))
                if heap.key[nxt] != low:
                    break
                ties.append(nxt)
            return self.pick_tie(ties)
        if self._floor:
            return self._floor[0]
        return self._sinks[-1]
