"""H2O: heavy hitters plus a recent window (Zhang et al., NeurIPS 2023)."""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError
from kvcore.numbers import integer, real

from .base import Policy
from .decay import RisingKeyHeap
from .registry import register


@register
@dataclass
class H2O(Policy):
    """Keep the ``r`` most recent tokens and, among the others, the ones with the most accumulated attention.

    Rule (Zhang et al., H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language Models,
    NeurIPS 2023; their greedy eviction with a local window): the budget ``k`` is split into a recent part of
    ``r = max(1, floor(recent_fraction * k))`` tokens and a heavy-hitter part of ``k - r`` (the recent part always
    holds the arriving token, which has no observed attention yet; see ACC's ``protect_arrival``).  A token's score is its
    accumulated observed attention ``sum_s a[s, i]`` (undecayed, from its arrival on).  At step ``t`` the tokens
    ``t-r+1 .. t`` are never dropped; the victim is the token of least score among the older ones, ties to the
    smaller id.  The default split is half and half: the H2O reference setting keeps 10% heavy hitters plus 10%
    recent tokens at a 20% budget (reference implementation ``FMInference/H2O``; the Llama-recipes port sets both
    parts to half the cache length).  With ``k = 1`` H2O keeps the newest token.  ``recent_tokens``, when given,
    fixes the recent part at ``min(recent_tokens, k)`` tokens whatever the budget (:meth:`params_fixed_at`).

    Model: NM (the window is over arrival positions).  Cost per step: ``O(nnz)`` dictionary updates, one heap insert
    for the token leaving the window, amortized ``O(log k)`` per eviction.  Checked against hand-worked NM traces
    and a brute-force recomputation of the rule on generated traces (``tests/test_attention_policies.py``).
    """

    recent_fraction: float = 0.5
    recent_tokens: int | None = None

    name = "H2O"
    signal = "importance"  # Section 2.4 lists H2O among the importance methods (heavy hitters)
    models = frozenset({"nm"})
    citation = ("Zhang et al., H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language "
                "Models, NeurIPS 2023")

    def __post_init__(self) -> None:
        real(self.recent_fraction, f"policy {self.name}: recent_fraction", 0.0)
        if self.recent_fraction > 1.0:
            raise ParameterError(f"policy H2O: recent_fraction = {self.recent_fraction!r} must be in [0, 1]")
        if self.recent_tokens is not None:
            integer(self.recent_tokens, f"policy {self.name}: recent_tokens", 1)

    def params_fixed_at(self, capacity: int) -> dict:
        """The recent part this policy keeps at ``capacity``, as a fixed token count."""
        if self.recent_tokens is not None:
            return {"recent_tokens": self.recent_tokens}
        return {"recent_tokens": max(1, int(self.recent_fraction * capacity))}

    def recent_at(self, capacity: int) -> int:
        """``r``: the tokens of the recent part at ``capacity`` (class docstring)."""
        if self.recent_tokens is None:
            return max(1, int(self.recent_fraction * capacity))
        return min(self.recent_tokens, max(1, capacity))

    def on_reset(self) -> None:
        self.recent = self.recent_at(self.k)
        self._score: dict[int, float] = {}
        self._heavy = RisingKeyHeap()

    def on_admit(self, t, item, cost):
        self._score[item] = 0.0
        leaving = item - self.recent
        if leaving in self._score:
            self._heavy.add(leaving, self._score[leaving])

    def on_observe(self, t, items, weights):
        score, heavy = self._score, self._heavy.key
        for i, a in zip(items.tolist(), weights.tolist()):
            v = score[i] + a
            score[i] = v
            if i in heavy:
                heavy[i] = v

    def on_evict(self, t, item):
        del self._score[item]
        self._heavy.remove(item)

    def victim(self, t, protected):
        return self._heavy.min()
