"""Landlord (Young's file-caching generalization of Greedy-Dual), unit sizes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import count

from kvcore.errors import ParameterError

from .base import Policy
from .heap import KeyedMinHeap
from .registry import register


@register
@dataclass
class Landlord(Policy):
    """Credit per resident item; rent is charged to all until one is broke; evict a zero-credit item.

    Rule (Young, On-line file caching, SODA 1998 / Algorithmica 2002, Sec. 2; the paper's Eq. 7, unit sizes):

    * admission at cost ``w``: credit ``c <- w``;
    * hit at cost ``w``: ``c <- c + beta * (w - c)`` (``beta = 1``: full reset to ``w``; ``beta = 0``: no change);
    * eviction: ``delta = min c`` over the resident unprotected items, every resident credit drops by ``delta``,
      and a zero-credit unprotected item leaves.  Protected items (requested at this step) pay the rent too; their
      credit is floored at 0.

    Lazy form: the policy keeps the cumulative rent ``L`` and stores ``key = L + c``; paying rent is ``L <- min key``
    (``O(1)``), the credit is ``max(0, key - L)``, and the victim is the heap minimum (``O(log k)``).

    Tie rule among zero-credit items: least recently used (last admission or hit; heap key ``(L + c, last use)``).
    With it, unit-cost Landlord with ``beta = 1`` is exactly LRU, since credits then order items by last use.
    Young's ``k/(k-h+1)`` bound holds for any tie rule and any reset in ``[c, w]`` (``beta`` in ``[0, 1]``).
    When the per-request cost of a hit is below the current credit (costs may vary between requests of one item)
    the same formula moves the credit down toward that cost.

    Model: RM only (NM has no fault costs; the attention-weighted Landlord is the paper's GD-A, Section 6).
    Persistable: the exported state is the credit at eviction and :meth:`import_state` restores
    ``c <- max(c, stored)``, which keeps the credit within Landlord's range.  Landlord itself only evicts items of
    zero credit, so the stored credit is 0 and restoring it changes nothing: Landlord has no score to persist.
    """

    beta: float = 1.0

    name = "Landlord"
    signal = "cost"
    models = frozenset({"rm"})
    citation = "Young, On-line file caching, SODA 1998; Algorithmica 33, 2002"
    guarantee = "k/(k-h+1)"
    weighted = True
    persistable = True

    def __post_init__(self):
        if not (isinstance(self.beta, (int, float)) and math.isfinite(self.beta) and 0.0 <= self.beta <= 1.0):
            raise ParameterError(f"Landlord: beta = {self.beta!r} must be a number in [0, 1]")

    def on_reset(self) -> None:
        self._heap = KeyedMinHeap()
        self._rent = 0.0
        self._clock = count()

    def credit(self, item: int) -> float:
        """Current credit of a resident item (for tests and figures)."""
        return max(0.0, self._heap.key(item)[0] - self._rent)

    def _set_credit(self, item: int, c: float) -> None:
        self._heap.set(item, (self._rent + c, next(self._clock)))

    def on_admit(self, t, item, cost):
        self._set_credit(item, cost)

    def on_hit(self, t, item, cost):
        c = self.credit(item)
        self._set_credit(item, c + self.beta * (cost - c))

    def on_evict(self, t, item):
        self._heap.remove(item)

    def victim(self, t, protected):
        item = self._heap.min(protected)
        self._rent = max(self._rent, self._heap.key(item)[0])
        heap = self._heap
        for p in protected:
            # a protected item that could not pay the rent is floored at zero credit; re-keying it to exactly L
            # keeps every zero-credit item at the same key, so the LRU tie rule sees them all
            if p in heap and heap.key(p)[0] < self._rent:
                heap.set(p, (self._rent, heap.key(p)[1]))
        return item

    def export_state(self, item):
        return self.credit(item)

    def import_state(self, t, item, state):
        self._set_credit(item, max(self.credit(item), float(state)))
