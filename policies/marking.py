"""The randomized marking algorithm."""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError

from .base import Policy
from .random_evict import IndexedSet
from .registry import register


@register
@dataclass
class Marking(Policy):
    """Mark on request; evict a uniformly random unmarked item; when none is left, start a new phase.

    Rule (Fiat, Karp, Luby, McGeoch, Sleator & Young, J. Algorithms 1991, Sec. 2): every requested item is marked
    (a hit marks it, an admitted item enters marked).  When room is needed and no resident unprotected item is
    unmarked, a new phase starts at this step: every resident item is unmarked except those already requested at
    this step (they are the new phase's first requests).  The victim is uniform among the unmarked items, drawn with
    the run's seeded generator.  Expected cost ``<= 2 H_k`` times optimal (the paper's constant; ``2H_k - 1`` is the
    sharper known bound).

    Model: RM and NM.  In NM "requested" means what the paper's Section 4 marking argument says: a token is marked
    when it arrives and whenever it is observed with attention ``>= threshold``; the arriving token is therefore
    never the victim.  In RM only requests mark: the attention rows an RM run built from attention also feeds are
    ignored, since a mark that is not a request would break the phase structure the ``2H_k`` bound rests on.
    """

    threshold: float = 0.1

    name = "Marking"
    signal = "recency"
    deterministic = False
    models = frozenset({"rm", "nm"})
    citation = ("Fiat, Karp, Luby, McGeoch, Sleator & Young, Competitive paging algorithms, "
                "J. Algorithms 12, 1991")
    guarantee = "2H_k-1"

    def __post_init__(self):
        if not (0.0 <= self.threshold <= 1.0):
            raise ParameterError(f"Marking: threshold = {self.threshold!r} must be in [0, 1]")

    def on_reset(self) -> None:
        self._unmarked = IndexedSet()
        self._last_request: dict[int, int] = {}

    def _mark(self, t: int, item: int) -> None:
        self._unmarked.discard(item)
        self._last_request[item] = t

    def on_admit(self, t, item, cost):
        self._mark(t, item)

    def on_hit(self, t, item, cost):
        self._mark(t, item)

    def on_observe(self, t, items, weights):
        if self.model != "nm":
            return
        for i in items[weights >= self.threshold].tolist():
            self._mark(t, i)

    def on_evict(self, t, item):
        self._unmarked.discard(item)
        del self._last_request[item]

    def victim(self, t, protected):
        # requested items are marked, so no protected item is ever unmarked: an empty pool means a new phase
        if not self._unmarked:
            # sorted so that the new phase's sampling order does not depend on set iteration order
            self._unmarked = IndexedSet(sorted(i for i in self.resident if self._last_request[i] != t))
        return self._unmarked.sample(self.rng, protected)
