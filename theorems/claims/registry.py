"""The claims registry: one registered check per claim id of SPEC section 6 (like :mod:`figures.registry`).

A check recomputes the quantity the source states in words (never copies it as the expected value) and returns a
:class:`ClaimResult`.  Register it with :func:`claim`, declaring every size it uses for each profile
(``sizes={"ks": ((2, 4, 8), (2, 4, 8, 16, 32))}``: quick value, full value); the check reads them from
``ctx.sizes`` and the report prints them, so no size hides in the code.  Verdicts: see :data:`VERDICTS` and the
rules in ``VERDICTS.md``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..profile import Profile
from ..tables import to_jsonable

VERDICTS = ("holds", "holds-with-correction", "refuted", "not-reproduced", "not-checkable")


@dataclass
class ClaimResult:
    verdict: str
    summary: str                      # what the computation found, from computed values
    values: dict[str, Any]            # what was computed
    expected: dict[str, Any]          # what the source states (its words, as numbers where it gives numbers)
    evidence: dict[str, Any] = field(default_factory=dict)   # test module, figure file, counterexample file
    correction: str | None = None

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


@dataclass
class Context:
    """What a check may use: the profile, its declared sizes at that profile, a directory for counterexample files,
    and the figure files built this run."""

    profile: Profile
    out_dir: Path
    figures: dict[str, list[str]] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return self.profile.name == "full"

    def save_counterexample(self, name: str, trace) -> str:
        from kvcore.traces import save_trace

        d = self.out_dir / "counterexamples"
        d.mkdir(parents=True, exist_ok=True)
        save_trace(trace, d / f"{name}.npz")
        # relative to the report's directory, so the report does not depend on where it was written
        return f"counterexamples/{name}.npz"


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    claim: str
    check: Callable[[Context], ClaimResult]
    sizes: dict[str, tuple[Any, Any]] = field(default_factory=dict)   # name -> (quick, full)

    def sizes_at(self, profile: Profile) -> dict[str, Any]:
        return {name: pair[1 if profile.name == "full" else 0] for name, pair in self.sizes.items()}

    def run(self, ctx: Context) -> ClaimResult:
        return self.check(dataclasses.replace(ctx, sizes=self.sizes_at(ctx.profile)))


CLAIMS: dict[str, Claim] = {}


def claim(claim_id: str, source: str, text: str, sizes: dict[str, tuple[Any, Any]] | None = None):
    """Decorator registering ``check(ctx) -> ClaimResult`` under a fixed SPEC id, with its sizes per profile."""

    def deco(fn: Callable[[Context], ClaimResult]):
        if claim_id in CLAIMS:
            raise ValueError(f"claim {claim_id!r} registered twice")
        for name, pair in (sizes or {}).items():
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError(f"claim {claim_id!r}: size {name!r} must be a (quick, full) pair")
        CLAIMS[claim_id] = Claim(claim_id, source, text, fn, dict(sizes or {}))
        return fn

    return deco


def dumps(x: Any) -> str:
    return json.dumps(to_jsonable(x), indent=2, sort_keys=True)


# The fixed ids of SPEC section 6, in the catalogue's order (the report's order); claims found beyond the catalogue
# follow them in registration order.
SPEC_IDS = (
    "eq2-kv-bytes", "eq3-throughput", "eq6-det-lower-bound", "eq8-landlord", "eq9-randomized", "lru-phase-argument",
    "lfu-unbounded", "thm2-acc-unbounded", "lemma1-decay", "topic-shift", "thm3-gda", "gda-trace", "gda-unification",
    "gda-cost", "thm4-persistence", "thm4-threshold", "nm-belady-analog", "rm-belady", "random-tiebreak",
    "access-graph", "sinks-pinning", "adaptive-budget", "default-policy", "gda-validation", "blk-bytes",
    "blk-ema-table", "blk-half-life", "blk-recency-decay", "blk-priority-examples", "blk-decision-matrix",
    "blk-alpha-interior-optimum", "blk-persistent-state",
)


def in_report_order(claims: dict[str, Claim]) -> dict[str, Claim]:
    order = {cid: n for n, cid in enumerate(SPEC_IDS)}
    return dict(sorted(claims.items(), key=lambda kv: order.get(kv[0], len(order))))
