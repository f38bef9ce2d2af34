"""The shared policy base: residency and bookkeeping, so that a concrete policy only decides which item goes.

A concrete policy is a ``@dataclass`` subclass whose fields are its parameters (with defaults) and whose class
variables are its metadata (``name``, ``deterministic``, ``models``, ``citation``).  It keeps its own ordering state,
created in :meth:`on_reset`, updated by the hooks, and implements :meth:`victim`.  The engine
(:mod:`kvcore.engine`) calls the five interface methods; this base turns them into hooks.

Hooks a subclass may override (all default to doing nothing):

``on_reset()``                       new run; ``self.k``, ``self.rng``, ``self.model``, ``self.resident`` are set
``on_admit(t, item, cost)``          item became resident (RM fetch, NM arrival)
``on_hit(t, item, cost)``            item requested while resident (RM)
``on_evict(t, item)``                item left the cache (after :meth:`victim` chose it, or a ``victims`` override)
``on_observe(t, items, weights)``    attention on resident items at step t

and the one required method ``victim(t, protected) -> item``: a resident item not in ``protected``.  A policy that
evicts several items at once (FWF) overrides ``victims(t, need, protected)`` and calls :meth:`drop` for each.

Identity-keyed state (the figure page's persistent policy state): a scoring policy that keeps per-item state (a
count, a score, a credit) sets ``persistable = True`` and implements :meth:`export_state` (called just before
``on_evict``, returns the item's state) and :meth:`import_state` (called just after ``on_admit`` when the item comes
back, restores it).  ``policies.persistent_state`` wraps any such policy.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from kvcore.engine import policy_name
from kvcore.errors import ContractViolation
from kvcore.numbers import is_integer


class Policy:
    """Base class of every registered policy (see module docstring)."""

    name: ClassVar[str] = ""
    deterministic: ClassVar[bool] = True
    models: ClassVar[frozenset[str]] = frozenset({"rm"})
    citation: ClassVar[str] = ""
    persistable: ClassVar[bool] = False
    # What the policy promises (read by the theorem modules and the fuzzer, never a hand list): the competitive bound
    # it is known to meet at its default parameters -- a key of kvcore.formulas.GUARANTEES ("k/(k-h+1)", "2H_k-1",
    # "H_k") or None -- whether that bound holds with per-item fault costs (weighted caching), and whether the
    # policy is lazy: it evicts only as many items as a fault needs, so its cache stays full (FWF is not).
    guarantee: ClassVar[str | None] = None
    weighted: ClassVar[bool] = False
    lazy: ClassVar[bool] = True
    # What the eviction order is computed from, in the paper's taxonomy (Section 2.4): one of SIGNALS.
    signal: ClassVar[str | None] = None

    k: int
    rng: np.random.Generator
    model: str
    resident: set[int]

    # -- engine interface -------------------------------------------------------------------------------------------
    def reset(self, capacity: int, rng: np.random.Generator, model: str = "rm") -> None:
        self.k = capacity
        self.rng = rng
        self.model = model
        self.resident = set()
        self.on_reset()

    def admit(self, t: int, item: int, cost: float) -> None:
        self.resident.add(item)
        self.on_admit(t, item, cost)

    def hit(self, t: int, item: int, cost: float) -> None:
        self.on_hit(t, item, cost)

    def evict(self, t: int, need: int, protected: frozenset) -> list[int]:
        self._evicting = (protected, set())  # what drop() checks each victim against (see _check_victim)
        try:
            return self.victims(t, need, protected)
        finally:
            self._evicting = None

    def observe(self, t: int, items: np.ndarray, weights: np.ndarray) -> None:
        self.on_observe(t, items, weights)

    # -- for subclasses ----------------------------------------------------------------------------------------------
    def victims(self, t: int, need: int, protected: frozenset) -> list[int]:
        chosen = []
        for _ in range(need):
            v = self.victim(t, protected)
            self.drop(t, v)
            chosen.append(v)
        return chosen

    def drop(self, t: int, item: int) -> None:
        self._check_victim(t, item)
        self.resident.discard(item)
        self.on_evict(t, item)

    def _check_victim(self, t: int, item: int) -> None:
        """The engine's victim contract, checked here too so that a bad choice is reported before the policy's own
        ``on_evict`` (or ``export_state``) sees an item it does not hold: an integer id, resident, not chosen twice
        and, during :meth:`evict`, not requested at this step.  Raises ContractViolation naming policy, step, item."""
        name = policy_name(self)
        if not is_integer(item):
            raise ContractViolation(name, t, f"victim {item!r} is not an item id")
        protected, dropped = getattr(self, "_evicting", None) or (frozenset(), None)
        if dropped is not None and item in dropped:
            raise ContractViolation(name, t, "evicts the same item twice", item)
        if item not in self.resident:
            raise ContractViolation(name, t, "evicts an item that is not resident", item)
        if item in protected:
            raise ContractViolation(name, t, "evicts an item requested at this step", item)
        if dropped is not None:
            dropped.add(item)

    def victim(self, t: int, protected: frozenset) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement victim()")

    def on_reset(self) -> None:
        pass

    def on_admit(self, t: int, item: int, cost: float) -> None:
        pass

    def on_hit(self, t: int, item: int, cost: float) -> None:
        pass

    def on_evict(self, t: int, item: int) -> None:
        pass

    def on_observe(self, t: int, items: np.ndarray, weights: np.ndarray) -> None:
        pass

    def params_fixed_at(self, capacity: int) -> dict:
        """Parameters under which this policy, whatever capacity it is given, sizes its internal parts (a recent
        window, an importance share) as it does at ``capacity`` with its current parameters; ``{}`` when none of
        its rules depends on the capacity.  A wrapper that hands the policy part of the cache (``SinkPinned``) uses
        it to separate the effect of what it pins from the effect of the smaller capacity."""
        return {}

    def export_state(self, item: int) -> object:
        raise NotImplementedError(f"{type(self).__name__} keeps no per-item state to persist")

    def import_state(self, t: int, item: int, state: object) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no per-item state to persist")
