"""First in, first out."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .base import Policy
from .registry import register


@register
@dataclass
class FIFO(Policy):
    """Evict the resident item that was admitted earliest; hits do not change the order.

    In NM this is a sliding window over arrivals.  Checked against Belady on ``k/(k-h+1)`` and hand-worked traces.
    """

    name = "FIFO"
    signal = "recency"
    models = frozenset({"rm", "nm"})
    citation = "Sleator & Tarjan, Amortized efficiency of list update and paging rules, CACM 1985"
    guarantee = "k/(k-h+1)"

    def on_reset(self) -> None:
        self._order: OrderedDict[int, None] = OrderedDict()

    def on_admit(self, t, item, cost):
        self._order[item] = None

    def on_evict(self, t, item):
        self._order.pop(item, None)

    def victim(self, t, protected):
        for item in self._order:
            if item not in protected:
                return item
        raise RuntimeError("no evictable item")
