"""Aggregation of a quality study (:mod:`realtrace.quality.run`): per (config, budget), the per-prompt values, the
means over prompts per layer group and in total, the accuracy over the prompts that pass the positive control, and
the full cache as a row of the table.  No model, no torch: the report and its tests use it on saved runs."""

from __future__ import annotations

import numpy as np

FULL = "full cache"
SCOPES = ("stream", "answer")
SCALARS = tuple(f"{q}_{s}" for s in SCOPES for q in ("kl", "dnll", "top1"))
SUMS = ("regret_sum", "opt_lower")  # per prompt, summed over every layer, KV head and step (optima: the lower bound)
LAYERED = tuple(f"{q}_{s}" for s in SCOPES for q in ("regret", "value", "error", "displaced"))


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def aggregate(results: list[dict], layer_groups) -> dict:
    """Per (config, budget): per-prompt values, means over prompts per layer group and in total, per-layer means,
    accuracy over the prompts that pass the positive control (module docstring)."""
    prompts = [r["prompt"] for r in results]
    counted = [p["name"] for p in prompts if p["full_cache_right"]]
    keyed: dict[tuple, list[tuple[dict, dict]]] = {}
    for r in results:
        for run in r["runs"]:
            keyed.setdefault((run["config"], run["budget"]), []).append((r["prompt"], run))
    runs = []
    for (name, k), items in keyed.items():
        first = items[0][1]
        layers = {q: np.mean([np.asarray(run[q]) for _, run in items], axis=0) for q in LAYERED}  # (L, H)
        total = {q: float(layers[q].mean()) for q in LAYERED}
        total.update({q: _mean(run[q] for _, run in items) for q in SCALARS})
        total["nll_answer"] = _mean(p["nll_answer_full"] + run["dnll_answer"] for p, run in items)
        total["opt_gap"] = _mean(run["opt_gap"] for _, run in items)
        total.update({q: _mean(run.get(q) for _, run in items) for q in SUMS})
        total["prompt_kept"] = _mean(run["prompt_kept"] for _, run in items)
        right = [p["name"] for p, run in items if p["name"] in counted and run["right"]]
        total.update(accuracy=len(right) / len(counted) if counted else None, right=len(right), counted=len(counted))
        groups = {g: {q: float(layers[q][list(rng)].mean()) for q in LAYERED}
                  for g, rng in layer_groups if max(rng) < layers["regret_stream"].shape[0]}
        certificates = {p["name"]: run["opt_certificate"] for p, run in items if "opt_certificate" in run}
        runs.append({
            **({"certificates": certificates} if certificates else {}),
            "config": name, "kind": first["kind"], "mode": first["mode"], "budget": k,
            "max_resident": max(run["max_resident"] for _, run in items),
            "max_resident_total": max(run.get("max_resident_total", 0) for _, run in items),
            "total": total, "groups": groups,
            "layers": {q: layers[q].mean(axis=1).tolist() for q in LAYERED},
            "prompts": {p["name"]: {**{q: float(np.mean(run[q])) for q in LAYERED},
                                    **{q: run[q] for q in SCALARS + SUMS if q in run}, "right": bool(run["right"]),
                                    "prompt_kept": run["prompt_kept"]}
                        for p, run in items},
        })
    return {"prompts": prompts, "excluded": [p["name"] for p in prompts if not p["full_cache_right"]],
            "runs": runs}


def full_cache_run(prompts: list[dict], layer_groups) -> dict:
    """The full cache as a row of the table: nothing lost, the reference itself (accuracy 1 by the control)."""
    zero = {q: 0.0 for q in LAYERED}
    counted = sum(p["full_cache_right"] for p in prompts)
    total = {**zero, **{q: 1.0 if q.startswith("top1") else 0.0 for q in SCALARS}, "opt_gap": None,
             "regret_sum": 0.0, "opt_lower": None,
             "nll_answer": _mean(p["nll_answer_full"] for p in prompts),
             "prompt_kept": _mean(p["prompt_tokens"] for p in prompts),
             "accuracy": 1.0 if counted else None, "right": counted, "counted": counted}
    return {"config": FULL, "kind": "full", "mode": "open", "budget": None,
            "max_resident": max(p["tokens"] for p in prompts), "max_resident_total": None, "total": total,
            "groups": {g: dict(zero) for g, _ in layer_groups}, "layers": {}, "prompts": {}}


__all__ = ["FULL", "LAYERED", "SCALARS", "SCOPES", "SUMS", "aggregate", "full_cache_run"]
