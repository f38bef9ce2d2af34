"""Regret as a surrogate of output quality (paper Sections 3 and 9), measured on every committed quality replay.

Section 3 (the paragraph on why the attention-mass regret is the right surrogate) argues that the attention output
is linear in the weights, so to first order the error of an eviction is the displaced mass times a value difference,
and the regret (paper Eq. 4) tracks the output error where values are typical; Section 9 flags the two directions
in which it fails.  If it is a first-order surrogate, a schedule with more regret on a prompt should change the
model's output more: across policies, budgets and prompts the regret and the output loss should rise together.

Points: every (run, prompt) of the committed ``--json`` documents of ``python -m paper_check quality`` under
``realtrace/data/quality_*`` (each policy run, and each optimum once per directory, budget and the rows it was solved
on: every file of a budget carries the same one; other JSON there, such as a timing, is not a study and is skipped).  Pairs: stream regret per step with stream KL from the full cache, answer-row regret with
the change of the answer's NLL.  Statistic: Spearman's rank correlation (pooled over all points), and the mean over
prompts of the within-prompt rank correlation (policies x budgets of one prompt: the prompt's own difficulty cannot
drive it).  Interval: a percentile bootstrap that resamples prompts with replacement (points of one prompt share its
text, so they are not independent), seeded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from realtrace import input_dir, model_data_dir, set_name

PAIRS = {"stream": ("regret_stream", "kl_stream"), "answer": ("regret_answer", "dnll_answer")}
QUALITY_GLOB = "quality_*"


def quality_points(root: Path | None = None) -> tuple[list[dict], list[str]]:
    """Every (run, prompt) point of the committed quality replays under ``root`` (module docstring): ``(points,
    sources)``; each point carries ``dir``, ``config``, ``budget``, ``prompt`` and the measurements of
    :data:`PAIRS`.  Without ``root``: each committed ``realtrace/data/quality_*`` set, read where
    :func:`realtrace.input_dir` says (a recomputed copy stands in under the same name), of the model being read
    (:func:`realtrace.reading_model`)."""
    points, sources, seen_opt = [], [], set()
    dirs = (sorted(p for p in Path(root).glob(QUALITY_GLOB) if p.is_dir()) if root is not None else
            [input_dir(p.name) for p in sorted(model_data_dir().glob(QUALITY_GLOB)) if p.is_dir()])
    for d in dirs:
        files = [f for f in sorted(d.glob("*.json")) if "runs" in json.loads(f.read_text())]
        if files:
            sources.append(f"{set_name(d.name)} ({len(files)} files)")
        for f in files:
            doc = json.loads(f.read_text())
            for run in doc["runs"]:
                if run["kind"] not in ("policy", "opt"):
                    continue
                key = (d.name, run["config"], run["budget"], doc["settings"].get("opt_top"))
                if run["kind"] == "opt":
                    if key in seen_opt:
                        continue
                    seen_opt.add(key)
                for prompt, m in run["prompts"].items():
                    points.append({"dir": d.name, "config": run["config"], "budget": run["budget"], "prompt": prompt,
                                   **{q: m[q] for pair in PAIRS.values() for q in pair}})
    return points, sources


def _ranks(a: np.ndarray) -> np.ndarray:
    """0-based ranks, tied values at their mean rank (numpy only: ``scipy.stats`` does not import where torch is
    blocked, and the claim must run without torch)."""
    _, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    start = np.cumsum(counts) - counts
    return (start + (counts - 1) / 2)[inverse]


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's correlation of the ranks (ties at their mean rank); NaN below 3 points or for a
    constant side."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(_ranks(x), _ranks(y))[0, 1])


def _mean_rho(rhos: list[float]) -> float:
    """The mean of the defined correlations (a prompt with fewer than 3 points or a constant side has none)."""
    rhos = [r for r in rhos if not np.isnan(r)]
    return float(np.mean(rhos)) if rhos else float("nan")


def rank_correlation(points: list[dict], xq: str, yq: str, resamples: int, seed: int) -> dict:
    """Pooled and mean within-prompt Spearman correlation of ``xq`` against ``yq`` over ``points``, each with a 95%
    percentile interval from ``resamples`` prompt-level bootstrap draws of ``numpy.random.default_rng(seed)``."""
    x = np.array([p[xq] for p in points], float)
    y = np.array([p[yq] for p in points], float)
    prompts = sorted({(p["dir"], p["prompt"]) for p in points})
    groups = [np.array([i for i, p in enumerate(points) if (p["dir"], p["prompt"]) == key]) for key in prompts]
    rng = np.random.default_rng(seed)
    # a drawn prompt's own rho does not depend on the draw: computed once, and a draw's within mean averages them
    group_rho = [_rho(x[g], y[g]) for g in groups]
    pooled, within = [], []
    for _ in range(resamples):
        picked = rng.integers(0, len(groups), size=len(groups))
        idx = np.concatenate([groups[i] for i in picked])
        pooled.append(_rho(x[idx], y[idx]))
        within.append(_mean_rho([group_rho[i] for i in picked]))

    def interval(draws):
        d = np.array(draws)
        d = d[~np.isnan(d)]
        return [float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))] if len(d) else [float("nan")] * 2

    return {"x": xq, "y": yq, "points": len(points), "prompts": len(prompts), "pooled": _rho(x, y),
            "pooled_ci95": interval(pooled), "within": _mean_rho(group_rho), "within_ci95": interval(within)}


def planted_control(points: list[dict], resamples: int, seed: int) -> dict:
    """The positive and negative control of the same procedure on the same prompt structure: ``y`` planted as a
    noisy increasing function of the measured stream regret (``y = x * exp(N(0, 0.5))``, seeded) must give an
    interval above 0; ``y`` drawn independently of ``x`` (the measured stream KL permuted across all points) must
    give a pooled interval containing 0."""
    rng = np.random.default_rng(seed)
    x = np.array([p["regret_stream"] for p in points], float)
    planted = [dict(p, planted=float(v)) for p, v in zip(points, x * np.exp(rng.normal(0, 0.5, len(x))))]
    shuffled = [dict(p, planted=float(v)) for p, v in
                zip(points, rng.permutation(np.array([q["kl_stream"] for q in points], float)))]
    return {"planted": rank_correlation(planted, "regret_stream", "planted", resamples, seed),
            "independent": rank_correlation(shuffled, "regret_stream", "planted", resamples, seed)}


def surrogate_table(resamples: int, seed: int, root: Path | None = None) -> dict:
    """The measurement of the claim ``regret-surrogate``: the points' sources, each pair of :data:`PAIRS` and the
    controls (module docstring)."""
    points, sources = quality_points(root)
    if not points:
        return {"sources": [], "points": 0}
    return {"sources": sources, "points": len(points),
            "pairs": {name: rank_correlation(points, xq, yq, resamples, seed) for name, (xq, yq) in PAIRS.items()},
            "control": planted_control(points, resamples, seed), "resamples": resamples, "seed": seed}
