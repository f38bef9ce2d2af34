"""StreamingLLM: attention sinks plus a sliding window (Xiao et al., ICLR 2024)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvcore.numbers import integer

from .base import Policy
from .registry import register


@register
@dataclass
class StreamingLLM(Policy):
    """Pin the first ``n_sinks`` tokens; evict the oldest other token (a sliding window over the rest).

    Rule (Xiao et al., Efficient Streaming Language Models with Attention Sinks, ICLR 2024): the cache holds the
    attention-sink tokens ``0 .. s-1`` with ``s = min(n_sinks, k)`` and the most recent ``k - s`` tokens; when token
    ``t`` arrives over budget, the oldest non-sink resident token goes (the arriving token itself when the window
    is empty, i.e. ``n_sinks >= k``).  Attention is ignored.  The default of 4 sinks is the paper's.  In the
    paper's terms this is LRU over arrivals with a small pinned set (Section 2.4).

    Model: NM.  ``O(1)`` per step (a queue of the non-sink tokens).  Checked against hand-worked NM traces and, as
    GD-A's second unification setting, eviction-for-eviction against GD-A (``tests/test_gda_unification.py``).
    """

    n_sinks: int = 4

    name = "StreamingLLM"
    signal = "recency"
    models = frozenset({"nm"})
    citation = "Xiao et al., Efficient Streaming Language Models with Attention Sinks, ICLR 2024"

    def __post_init__(self) -> None:
        integer(self.n_sinks, f"policy {self.name}: n_sinks", 0)

    def on_reset(self) -> None:
        self._sinks = min(self.n_sinks, self.k)
        self._window: deque[int] = deque()

    def on_admit(self, t, item, cost):
        if item >= self._sinks:
            self._window.append(item)

    def victim(self, t, protected):
        return self._window[0]

    def on_evict(self, t, item):
        self._window.popleft()
