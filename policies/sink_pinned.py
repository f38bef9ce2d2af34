"""Pinned attention sinks held outside an importance rule (paper Section 8)."""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError

from .decay import check_count
from .registry import register
from .wrapper import Wrapper


@register
@dataclass
class SinkPinned(Wrapper):
    """Keep the first ``n_sinks`` tokens resident and run the wrapped policy on every other token.

    Rule (paper Section 8: "pin a small sink set outside the importance mechanism"; StreamingLLM's attention sinks,
    Xiao et al., ICLR 2024): tokens ``0 .. s-1`` are never evicted, with ``s = min(n_sinks, capacity - 1)`` so that
    at least one slot is left; the wrapped policy gets capacity ``capacity - s`` and never sees the sinks (they are
    not admitted to it and their attention is not observed by it), so its scores are not spent on them.  The engine
    still checks the whole cache.  ``policy`` is a registered NM policy name, ``params`` its parameters or ``None``.
    Deterministic iff the wrapped policy is.
    """

    policy: str = "H2O"
    n_sinks: int = 4
    params: dict | None = None

    name = "SinkPinned"
    models = frozenset({"nm"})
    citation = "the paper, Section 8; Xiao et al., Efficient streaming language models with attention sinks, ICLR 2024"

    def __post_init__(self) -> None:
        check_count(self.name, "n_sinks", self.n_sinks)
        info = self.wrap()
        if "nm" not in info.models:
            raise ParameterError(f"policy SinkPinned: {info.name} does not run in the NM model")
        self.label = f"{info.name}+sinks{self.n_sinks}"

    def reset(self, capacity, rng, model="nm"):
        super().reset(capacity, rng, model)
        self.pinned = min(self.n_sinks, capacity - 1)
        self.inner.reset(capacity - self.pinned, rng, model)

    def admit(self, t, item, cost):
        self.resident.add(item)
        if item >= self.pinned:
            self.inner.admit(t, item, cost)

    def hit(self, t, item, cost):
        if item >= self.pinned:
            self.inner.hit(t, item, cost)

    def observe(self, t, items, weights):
        keep = items >= self.pinned
        self.inner.observe(t, items[keep], weights[keep])
