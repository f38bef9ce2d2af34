"""The claims catalogue of SPEC section 6: one registered check per claim id, each returning a verdict with evidence.

A check recomputes the quantity the paper states in words (never copies it as the expected value) and compares.
Verdicts:
    ``holds``                  the computation agrees with the claim as stated;
    ``holds-with-correction``  it agrees once a stated correction is made (rounding, units, a premise, a
                               construction that needs repair) — the correction is part of the result;
    ``refuted``                a counterexample or computation contradicts it (the counterexample is saved);
    ``not-checkable``          a named input is missing.
Checks register themselves with :func:`claim`; the modules below are imported at the end of this file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..profile import Profile
from ..verify import to_jsonable

VERDICTS = ("holds", "holds-with-correction", "refuted", "not-checkable")


@dataclass
class ClaimResult:
    verdict: str
    summary: str                      # one sentence: what the computation found
    values: dict[str, Any]            # what was computed
    expected: dict[str, Any]          # what the source states (its words, as numbers where it gives numbers)
    evidence: dict[str, Any] = field(default_factory=dict)   # test module, figure file, counterexample file
    correction: str | None = None

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


@dataclass
class Context:
    """What a check may use: the profile, a directory for counterexample files, the figure files built this run."""

    profile: Profile
    out_dir: Path
    figures: dict[str, list[str]] = field(default_factory=dict)

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


CLAIMS: dict[str, Claim] = {}


def claim(claim_id: str, source: str, text: str):
    """Decorator registering ``check(ctx) -> ClaimResult`` under a fixed SPEC id."""

    def deco(fn: Callable[[Context], ClaimResult]):
        if claim_id in CLAIMS:
            raise ValueError(f"claim {claim_id!r} registered twice")
        CLAIMS[claim_id] = Claim(claim_id, source, text, fn)
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

# the checks register themselves on import
from . import attention, blocks, classic, numbers, practice  # noqa: E402,F401

_order = {cid: n for n, cid in enumerate(SPEC_IDS)}
CLAIMS = dict(sorted(CLAIMS.items(), key=lambda kv: _order.get(kv[0], len(_order))))
