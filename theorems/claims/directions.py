"""The attention-mass surrogate's failure directions (paper §3 "A word on why the attention-mass regret of Equation
4 is the right surrogate...", §9), decided on the committed measurement of two exact optima on the model's heads.
Tables: :mod:`theorems.results.directions`; rules: ``VERDICTS.md``."""

from __future__ import annotations

import shutil

from kvcore.atomic import replacing
from realtrace import DATA_MODEL, current_model, input_dir
from theorems.results.directions import DIRECTIONS_DIR, HEAD_FILES, committed_directions, planted_control
from theorems.tables import cached

from .registry import Computed, Context, Decision, claim, decides, edit, fmt

TEST = "theorems/test_surrogate_directions.py"
MISSING = ("the committed measurement of both optima on the model's heads (realtrace/data/value_directions: "
           "`python -m pytest theorems/test_surrogate_directions.py --runslow --regen-golden` writes it)")
MARGIN = 0.10  # the declared significance rule's "a tenth of the reference's own loss" (VERDICTS.md)


@claim("surrogate-failure-directions", "§3, §9 (beyond SPEC's catalogue)", "The mass surrogate is the right "
       "first-order object, but it can understate the cost when an evicted token carries an outlier value the "
       "retained tokens cannot reconstruct, and overstate it when the evicted value aligns with the retained "
       "average.", sizes={"control_T": (40, 80)})  # the planted control's length (the measurement is committed)
def surrogate_failure_directions(ctx: Context) -> Computed:
    d = cached(committed_directions)
    control = cached(planted_control, T=ctx.sizes["control_T"])
    if d is None:
        return Computed({"measured": False, "control": control}, {"directions": "outlier values and aligned values"},
                        {"test": TEST, "missing": MISSING})
    evidence = {"test": TEST, "data": d["source"], "figure": ctx.figure_files("value_directions")}
    evidence.update({f"{kind}_counterexample": _save_head(ctx, kind) for kind, inst in d["instances"].items()
                     if inst is not None})
    return Computed({"measured": True, "control": control, "margin": MARGIN,
                     **{key: d[key] for key in ("prompt", "tokens", "budget", "model", "thresholds", "heads", "exact",
                                                "groups", "instances")}},
                    {"directions": "outlier values (mass understates) and aligned values (mass overstates)",
                     "first order": "the mass surrogate is correct to first order"}, evidence)


def _save_head(ctx: Context, kind: str) -> str:
    """The head holding the instance, from the input set the claim read (:func:`realtrace.input_dir`), copied to ``paper_check/counterexamples/`` under the output root
    (replay: :func:`realtrace.quality.directions.load_head`, then :func:`~realtrace.quality.directions.head_directions`
    at its saved budget); returns its path relative to the root.  Another model's head is saved under its own name
    (``..._value_<model>.npz``), so that reading the claim on it leaves the default model's file as it is."""
    model = current_model()
    rel = f"paper_check/counterexamples/surrogate_{kind}_value{'' if model == DATA_MODEL else '_' + model}.npz"
    target = ctx.out_dir / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target) as tmp:
        shutil.copyfile(input_dir(DIRECTIONS_DIR.name) / HEAD_FILES[kind], tmp)
    return rel


@decides("surrogate-failure-directions", flips={
    "no outlier instance": (lambda v: edit(v, "instances/outlier", None), "not-reproduced"),
    "no aligned instance": (lambda v: edit(v, "instances/aligned", None), "not-reproduced"),
    "the control finds nothing": (lambda v: edit(v, "instances/outlier", None) | {"control": dict(
        v["control"], found_both=False)}, "not-checkable"),
    "an optimum loses on its own cost": (lambda v: edit(v, "exact/value_optimum_no_worse_on_value", False),
                                         "not-checkable")})
def surrogate_failure_directions_decide(v: dict, e: dict) -> Decision:
    """Readings.  (existence, the claim's own: its words are "can understate", "can overstate") holds when the
    committed heads hold at least one instance of each direction, replayed from the saved head files: an outlier
    (an entry the mass optimum evicts, the value optimum keeps, ``||v - o|| >= far x`` its row's mass-weighted mean)
    and an aligned value (an entry of mass ``>= heavy`` the value optimum evicts and the mass optimum keeps,
    ``||v - o|| <= near x`` the mean); not-reproduced when either is missing while the planted control finds both;
    not-checkable when the control fails, the measurement is missing, or an optimum is beaten on its own cost (the
    measurement would then not be of two optima).  (first order: "the right first-order object") holds while the mass
    optimum's value-weighted cost exceeds the value optimum's by at most the declared margin (a tenth of it) in
    total, holds-with-correction above it, the share given away being the correction."""
    c = v["control"]
    if not v["measured"]:
        return Decision("not-checkable", f"Missing input: {MISSING}.")
    if not (v["exact"]["value_optimum_no_worse_on_value"] and v["exact"]["mass_optimum_no_worse_on_mass"]):
        return Decision("not-checkable", "The committed measurement is not of two optima: on some head an optimum "
                                         "pays more than the other on its own cost.")
    out, al = v["instances"]["outlier"], v["instances"]["aligned"]
    g = v["groups"]
    where = f"{v['prompt']} ({v['tokens']} tokens), K = {v['budget']}, {v['heads']} layer x KV heads of {v['model']}"
    per_group = "; ".join(f"{name} {fmt(100 * g[name]['value_given_away_share'], 3)}% ({g[name]['outliers']} outlier, "
                          f"{g[name]['aligned']} aligned entries)" for name in g if name != "total")
    t = g["total"]
    share = t["value_given_away_share"]
    first = "holds" if share <= v["margin"] else "holds-with-correction"
    parts = [f"On {where}, the exact mass optimum pays {fmt(100 * share, 3)}% more value-weighted cost "
             f"(sum of a[t, i] ||v_i - o_t|| over lost entries: {fmt(t['value_by_mass'])} against the value "
             f"optimum's {fmt(t['value_by_value'])}), and the value optimum {fmt(t['mass_given_away'])} more "
             f"attention mass; by layer group: {per_group}."]
    if out is not None:
        parts.append(f"Outlier (mass understates): layer {out['layer']} KV head {out['kv']}, step {out['t']}, "
                     f"position {out['i']}: mass {fmt(out['mass'], 3)}, ||v - o|| = {fmt(out['distance'], 3)}, "
                     f"{fmt(out['ratio'], 3)} x the row's mean; the mass optimum evicts it, the value optimum keeps "
                     f"it ({out['file']}).")
    if al is not None:
        parts.append(f"Aligned (mass overstates): layer {al['layer']} KV head {al['kv']}, step {al['t']}, position "
                     f"{al['i']}: mass {fmt(al['mass'], 3)}, ||v - o|| = {fmt(al['distance'], 3)}, "
                     f"{fmt(al['ratio'], 3)} x the row's mean; the value optimum evicts it, the mass optimum keeps "
                     f"it ({al['file']}).")
    missing = [name for name, inst in (("outlier", out), ("aligned", al)) if inst is None]
    if missing and not c["found_both"]:
        existence = "not-checkable"
        parts.append(f"No {' and no '.join(missing)} instance, and the planted control finds "
                     f"{c['outliers']} outliers and {c['aligned']} aligned entries: the detector has no power.")
    elif missing:
        existence = "not-reproduced"
        parts.append(f"No {' and no '.join(missing)} instance on these heads, though the planted control "
                     f"(T = {c['T']}, k = {c['k']}) finds {c['outliers']} outliers and {c['aligned']} aligned entries.")
    else:
        existence = "holds"
    return Decision(existence, " ".join(parts), readings={
        "existence: both directions occur on the model's heads (the claim's wording, 'can')": {
            "verdict": existence, "finding": f"{t['outliers']} outlier and {t['aligned']} aligned entries where "
                                             f"the two optima part"},
        "first order: the mass optimum is near-optimal on the value-weighted cost": {
            "verdict": first, "finding": f"it pays {fmt(100 * share, 3)}% more than the value optimum (margin "
                                         f"{fmt(100 * v['margin'], 3)}%)"}})
