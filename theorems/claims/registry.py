"""The claims registry: one registered claim per claim id of SPEC section 6 (like :mod:`figures.registry`).

A claim is two functions (rules: ``VERDICTS.md``):

* ``compute(ctx) -> Computed``, registered with :func:`claim`: runs the experiment at the sizes the claim declares
  for each profile (``sizes={"ks": ((2, 4, 8), (2, 4, 8, 16, 32))}``: quick value, full value; read from
  ``ctx.sizes``) and returns labelled values, what the source states, and the evidence (test modules, figure files,
  counterexample files);
* ``decide(values, expected) -> Decision``, registered with :func:`decides`: the verdict, the summary, the
  correction and, where the source reads two ways, the verdict under each reading -- from the values alone (they
  reach it as JSON, exactly as the report and the ledger hold them).  Its ``flips`` are edits of the values that
  must change the verdict; ``tests/test_claim_decisions.py`` applies them to the committed values.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..profile import Profile
from ..tables import to_jsonable

VERDICTS = ("holds", "holds-with-correction", "refuted", "not-reproduced", "not-checkable")


@dataclass
class Computed:
    """What ``compute`` returns: the measured values (labelled; no bare tuples), what the source states, and where
    the evidence is."""

    values: dict[str, Any]
    expected: dict[str, Any]
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Decision:
    """What ``decide`` returns.  ``readings`` maps a reading of an ambiguous statement to
    ``{"verdict": ..., "finding": ...}``; the claim's own verdict is the one under the reading it names."""

    verdict: str
    summary: str
    correction: str | None = None
    readings: dict[str, dict[str, str]] | None = None

    def __post_init__(self):
        for v in [self.verdict] + [r["verdict"] for r in (self.readings or {}).values()]:
            if v not in VERDICTS:
                raise ValueError(f"verdict {v!r} is not one of {VERDICTS}")


@dataclass
class ClaimResult:
    verdict: str
    summary: str                      # what the computation found, from computed values
    values: dict[str, Any]            # what was computed (JSON form)
    expected: dict[str, Any]          # what the source states (its words, as numbers where it gives numbers)
    evidence: dict[str, Any] = field(default_factory=dict)   # test module, figure file, counterexample file
    correction: str | None = None
    readings: dict[str, dict[str, str]] | None = None
    models: dict[str, dict[str, Any]] | None = None  # a model-backed claim's reading per model (VERDICTS.md)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


@dataclass
class Context:
    """What a check may use: the profile, its declared sizes at that profile, the output root (laid out like the
    repository) for counterexample files, the figure files built this run, and the figures still to be built from
    input sets being recomputed (``waiting``)."""

    profile: Profile
    out_dir: Path
    figures: dict[str, list[str]] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=dict)
    waiting: frozenset[str] = frozenset()

    def figure_files(self, *fig_ids: str) -> list[str]:
        """The files of the figures that illustrate a claim (built this run), in the order given; a figure in
        ``waiting`` raises :class:`realtrace.InputPending` (its files do not exist yet)."""
        pending = sorted(self.waiting.intersection(fig_ids))
        if pending:
            from realtrace import InputPending

            raise InputPending(f"figure {pending[0]} is asked for before the input sets it is drawn from are "
                               "recomputed")
        return [p for f in fig_ids for p in self.figures.get(f, [])]

    def save_counterexample(self, name: str, trace) -> str:
        """Save ``trace`` as ``paper_check/counterexamples/<name>.npz`` under the output root; returns that path
        (relative to the root, so the report does not depend on where it was written)."""
        from kvcore.trace_files import save_trace

        rel = f"paper_check/counterexamples/{name}.npz"
        (self.out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        save_trace(trace, self.out_dir / rel)
        return rel


Flip = tuple[Callable[[dict], dict], str]          # (edit of the values, the verdict it must produce)


@dataclass
class Claim:
    id: str
    source: str
    claim: str
    compute: Callable[[Context], Computed]
    sizes: dict[str, tuple[Any, Any]] = field(default_factory=dict)   # name -> (quick, full)
    decide: Callable[[dict, dict], Decision] | None = None
    flips: dict[str, Flip] = field(default_factory=dict)

    def sizes_at(self, profile: Profile) -> dict[str, Any]:
        return {name: pair[1 if profile.name == "full" else 0] for name, pair in self.sizes.items()}

    def run(self, ctx: Context, sizes: dict[str, Any] | None = None) -> ClaimResult:
        """Compute and decide at the profile's sizes, or at ``sizes`` (a test's second input: the values must move
        with it, tests/test_claim_inputs.py).  A claim decided on the model's output is computed on each model
        with committed results (:func:`theorems.quality_inputs.claim_models`): the default model's values as they
        are, each other model's under ``values["per_model"][model]``, and one verdict from the readings
        (:func:`decide_models`)."""
        from realtrace import reading_model
        from theorems.quality_inputs import claim_models, model_record

        if self.decide is None:
            raise TypeError(f"claim {self.id!r} has no decide function (register one with @decides)")
        ctx = dataclasses.replace(ctx, sizes=self.sizes_at(ctx.profile) if sizes is None else sizes)
        c = self.compute(ctx)
        values, expected, evidence = to_jsonable(c.values), to_jsonable(c.expected), to_jsonable(c.evidence)
        first, *others = claim_models(self.id) or (None,)
        if others:
            per_model = {}
            for model in others:
                with reading_model(model):  # its evidence is the default model's files: only its values are kept
                    per_model[model] = to_jsonable(self.compute(ctx).values)
            values = dict(values, per_model=per_model)
            evidence = dict(evidence, models={m: model_record(self.id, m) for m in (first, *others)})
        d, readings = decide_models(self, values, expected, first)
        return ClaimResult(d.verdict, d.summary, values, expected, evidence, d.correction, d.readings,
                           None if readings is None else {m: dataclasses.asdict(r) for m, r in readings.items()})


CLAIMS: dict[str, Claim] = {}

# VERDICTS.md, "Several models": the combined verdict is the worst reading, in this order; a not-checkable reading
# (the model's full cache fails the claim's own positive control) takes no part
WORST_FIRST = ("refuted", "not-reproduced", "holds-with-correction", "holds")


def decide_models(c: Claim, values: dict, expected: dict, first: str | None
                  ) -> tuple[Decision, dict[str, Decision] | None]:
    """The verdict of ``c`` from its values: with no ``per_model`` readings, its own decision; otherwise each model's
    decision (``first``'s from the values outside ``per_model``) and one combined by VERDICTS.md's rule -- the worst
    checkable reading; an effect shown on some models only is *model-dependent*, naming them.  Also returns the
    per-model decisions (``None`` for a claim read on one model)."""
    own = {k: v for k, v in values.items() if k != "per_model"}
    if "per_model" not in values:
        return c.decide(own, expected), None
    readings = {first: c.decide(own, expected)}
    readings.update({m: c.decide(v, expected) for m, v in values["per_model"].items()})
    return combine_readings(readings), readings


def combine_readings(readings: dict[str, Decision]) -> Decision:
    """One verdict from per-model decisions (VERDICTS.md, "Several models"); the summary names each model's."""
    checkable = {m: d for m, d in readings.items() if d.verdict != "not-checkable"}
    each = " ".join(f"[{m}: {d.verdict}] {d.summary}" for m, d in readings.items())
    if not checkable:
        return Decision("not-checkable", f"Not checkable on any of the {len(readings)} models (each fails the "
                        f"claim's own positive control or lacks an input). {each}")
    verdict = min((d.verdict for d in checkable.values()), key=WORST_FIRST.index)
    shown = [m for m, d in checkable.items() if d.verdict in ("holds", "holds-with-correction")]
    apart = [m for m, d in checkable.items() if d.verdict == verdict]
    if verdict in ("refuted", "not-reproduced") and shown:
        how = (f"model-dependent: holds on {', '.join(shown)}, {verdict} on {', '.join(apart)}"
               if verdict == "not-reproduced" else
               f"refuted on {', '.join(apart)} (its finding below names the counterexample), "
               f"holds on {', '.join(shown)}")
    elif len(set(d.verdict for d in checkable.values())) > 1:
        how = f"{verdict} on {', '.join(apart)}"
    else:
        how = f"{verdict} on every model measured ({', '.join(checkable)})"
    left = [m for m in readings if m not in checkable]
    if left:
        how += f"; not checkable on {', '.join(left)}, which takes no part"
    corrections = [f"[{m}] {d.correction}" for m, d in checkable.items() if d.correction]
    named = {f"{name} [{m}]": r for m, d in readings.items() for name, r in (d.readings or {}).items()}
    return Decision(verdict, f"Combined over {len(readings)} models by VERDICTS.md's rule: {how}. {each}",
                    " ".join(corrections) or None, named or None)


def claim(claim_id: str, source: str, text: str, sizes: dict[str, tuple[Any, Any]] | None = None):
    """Decorator registering ``compute(ctx) -> Computed`` under a fixed SPEC id, with its sizes per profile."""

    def deco(fn: Callable[[Context], Computed]):
        if claim_id in CLAIMS:
            raise ValueError(f"claim {claim_id!r} registered twice")
        for name, pair in (sizes or {}).items():
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError(f"claim {claim_id!r}: size {name!r} must be a (quick, full) pair")
        CLAIMS[claim_id] = Claim(claim_id, source, text, fn, dict(sizes or {}))
        return fn

    return deco


def decides(claim_id: str, flips: dict[str, Flip]):
    """Decorator registering ``decide(values, expected) -> Decision`` for an already registered claim, with at least
    one flip: ``{"what changes": (edit, verdict)}``, where ``edit(values) -> values`` is applied to a deep copy."""

    def deco(fn: Callable[[dict, dict], Decision]):
        c = CLAIMS.get(claim_id)
        if c is None:
            raise ValueError(f"decides({claim_id!r}): register its compute with @claim first")
        if c.decide is not None:
            raise ValueError(f"claim {claim_id!r} has two decide functions")
        if not flips:
            raise ValueError(f"claim {claim_id!r}: a decision needs at least one flip (VERDICTS.md, rule 2)")
        c.decide, c.flips = fn, dict(flips)
        return fn

    return deco


def edit(values: dict, path: str, new: Any) -> dict:
    """A copy of ``values`` with the entry at ``path`` (keys joined by ``/``; list indices as numbers) replaced by
    ``new``, or by ``new(old)`` when ``new`` is callable -- the building block of flips."""
    out = copy.deepcopy(values)
    *head, last = path.split("/")
    node = out
    for key in head:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key = int(last) if isinstance(node, list) else last
    node[key] = new(node[key]) if callable(new) else new
    return out


def fmt(x: Any, digits: int = 4) -> str:
    """A number for a sentence: ``g`` format with ``digits`` significant digits; infinities as 'inf'."""
    if isinstance(x, str):
        return x
    return f"{float(x):.{digits}g}"


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
