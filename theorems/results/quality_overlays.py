"""Measured data of the quality figures (:mod:`figures.quality`), read from the same input sets and tables the
claims decide from: ``surrogate`` (regret-surrogate), ``gda_shift`` (gda-validation's shifted window),
``value_directions`` (surrogate-failure-directions), ``heads`` (displaced-mass-output-error).  Formats:
``figures.FIGURES[id].data_doc``."""

from __future__ import annotations

from ..tables import cached
from .directions import committed_directions
from .heads import arrays, committed_means, heads_table
from .recommendations import SHIFT_POLICIES, shift_quality
from .surrogate import PAIRS, quality_points, surrogate_table

def surrogate_overlay(sizes: dict) -> dict | None:
    """Every point of :func:`quality_points` and the claim's rank correlations at its sizes."""
    from ..claims.surrogate import SEED   # the claim's seed: one computation for claim and figure

    points, _ = quality_points()
    if not points:
        return None
    t = cached(surrogate_table, resamples=sizes["surrogate"]["resamples"], seed=SEED)
    keep = ("pooled", "pooled_ci95", "within", "within_ci95")
    return {"points": [{"set": p["dir"], "prompt": p["prompt"], **{q: p[q] for pair in PAIRS.values() for q in pair}}
                       for p in points],
            "correlation": {name: {k: t["pairs"][name][k] for k in keep} for name in PAIRS}}


def gda_shift_overlay(sizes: dict) -> dict | None:
    """Per policy and budget, per prompt: the answer-row tracking gap (regret per step minus the optimum's) and the
    answer KL; the optimum's answer KL beside them."""
    q = shift_quality(also=("kl_answer",))
    if q is None:
        return None
    cases = q["cases"].values()
    prompts = sorted({c["prompt"] for c in cases})
    out = {}
    for pol in (*SHIFT_POLICIES, "OPT"):
        per = {"kl_answer": [[c[pol]["kl_answer"] for c in cases if c["budget"] == k] for k in q["budgets"]]}
        if pol != "OPT":
            per["gap"] = [[c[pol]["regret_answer"] - c["OPT"]["regret_answer"] for c in cases if c["budget"] == k]
                          for k in q["budgets"]]
        out[pol] = per
    return {"budgets": q["budgets"], "policies": out,
            "prompts": f"{q['source']}: {', '.join(prompts)} (range over prompts as bars)"}


def value_directions_overlay(sizes: dict) -> dict | None:
    """The two optima's value cost and mass regret per layer group (without the total)."""
    d = committed_directions()
    if d is None:
        return None
    keys = ("value_by_mass", "value_by_value", "mass_by_mass", "mass_by_value")
    return {"groups": {g: {k: v[k] for k in keys} for g, v in d["groups"].items() if g != "total"},
            "source": f"{d['source']}: {d['prompt']} ({d['tokens']} tokens), K = {d['budget']}, {d['heads']} KV heads"}


def heads_overlay(sizes: dict) -> dict | None:
    """Every (head, point) pair of the committed per-head means by layer group, and the claim's per-head rank
    correlations (with intervals) and factor CVs at its sizes."""
    from realtrace.geometry import layer_groups

    from ..claims.heads import SEED   # the claim's seed: one computation for claim and figure

    doc = committed_means()
    if doc is None or not doc["points"]:
        return None
    m, e, _ = arrays(doc)
    groups = layer_groups(m.shape[1])  # (points, layers, KV heads)
    t = cached(heads_table, resamples=sizes["heads"]["resamples"], seed=SEED)
    ph = t["per_head"]
    return {"points": {g: {"xy": {"displaced": m[:, list(rng)].ravel().tolist(),
                                  "error": e[:, list(rng)].ravel().tolist()}} for g, rng in groups},
            "heads": [{"layer": i, "kv_head": j, "group": g, "rho": ph["rho"][i][j], "ci": ph["rho_ci95"][i][j],
                       "cv": ph["cv"][i][j]}
                      for g, rng in groups for i in rng for j in range(t["kv_heads"])],
            "bounds": {"rho": t["thresholds"]["rho"], "cv": t["thresholds"]["cv"]},
            "notes": [f"{t['heads']} heads x {t['points']} points ({', '.join(t['configs'])}; K = "
                      f"{', '.join(map(str, t['budgets']))}; {', '.join(t['prompts'])}): {100 * t['share_rho']:.0f}% "
                      f"of heads at rho >= {t['thresholds']['rho']:g}, {100 * t['share_cv']:.0f}% at CV <= "
                      f"{t['thresholds']['cv']:g}; mean rho {t['mean_rho']:.2f}, median CV {t['median_cv']:.2f}."]}


QUALITY_OVERLAYS = {"surrogate": surrogate_overlay, "gda_shift": gda_shift_overlay,
                    "value_directions": value_directions_overlay, "heads": heads_overlay}

__all__ = ["QUALITY_OVERLAYS", "gda_shift_overlay", "heads_overlay", "surrogate_overlay", "value_directions_overlay"]
