"""R-LRU-H: keep the recent heavy sets, fill the rest by recency (the paper's Theorem 4 policy)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from itertools import count

from kvcore.numbers import integer, real

from .base import Policy
from .heap import KeyedMinHeap
from .registry import register


@register
@dataclass
class RLRUH(Policy):
    """Retain the union of the heavy sets ``H_s(rho*tau)`` of the last ``W`` rows; fill the rest by recency.

    Rule (paper Section 7, Theorem 4): ``H_s(x) = {i : a[s, i] >= x}`` over the observed (resident) entries of row
    ``s``.  At step ``t`` the protected union is ``U_t = {i : a[s, i] >= rho*tau for some observed row s in
    [t-W, t-1]}`` (the ``W`` rows before the drop; row ``t`` does not exist yet when the drop is made).  The victim
    is the least recently attended resident token outside ``U_t``, where "attended" means arrival or any observed
    positive weight (ties cannot occur: every event gets its own sequence number, in the row's id order).

    When the union does not fit: the union the policy can see is built from observed rows, i.e. from tokens that
    were resident, and it is never evicted, so it never exceeds ``k``; the arriving token is never in it (it has no
    row yet), so there is always a victim outside it.  When the observed union fills all ``k`` slots, the arriving
    token is the victim: no new token enters until a union member goes ``W`` rows without a heavy weight.  A token
    dropped while light that turns heavy later is lost for good (no refetch).  The paper's persistence and budget
    assumptions do NOT exclude this (a 6-row counterexample is in ``theorems/test_thm4_persistence.py``); Theorem 4
    holds under the chain premise stated there (every heavy entry is reached by an unbroken chain of warm steps from
    the token's arrival, with gaps of at most ``W``).

    Model: NM.  Cost: ``O(nnz log k)`` per step (a recency heap over non-union tokens, an ordered map of union
    members by last heavy row, oldest first, so expiry pops from the front), ``O(log k)`` per eviction.  Checked against hand-worked NM traces and, on traces
    satisfying the budget assumption, against Theorem 4's bound ``regret <= sum_t tail mass``
    (``tests/test_attention_policies.py``).
    """

    rho: float = 0.5
    tau: float = 0.05
    W: int = 32

    name = "R-LRU-H"
    signal = "hybrid"
    models = frozenset({"nm"})
    citation = "the paper, Section 7 (Theorem 4)"

    def __post_init__(self) -> None:
        real(self.rho, f"policy {self.name}: rho", 0.0)
        real(self.tau, f"policy {self.name}: tau", 0.0)
        integer(self.W, f"policy {self.name}: W", 1)

    def on_reset(self) -> None:
        self._clock = count()
        self._light = KeyedMinHeap()  # resident tokens outside the union, keyed by last attention event
        self._heavy: OrderedDict[int, int] = OrderedDict()  # union members -> last heavy row, oldest first
        self._last_seen: dict[int, int] = {}

    def on_admit(self, t, item, cost):
        seq = next(self._clock)
        self._last_seen[item] = seq
        self._light.set(item, seq)

    def on_observe(self, t, items, weights):
        cut = self.rho * self.tau
        light, heavy, seen, clock = self._light, self._heavy, self._last_seen, self._clock
        for i, a in zip(items.tolist(), weights.tolist()):
            if a <= 0.0:
                continue
            seen[i] = seq = next(clock)
            if a >= cut:
                light.remove(i)
                heavy[i] = t
                heavy.move_to_end(i)
            elif i in light:
                light.set(i, seq)

    def _expire(self, t: int) -> None:
        heavy = self._heavy
        while heavy:
            i, s = next(iter(heavy.items()))
            if s >= t - self.W:
                return
            del heavy[i]
            self._light.set(i, self._last_seen[i])

    def victim(self, t, protected):
        self._expire(t)
        return self._light.min()

    def on_evict(self, t, item):
        self._light.remove(item)
        self._heavy.pop(item, None)
        del self._last_seen[item]
