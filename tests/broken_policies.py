"""Deliberately broken policies for the engine-contract tests (never registered, so the matrix does not see them).

Each breaks exactly one clause of the contract in ``kvcore.engine``; otherwise it behaves like FIFO, so the break
happens at the first step that needs an eviction, which the tests name.
"""

from __future__ import annotations

from policies.base import Policy
from policies.fifo import FIFO


class EvictsNonResident(FIFO):
    """Returns an item that was never admitted."""

    name = "EvictsNonResident"

    def victims(self, t, need, protected):
        return [10**6]


class EvictsProtected(FIFO):
    """Returns an item requested at this step (the first protected resident one) when there is one."""

    name = "EvictsProtected"

    def victims(self, t, need, protected):
        hit = sorted(i for i in protected if i in self.resident)
        return hit[:1] if hit else super().victims(t, need, protected)


class TooFewVictims(FIFO):
    """Returns no victim although one is needed."""

    name = "TooFewVictims"

    def victims(self, t, need, protected):
        return []


class EvictsTwice(FIFO):
    """Returns its FIFO victim twice."""

    name = "EvictsTwice"

    def victims(self, t, need, protected):
        v = super().victims(t, need, protected)
        return v + v[:1]


class NonIntVictim(FIFO):
    """Returns the victim as a string."""

    name = "NonIntVictim"

    def victims(self, t, need, protected):
        return [str(v) for v in super().victims(t, need, protected)]


class FloatVictim(FIFO):
    """Returns the victim as a float (an id must not be coerced)."""

    name = "FloatVictim"

    def victims(self, t, need, protected):
        return [float(v) for v in super().victims(t, need, protected)]


class ForgetsEvictions(Policy):
    """NM: keeps tokens it evicted in its own order and drops the oldest again, i.e. it acts as if an evicted token
    were still cached (the only way a policy could try to use a token it has lost)."""

    name = "ForgetsEvictions"
    models = frozenset({"nm"})

    def on_reset(self):
        self._seen: list[int] = []

    def on_admit(self, t, item, cost):
        self._seen.append(item)

    def victims(self, t, need, protected):
        return self._seen[:need]


class LacksObserve:
    """Has four of the five interface methods; ``observe`` is missing."""

    name = "LacksObserve"

    def reset(self, capacity, rng):
        pass

    def admit(self, t, item, cost):
        pass

    def hit(self, t, item, cost):
        pass

    def evict(self, t, need, protected):
        return []


from policies.marking import Marking  # noqa: E402  (the broken marking policy below)
from policies.random_evict import IndexedSet  # noqa: E402


class MarkingLowestUnmarked(Marking):
    """Marking that always evicts the lowest unmarked id instead of a uniform one (deterministic choice)."""

    name = "MarkingLowestUnmarked"

    def victim(self, t, protected):
        if not self._unmarked:   # a new phase, as in Marking
            self._unmarked = IndexedSet(sorted(i for i in self.resident if self._last_request[i] != t))
        return min(i for i in self.resident if i in self._unmarked and i not in protected)
