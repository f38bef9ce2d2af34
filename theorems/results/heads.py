"""Displaced mass against attention-output error per layer and KV head (claim ``displaced-mass-output-error``; paper
§3, the paragraph on why the attention-mass regret is the right surrogate, and §9).

The paper: the attention output is linear in the weights, so to first order an eviction's output error is the
displaced mass times the gap between the evicted values and the retained average, and where the evicted values are
typical the error is proportional to the displaced mass.  In the replay this is an identity per row and query head,
``O_R - O = m (O_R - Vbar_E)`` (``m`` the displaced mass, ``Vbar_E`` the evicted tokens' attention-weighted mean
value), so ``e = ||O_R - O|| / ||O|| = m x f`` with ``f = ||O_R - Vbar_E|| / ||O||`` the "how far the evicted values
lie" factor.  The question is empirical: how much ``f`` moves.

Data: the committed per-head stream means (``realtrace/data/quality_heads/head_means.json``,
:func:`realtrace.quality.heads.derive`): per run (configuration x budget) and prompt, the ``(layers, KV heads)`` means
of displaced mass ``m`` and error ``e``.  A *point* of a head is one (configuration, budget, prompt).

Declared while the sweep ran, before the per-head file was derived or any of its values seen (2026-12-03 08:35 UTC;
the thresholds are the claim's):

* per head, Spearman's rho of ``m`` against ``e`` over its points, with a 95% percentile bootstrap interval
  (points resampled with replacement within each prompt -- three prompts are too few to resample -- the same draw
  for every head, ``numpy.random.default_rng(seed)``);
* the share of heads with rho >= :data:`RHO_BOUND` (reading (a), "first order" = a monotone relation per head);
* per head, the ratio ``e / m`` of the stream means (= the mass-weighted mean of the per-row factor ``f``) at each
  point, and its coefficient of variation (population standard deviation / mean) across the head's points; the share
  of heads with CV <= :data:`CV_BOUND` (reading (b), "first order" = proportional, one factor per head);
* described beside them (no threshold): how the factor moves -- per head, Spearman's rho of ``m`` against ``e / m``
  (below 0: the error grows slower than the mass), and the mean factor of each configuration over heads and points;
* pooled: Spearman over every (head, point) pair and the mean of the per-head rho (with its bootstrap interval);
  per layer group (``realtrace.geometry.layer_groups``: thirds of the layers): mean rho, the two shares, the median CV;
* controls on the same heads and points: the errors shuffled across a head's points (a decoupled pairing: the
  per-head rho must be near 0 -- mean within +-:data:`NULL_MEAN`, at most :data:`NULL_SHARE` of heads above the
  bound); planted ``e = c m exp(N(0, 0.1))`` (proportional: both shares must reach :data:`SHARE_HOLDS`); planted
  ``e = c m^2`` (monotone, not proportional: the rho share must reach it and the CV share stay below
  :data:`SHARE_MAJORITY`, so reading (b) can tell the two apart).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from realtrace import input_dir
from realtrace.geometry import layer_groups

from .surrogate import _rho

HEADS_SET = "quality_heads"
MEANS_FILE = "head_means.json"
RHO_BOUND = 0.8        # a head whose rank correlation is at least this is "monotone to first order"
CV_BOUND = 0.25        # a head whose factor e/m varies by at most this (std/mean) is "proportional to first order"
SHARE_HOLDS = 0.9      # the share of heads for "holds"
SHARE_MAJORITY = 0.5   # the share of heads for "holds-with-correction" (below it: not-reproduced)
NULL_MEAN = 0.1        # the shuffled control's mean per-head rho must lie within +-this
NULL_SHARE = 0.05      # ... and at most this share of its heads reach RHO_BOUND
PLANTED_NOISE = 0.1    # the planted proportional control's log-normal noise


def committed_means(root: Path | None = None) -> dict | None:
    """The committed (or recomputed, :func:`realtrace.input_dir`) per-head file, or None without it."""
    path = (Path(root) if root is not None else input_dir(HEADS_SET)) / MEANS_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def arrays(doc: dict) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(m, e, prompts)``: displaced mass and error as ``(points, layers, KV heads)`` float64 arrays and each
    point's prompt."""
    m = np.array([r["displaced"] for r in doc["points"]], float)
    e = np.array([r["error"] for r in doc["points"]], float)
    return m, e, [r["prompt"] for r in doc["points"]]


def head_rho(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``(layers, KV heads)``: Spearman's rho of ``m`` against ``e`` over the points (axis 0) of each head."""
    return np.array([[_rho(m[:, i, j], e[:, i, j]) for j in range(m.shape[2])] for i in range(m.shape[1])])


def head_cv(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``(layers, KV heads)``: the coefficient of variation (population) of ``e / m`` over the points of each head
    with ``m > 0`` (NaN for a head with fewer than 2 such points)."""
    out = np.full(m.shape[1:], np.nan)
    for i in range(m.shape[1]):
        for j in range(m.shape[2]):
            ok = m[:, i, j] > 0
            if ok.sum() >= 2:
                r = e[ok, i, j] / m[ok, i, j]
                out[i, j] = r.std() / r.mean()
    return out


def factor(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``e / m`` elementwise, NaN where ``m = 0`` (nothing displaced: no factor)."""
    return np.where(m > 0, e / np.where(m > 0, m, 1), np.nan)


def head_ratio(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``(layers, KV heads)``: the mean over points of ``e / m`` (points with ``m > 0``)."""
    return np.nanmean(factor(m, e), axis=0)


def head_factor_trend(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``(layers, KV heads)``: Spearman's rho of ``m`` against ``e / m`` over each head's points with ``m > 0``."""
    f = factor(m, e)
    return np.array([[_rho(m[m[:, i, j] > 0, i, j], f[m[:, i, j] > 0, i, j]) for j in range(m.shape[2])]
                     for i in range(m.shape[1])])


def _share(x: np.ndarray, test) -> float:
    x = x[~np.isnan(x)]
    return float(test(x).mean()) if len(x) else float("nan")


def pooled_rho(m: np.ndarray, e: np.ndarray) -> float:
    """Spearman over every (head, point) pair (heads of different scale mixed: the summed regret's view)."""
    return _rho(m.ravel(), e.ravel())


def summary(m: np.ndarray, e: np.ndarray) -> dict:
    """The per-head statistics of one pairing (no interval): rho, CV, their shares, per layer group."""
    rho, cv = head_rho(m, e), head_cv(m, e)
    groups = {}
    for name, rng in layer_groups(rho.shape[0]):
        r, c = rho[list(rng)], cv[list(rng)]
        groups[name] = {"mean_rho": float(np.nanmean(r)), "share_rho": _share(r, lambda x: x >= RHO_BOUND),
                        "median_cv": float(np.nanmedian(c)), "share_cv": _share(c, lambda x: x <= CV_BOUND)}
    return {"heads": int(rho.size), "mean_rho": float(np.nanmean(rho)), "min_rho": float(np.nanmin(rho)),
            "share_rho": _share(rho, lambda x: x >= RHO_BOUND), "share_positive": _share(rho, lambda x: x > 0),
            "median_cv": float(np.nanmedian(cv)), "max_cv": float(np.nanmax(cv)),
            "share_cv": _share(cv, lambda x: x <= CV_BOUND), "pooled_rho": pooled_rho(m, e), "groups": groups}


def bootstrap(m: np.ndarray, e: np.ndarray, prompts: list[str], resamples: int, seed: int) -> dict:
    """95% percentile intervals of each head's rho and of the mean per-head rho: points resampled with replacement
    within each prompt, one draw for every head."""
    rng = np.random.default_rng(seed)
    by_prompt = [np.flatnonzero(np.array(prompts) == p) for p in sorted(set(prompts))]
    draws = np.empty((resamples, *m.shape[1:]))
    for b in range(resamples):
        idx = np.concatenate([g[rng.integers(0, len(g), len(g))] for g in by_prompt])
        draws[b] = head_rho(m[idx], e[idx])
    lo, hi = np.nanpercentile(draws, 2.5, axis=0), np.nanpercentile(draws, 97.5, axis=0)
    means = np.nanmean(draws.reshape(resamples, -1), axis=1)
    return {"rho_ci95": np.stack([lo, hi], axis=-1), "mean_rho_ci95": [float(np.percentile(means, 2.5)),
                                                                       float(np.percentile(means, 97.5))],
            "share_ci_low_at_bound": float((lo >= RHO_BOUND).mean()), "share_ci_low_above_0": float((lo > 0).mean())}


def controls(m: np.ndarray, e: np.ndarray, seed: int) -> dict:
    """The three controls of the module docstring on the measured ``m`` (each head's constant ``c``: its median
    measured ``e / m``), seeded."""
    rng = np.random.default_rng(seed)
    shuffled = np.stack([rng.permutation(e[:, i, j]) for i in range(e.shape[1]) for j in range(e.shape[2])], axis=1)
    c = np.nanmedian(factor(m, e), axis=0)
    proportional = c * m * np.exp(rng.normal(0, PLANTED_NOISE, m.shape))
    squared = c * m ** 2
    out = {"shuffled": summary(m, shuffled.reshape(e.shape)), "proportional": summary(m, proportional),
           "squared": summary(m, squared)}
    out["passed"] = bool(abs(out["shuffled"]["mean_rho"]) <= NULL_MEAN and out["shuffled"]["share_rho"] <= NULL_SHARE
                         and out["proportional"]["share_rho"] >= SHARE_HOLDS
                         and out["proportional"]["share_cv"] >= SHARE_HOLDS
                         and out["squared"]["share_rho"] >= SHARE_HOLDS
                         and out["squared"]["share_cv"] < SHARE_MAJORITY)
    return out


def heads_table(resamples: int, seed: int, root: Path | None = None) -> dict:
    """The measurement of the claim ``displaced-mass-output-error`` (module docstring); ``{"measured": False}``
    without the committed file."""
    doc = committed_means(root)
    if doc is None or not doc["points"]:
        return {"measured": False}
    m, e, prompts = arrays(doc)
    rho, cv, ratio = head_rho(m, e), head_cv(m, e), head_ratio(m, e)
    boot = bootstrap(m, e, prompts, resamples, seed)
    trend, by_point = head_factor_trend(m, e), factor(m, e)
    configs = np.array([r["config"] for r in doc["points"]])
    return {"measured": True, "model": doc["model"], "scope": doc["scope"], "points": len(doc["points"]),
            "prompts": sorted(set(prompts)), "configs": sorted({r["config"] for r in doc["points"]}),
            "budgets": sorted({r["budget"] for r in doc["points"]}), "layers": doc["layers"],
            "kv_heads": doc["kv_heads"], "resamples": resamples, "seed": seed,
            "thresholds": {"rho": RHO_BOUND, "cv": CV_BOUND, "share_holds": SHARE_HOLDS,
                           "share_majority": SHARE_MAJORITY},
            **summary(m, e), "mean_rho_ci95": boot["mean_rho_ci95"],
            "share_ci_low_at_bound": boot["share_ci_low_at_bound"],
            "share_ci_low_above_0": boot["share_ci_low_above_0"],
            "ratio": {"min": float(np.nanmin(ratio)), "median": float(np.nanmedian(ratio)),
                      "max": float(np.nanmax(ratio))},
            "factor_trend": {"median_rho": float(np.nanmedian(trend)),
                             "share_negative": _share(trend, lambda x: x < 0)},
            "factor_by_config": {c: float(np.nanmean(by_point[configs == c])) for c in sorted(set(configs))},
            "per_head": {"rho": rho.tolist(), "rho_ci95": boot["rho_ci95"].tolist(), "cv": cv.tolist(),
                         "ratio": ratio.tolist()},
            "control": controls(m, e, seed)}


__all__ = ["CV_BOUND", "HEADS_SET", "MEANS_FILE", "RHO_BOUND", "SHARE_HOLDS", "SHARE_MAJORITY", "arrays",
           "bootstrap", "committed_means", "controls", "factor", "head_cv", "head_factor_trend", "head_ratio",
           "head_rho", "heads_table", "pooled_rho", "summary"]
