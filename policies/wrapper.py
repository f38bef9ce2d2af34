"""The shared base of policies that wrap another registered policy (``Persistent``, ``SinkPinned``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError

from .base import Policy
from .registry import PolicyInfo, get, make


@dataclass
class Wrapper(Policy):
    """Holds ``self.inner``, built from a registered name (``policy``) and its parameters (``params``, a dict or
    ``None`` for its defaults); deterministic iff the wrapped policy is.  Evictions are the wrapped policy's; hits
    and attention are forwarded to it unchanged unless a subclass filters them."""

    policy: str = ""
    params: dict | None = None

    def wrap(self) -> PolicyInfo:
        """Validate ``policy`` and ``params`` and build the wrapped instance; returns its registry entry."""
        if not isinstance(self.policy, str):
            raise ParameterError(f"policy {self.name}: policy = {self.policy!r}: must be a registered policy name")
        if self.params is not None and not isinstance(self.params, dict):
            raise ParameterError(f"policy {self.name}: params = {self.params!r}: must be a dict or None")
        info = get(self.policy)
        self.inner = make(info.name, **(self.params or {}))
        self.deterministic = info.deterministic
        return info

    def hit(self, t, item, cost):
        self.inner.hit(t, item, cost)

    def evict(self, t, need, protected):
        victims = self.inner.evict(t, need, protected)
        self.resident.difference_update(victims)
        return victims

    def observe(self, t, items, weights):
        self.inner.observe(t, items, weights)
