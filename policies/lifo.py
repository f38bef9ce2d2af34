"""Last in, first out."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Policy
from .registry import register


@register
@dataclass
class LIFO(Policy):
    """Evict the resident unprotected item that was admitted most recently; hits do not change the order.

    Not competitive: on ``1..k`` followed by ``(k+1, k)`` repeated it faults on every request while the optimum
    faults once more (Sleator & Tarjan 1985, Sec. 3).  Model: RM and NM.  In NM nothing is protected, so the
    arriving token itself is the most recent admission and is dropped: NM LIFO keeps the first ``k`` tokens forever
    (a sinks-only cache), which is a meaningful, if poor, KV rule.
    """

    name = "LIFO"
    signal = "recency"
    models = frozenset({"rm", "nm"})
    citation = "Sleator & Tarjan, Amortized efficiency of list update and paging rules, CACM 1985"

    def on_reset(self) -> None:
        self._stack: dict[int, None] = {}

    def on_admit(self, t, item, cost):
        self._stack[item] = None

    def on_evict(self, t, item):
        self._stack.pop(item, None)

    def victim(self, t, protected):
        for item in reversed(self._stack):
            if item not in protected:
                return item
        raise RuntimeError("no evictable item")
