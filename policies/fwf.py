"""Flush when full."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Policy
from .registry import register


@register
@dataclass
class FWF(Policy):
    """On a fault with a full cache, evict every resident item that is not requested at this step.

    Rule: when room is needed at step ``t`` the cache is emptied of everything outside ``Q_t`` (victims in
    increasing id order), so a phase of FWF is a maximal run of steps touching at most ``k`` distinct items.
    FWF is ``k/(k-h+1)``-competitive (it is the Landlord instance that evicts all zero-credit items at once,
    Young SODA 1998 Sec. 2) yet is ``k``-times worse than LRU on i.i.d. requests over ``k+1`` items.

    Model: RM only.  In NM nothing is protected, so the flush would also drop the arriving token and leave an empty
    cache after every full step; that is not a rule anyone would run, so NM is not declared.
    """

    name = "FWF"
    signal = "recency"
    models = frozenset({"rm"})
    citation = ("Karlin, Manasse, Rudolph & Sleator, Competitive snoopy caching, Algorithmica 1988; "
                "Young, On-line file caching, SODA 1998 / Algorithmica 2002")
    guarantee = "k/(k-h+1)"
    lazy = False  # flushes every unrequested item on a fault

    def victims(self, t, need, protected):
        flushed = sorted(i for i in self.resident if i not in protected)
        for item in flushed:
            self.drop(t, item)
        return flushed
