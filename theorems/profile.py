"""Run profiles: which size of every check runs.  ``quick`` is the default of ``python -m paper_check``; ``full``
uses larger k and longer sequences.  The sizes themselves are declared where they are used -- each claim
(:func:`theorems.claims.registry.claim`) and each figure overlay (:data:`theorems.results.overlays.SIZES`) gives a
(quick, full) value per size -- and the report prints them."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    description: str

    def as_dict(self) -> dict:
        return asdict(self)


QUICK = Profile("quick", "the default: every claim and figure at its quick sizes (about a minute on 2 cores)")
FULL = Profile("full", "larger k and longer sequences: every claim and figure at its full sizes")
PROFILES = {p.name: p for p in (QUICK, FULL)}
