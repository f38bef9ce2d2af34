"""Least recently used."""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError

from .fifo import FIFO
from .registry import register


@register
@dataclass
class LRU(FIFO):
    """Evict the resident item whose last request (RM) or last attention (NM) is oldest.

    In NM an item counts as used when it arrives and whenever it is observed with weight ``>= threshold``.  In RM only
    requests count: attention rows that an RM run built from attention also feeds are ignored (counting them would
    make recency depend on sub-threshold attention and break the k/(k-h+1) bound).
    Checked against Belady's exact optimum on Sleator-Tarjan's bound ``k/(k-h+1)`` and by hand-worked traces.
    It is FIFO's admission order with every use moving the item to the young end.
    """

    threshold: float = 0.0

    name = "LRU"
    models = frozenset({"rm", "nm"})
    citation = "Sleator & Tarjan, Amortized efficiency of list update and paging rules, CACM 1985"

    def __post_init__(self):
        if not (0.0 <= self.threshold <= 1.0):
            raise ParameterError(f"LRU: threshold = {self.threshold!r} must be in [0, 1]")

    def on_hit(self, t, item, cost):
        self._order.move_to_end(item)

    def on_observe(self, t, items, weights):
        if self.model != "nm":
            return
        order = self._order
        for i in items[weights >= self.threshold].tolist() if self.threshold > 0 else items.tolist():
            order.move_to_end(i)
