"""Second-chance Clock (Corbató, "A paging experiment with the Multics system", MIT Project MAC report MAC-M-384,
1968), in its two variants, which differ only in the reference bit a newly admitted page gets -- and that bit decides
whether the policy is ``k``-competitive.

The rule both share: resident pages sit on a ring in admission order, each with a reference bit; a hit sets the
page's bit; on a fault the hand looks at the page at the front of the ring: a page whose bit is set (or that the
current step requests) gets a second chance -- its bit is cleared and it goes to the back of the ring -- and the
first page found with its bit clear is evicted.  The admitted page goes to the back of the ring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .base import Policy
from .registry import register

CORBATO = "Corbató, A paging experiment with the Multics system, MIT Project MAC MAC-M-384, 1968"


@dataclass
class _SecondChance(Policy):
    """The ring and the hand (module docstring); ``admitted_referenced`` is the bit a newly admitted page gets."""

    admitted_referenced: ClassVar[bool]
    signal = "recency"
    citation = CORBATO

    def on_reset(self) -> None:
        self._ring: dict[int, bool] = {}    # insertion order is the ring from the hand onwards; value: reference bit

    def on_admit(self, t, item, cost):
        self._ring[item] = self.admitted_referenced

    def on_hit(self, t, item, cost):
        self._ring[item] = True

    def on_evict(self, t, item):
        self._ring.pop(item, None)

    def victim(self, t, protected):
        while True:
            item, referenced = next(iter(self._ring.items()))
            if referenced or item in protected:   # a second chance: to the back of the ring, bit cleared
                del self._ring[item]
                self._ring[item] = False
                continue
            return item


@register
@dataclass
class ClockNewUnreferenced(_SecondChance):
    """Second-chance Clock, a newly admitted page's reference bit cleared: not ``k``-competitive.

    Why no bound holds: a page admitted at a fault can be evicted the first time the hand reaches it, while a page
    whose bit was set long before -- and which is never requested again -- is passed over.  So the policy is neither
    conservative nor a marking policy, and a repeated 25-request period over 4 pages
    (:func:`adversary.second_chance_breaker`) makes it fault 16 times per period at ``k = 3`` while the
    optimum faults 5 times: its excess over ``3 OPT`` grows with the repeats (``tests/test_clock.py`` recomputes
    both counts with the engine and the exact optimum)."""

    name = "Clock-new-unreferenced"
    admitted_referenced = False
    guarantee = None


@register
@dataclass
class ClockNewReferenced(_SecondChance):
    """Second-chance Clock, a newly admitted page's reference bit set (the usual operating-systems description):
    conservative, hence ``k/(k-h+1)``-competitive.

    A paging algorithm is *conservative* if it faults at most ``k`` times on any run of consecutive requests to at
    most ``k`` distinct pages, and every conservative algorithm is ``k/(k-h+1)``-competitive against an optimum with
    cache ``h`` (Young, "The k-server dual and loose competitiveness for paging", Algorithmica 1994; Borodin &
    El-Yaniv, *Online Computation and Competitive Analysis*, 1998, ch. 3).  Why this variant is conservative: suppose a
    page ``x`` faults twice within a window ``W``: admitted at ``s`` (bit set, at the back of the ring) and evicted
    at ``e``, both in ``W``.  Let ``c`` be the last time before ``e`` the hand cleared ``x``'s bit (one exists: the bit
    was set at ``s`` and is clear at ``e``); from ``c`` to ``e`` the hand went once round from ``x`` back to ``x``.
    Each page resident at ``e`` was requested in ``[s, e]``: ``x`` at ``s``; a page admitted after ``s`` at its
    admission; any other page was resident at ``s`` and at ``c``, and was passed over after ``c`` (the hand reached
    ``x`` only after it), so its bit was set then (or that step requested it) -- yet its bit had been cleared after
    ``s`` (``x``, admitted behind it, reached the front first), so a request after ``s`` set it again.  With
    the request at ``e`` (for a page not resident), ``[s, e]`` holds ``k + 1`` distinct pages, so ``W`` cannot hold
    at most ``k``: within such a window every page faults at most once, at most ``k`` faults in all.  (The cleared
    variant, :class:`ClockNewUnreferenced`, breaks the first step: ``x`` can be evicted without ever being passed.)
    Checked by ``tests/test_clock.py`` on every window of exhaustively enumerated short traces."""

    name = "Clock-new-referenced"
    admitted_referenced = True
    guarantee = "k/(k-h+1)"
