"""Persistent policy state: keep an evicted item's identity-keyed state and restore it when the item comes back.

The figure page (seed 002) reports that letting a block's identity key and score survive eviction, instead of
resetting them on re-admission, is the largest effect in its block study.  Keeping bookkeeping for items that have
left the cache is established practice: LRU-K keeps the reference history of evicted pages for a "retained
information period" (O'Neil, O'Neil & Weikum, SIGMOD 1993), and ARC keeps ghost lists of evicted keys (Megiddo &
Modha, FAST 2003).  This wrapper applies the idea to any scoring policy.

Rule: the wrapped policy must declare ``persistable = True`` (:mod:`policies.base`).  When it evicts an item the
wrapper stores ``export_state(item)`` (taken just before the policy's ``on_evict`` forgets it) under the item's id;
when the item is admitted again the wrapper calls ``import_state(t, item, state)`` just after the admission and
discards the stored copy.  What the state means and how it is merged is the wrapped policy's own rule (LFU adds the
old count; EMA-Block restores its time-decayed score).  Nothing else changes, so a run in which no evicted item is
ever requested again is identical to the plain policy's run; the first difference can only come after the first
re-admission.

Cost: ``O(1)`` per eviction and admission on top of the wrapped policy; memory grows with the number of distinct
items ever evicted (the state lives outside the cache budget, e.g. in host memory, as the page assumes).

Parameters (JSON-friendly): ``policy`` is a registered name and ``params`` a dict of its parameters or ``None``,
e.g. ``make("Persistent", policy="LFU")`` or ``make("Persistent", policy="EMA-Block", params={"alpha": 0.01})``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError

from .registry import register
from .wrapper import Wrapper


@register
@dataclass
class Persistent(Wrapper):
    """Wrap a persistable policy so that an evicted item's state is restored when the item is re-admitted.

    ``policy``: registered name of the wrapped policy (must be persistable); ``params``: its parameters (a dict) or
    ``None`` for its defaults.  Rule and prior art (LRU-K's retained information, ARC's ghost lists): module docstring.
    """

    policy: str = "EMA-Block"

    name = "Persistent"
    models = frozenset({"rm"})
    citation = ("O'Neil, O'Neil & Weikum: The LRU-K page replacement algorithm for database disk buffering, "
                "SIGMOD 1993 (retained information of evicted pages)")

    def __post_init__(self) -> None:
        info = self.wrap()
        if not info.cls.persistable:
            raise ParameterError(f"policy Persistent: cannot wrap {info.name!r}: it keeps no identity-keyed state "
                                 f"(persistable = False)")
        args = "".join(f", {k}={v}" for k, v in sorted((self.params or {}).items()))
        self.label = f"Persistent({info.name}{args})"

    def reset(self, capacity, rng, model="rm"):
        super().reset(capacity, rng, model)
        self.saved: dict[int, object] = {}
        self.inner.reset(capacity, rng, model)
        # Policies drop victims through ``drop`` (base.victims, or their own ``victims`` override), which calls
        # ``on_evict``; intercepting it on the instance is the one place that sees every victim before it is forgotten.
        self.inner.drop = self._drop_keeping_state

    def _drop_keeping_state(self, t: int, item: int) -> None:
        inner = self.inner
        self.saved[item] = inner.export_state(item)
        type(inner).drop(inner, t, item)

    def admit(self, t, item, cost):
        self.resident.add(item)
        self.inner.admit(t, item, cost)
        if item in self.saved:
            self.inner.import_state(t, item, self.saved.pop(item))
