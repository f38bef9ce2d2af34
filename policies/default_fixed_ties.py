"""The Section 10 default with its tie-break fixed: what randomizing the ties buys is measured against it."""

from __future__ import annotations

from dataclasses import dataclass

from .default_policy import DefaultPolicy
from .registry import register


@register
@dataclass
class DefaultFixedTies(DefaultPolicy):
    """The Section 10 default, but ties among equal least scores go to the first candidate of its internal list.

    Same parameters, floor, sinks and decayed score as ``Default``; only :meth:`pick_tie` differs, so the pair
    isolates the paper's claim that randomizing the tie-break moves the worst case toward ``H_k`` (Sections 4
    and 10).  Deterministic.
    """

    name = "Default-FixedTies"
    deterministic = True
    citation = "the paper, Section 10 (the default policy) with a deterministic tie-break, as a control"

    def pick_tie(self, ties: list[int]) -> int:
        return ties[0]
