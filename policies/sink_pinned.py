"""Pinned attention sinks held outside an importance rule (paper Section 8)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvcore.errors import ParameterError
from kvcore.numbers import integer, is_integer

from .registry import register
from .wrapper import Wrapper


@register
@dataclass
class SinkPinned(Wrapper):
    """Keep a small set of attention sinks resident and run the wrapped policy on every other token.

    Rule (paper Section 8: "pin a small sink set outside the importance mechanism"; StreamingLLM's attention sinks,
    Xiao et al., ICLR 2024): the pinned tokens are ``sinks`` when given (token ids known in advance, e.g. measured
    by profiling a head, as FastGen does per head) or else the first ``n_sinks`` tokens; at most ``capacity - 1``
    of them (the smallest ids), so that at least one slot is left.  Pinned tokens are never evicted; the wrapped
    policy gets the remaining capacity and never sees them (they are not admitted to it and their attention is not
    observed by it), so its scores are not spent on them.  The engine still checks the whole cache.  ``policy`` is a
    registered NM policy name, ``params`` its parameters or ``None``.  Deterministic iff the wrapped policy is.
    """

    policy: str = "H2O"
    n_sinks: int = 4
    sinks: list | None = None

    name = "SinkPinned"
    models = frozenset({"nm"})
    citation = "the paper, Section 8; Xiao et al., Efficient streaming language models with attention sinks, ICLR 2024"

    def __post_init__(self) -> None:
        integer(self.n_sinks, f"policy {self.name}: n_sinks", 0)
        if self.sinks is not None and not all(is_integer(i) and i >= 0 for i in self.sinks):
            raise ParameterError(f"policy SinkPinned: sinks = {self.sinks!r} must be token ids (integers >= 0)")
        info = self.wrap()
        if "nm" not in info.models:
            raise ParameterError(f"policy SinkPinned: {info.name} does not run in the NM model")
        self.label = f"{info.name}+sinks{sorted(self.sinks) if self.sinks is not None else self.n_sinks}"

    def reset(self, capacity, rng, model="nm"):
        super().reset(capacity, rng, model)
        wanted = sorted(set(self.sinks)) if self.sinks is not None else list(range(self.n_sinks))
        self.pinned = frozenset(wanted[:capacity - 1])
        self.inner.reset(capacity - len(self.pinned), rng, model)

    def admit(self, t, item, cost):
        self.resident.add(item)
        if item not in self.pinned:
            self.inner.admit(t, item, cost)

    def hit(self, t, item, cost):
        if item not in self.pinned:
            self.inner.hit(t, item, cost)

    def observe(self, t, items, weights):
        keep = ~np.isin(items, list(self.pinned)) if self.pinned else slice(None)
        self.inner.observe(t, items[keep], weights[keep])
