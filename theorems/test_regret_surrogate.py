"""Regret as a surrogate of output quality (claim ``regret-surrogate``, paper Sections 3 and 9): the rank correlation
and its prompt-level bootstrap (:mod:`theorems.results.surrogate`) on the committed quality replays, no torch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import spearmanr

from realtrace import DATA_DIR
from tests.command_line import ROOT
from theorems.results.surrogate import _rho, quality_points, rank_correlation


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=3, max_size=40))
def test_rho_is_spearmans_rho_ties_included(pairs):
    x, y = np.array(pairs, float).T
    want = spearmanr(x, y).statistic if np.ptp(x) and np.ptp(y) else float("nan")
    assert np.isnan(want) and np.isnan(_rho(x, y)) or abs(_rho(x, y) - want) < 1e-12


def test_points_are_every_policy_run_and_one_optimum_per_directory_and_budget():
    """Counted from the files directly: each policy run's prompts, plus each distinct (directory, optimum, budget,
    rows solved on) optimum's; a JSON file that is not a study (no ``runs``: a timing) adds nothing."""
    want, opts = 0, set()
    for d in DATA_DIR.glob("quality_*"):
        for f in d.glob("*.json"):
            doc = json.loads(f.read_text())
            for r in doc.get("runs", []):
                key = (d.name, r["config"], r["budget"], doc["settings"]["opt_top"])
                if r["kind"] == "policy":
                    want += len(r["prompts"])
                elif r["kind"] == "opt" and key not in opts:
                    opts.add(key)
                    want += len(r["prompts"])
    points, sources = quality_points()
    assert len(points) == want > 0 and sources


def _toy(sign: float, n_prompts: int = 8, per: int = 6, seed: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for p in range(n_prompts):
        level = rng.uniform(0, 1)  # a prompt's own difficulty moves both sides together
        for i in range(per):
            x = level + rng.uniform(0, 1)
            out.append({"dir": "toy", "prompt": f"p{p}", "x": x, "y": sign * x + 0.2 * rng.normal()})
    return out


def test_the_bootstrap_sees_a_planted_relation_in_either_direction_and_is_seeded():
    up, down = rank_correlation(_toy(1), "x", "y", 300, 0), rank_correlation(_toy(-1), "x", "y", 300, 0)
    assert up["pooled_ci95"][0] > 0.5 and up["within_ci95"][0] > 0.5
    assert down["pooled_ci95"][1] < -0.5 and down["within_ci95"][1] < -0.5
    assert rank_correlation(_toy(1), "x", "y", 300, 0) == up
    assert rank_correlation(_toy(1), "x", "y", 300, 1)["pooled_ci95"] != up["pooled_ci95"]


def plain_bootstrap(points: list[dict], resamples: int, seed: int) -> tuple[list[float], list[float]]:
    """The bootstrap written out: per draw, the drawn prompts' points concatenated, their pooled rho, and the mean of
    each drawn prompt's own rho recomputed from its points (NaN ones left out)."""
    x, y = np.array([q["x"] for q in points]), np.array([q["y"] for q in points])
    keys = sorted({(q["dir"], q["prompt"]) for q in points})
    groups = [np.array([i for i, q in enumerate(points) if (q["dir"], q["prompt"]) == k]) for k in keys]
    rng = np.random.default_rng(seed)
    pooled, within = [], []
    for _ in range(resamples):
        pick = [groups[i] for i in rng.integers(0, len(groups), size=len(groups))]
        idx = np.concatenate(pick)
        pooled.append(_rho(x[idx], y[idx]))
        rhos = [r for r in (_rho(x[g], y[g]) for g in pick) if not np.isnan(r)]
        within.append(float(np.mean(rhos)) if rhos else float("nan"))
    return pooled, within


def _interval(draws: list[float]) -> list[float]:
    d = np.array(draws)
    d = d[~np.isnan(d)]
    return [float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))] if len(d) else [float("nan")] * 2


@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=6), min_size=1,
                max_size=6), st.integers(0, 3))
def test_the_bootstrap_equals_the_plain_one(prompts, seed):
    """Each drawn prompt's own rho is computed once rather than per draw: the intervals are those of the bootstrap
    written out (:func:`plain_bootstrap`), exactly -- on prompts with ties, constant sides and under 3 points."""
    points = [{"dir": "d", "prompt": f"p{n}", "x": float(a), "y": float(b)} for n, pts in enumerate(prompts)
              for a, b in pts]
    got = rank_correlation(points, "x", "y", 25, seed)
    pooled, within = plain_bootstrap(points, 25, seed)
    np.testing.assert_array_equal(got["pooled_ci95"], _interval(pooled))
    np.testing.assert_array_equal(got["within_ci95"], _interval(within))


def test_the_claim_reads_the_replays_without_torch():
    code = ("import sys; sys.modules['torch'] = sys.modules['transformers'] = sys.modules['kvpress'] = None; "
            "from theorems.results.surrogate import surrogate_table; t = surrogate_table(20, 0); print(t['points'])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == len(quality_points()[0])
