"""TOVA: drop the token with the lowest attention at the current step (Oren et al., 2024)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .base import Policy
from .registry import register


@register
@dataclass
class TOVA(Policy):
    """Evict the resident token that received the least attention in the last observed row.

    Rule (Oren, Hassid, Yarden, Adi & Schwartz, Transformers are Multi-State RNNs, EMNLP 2024 -- "Token Omission
    Via Attention"): a token's score is its weight in the most recent row the policy observed (row ``t-1``, over
    ``R_{t-1}``); a token absent from that row (or listed with weight 0) scores 0; nothing accumulates.  When token
    ``t`` arrives over budget the victim is the lowest-scoring token of ``R_{t-1}``, ties to the smaller id.

    The arriving token: in TOVA the current query attends to the new token too, so its weight is known when the
    drop is made.  Here the drop happens before row ``t`` exists (SPEC section 2, NM step order), so the arriving
    token has no score yet; it is never dropped at its own arrival step (treated as scoring above every other
    token) and from the next step on it is scored by the rows like any other.  With ``k = 1`` this keeps the newest
    token.

    Model: NM.  Cost per eviction: ``O(nnz)`` -- the victim is the oldest resident token outside the last row's
    positive entries (an ordered scan that skips at most ``nnz`` tokens), or else the lowest of those entries.
    Checked against hand-worked NM traces and a brute-force argmin on generated traces.
    """

    name = "TOVA"
    signal = "importance"
    models = frozenset({"nm"})
    citation = "Oren et al., Transformers are Multi-State RNNs, EMNLP 2024 (TOVA)"

    def on_reset(self) -> None:
        self._order: OrderedDict[int, None] = OrderedDict()  # resident tokens in arrival (= id) order
        self._last: dict[int, float] = {}  # positive weights of the last observed row

    def on_admit(self, t, item, cost):
        self._order[item] = None

    def on_observe(self, t, items, weights):
        pos = weights > 0
        self._last = dict(zip(items[pos].tolist(), weights[pos].tolist()))

    def on_evict(self, t, item):
        del self._order[item]

    def victim(self, t, protected):
        last = self._last
        for item in self._order:
            if item == t:
                break
            if item not in last:
                return item
        # every older resident token was attended in the last row: the lowest weight goes, ties to the smaller id
        return min(last, key=lambda i: (last[i], i))
