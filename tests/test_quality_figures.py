"""The quality claims' figures (figures/quality.py) plot what their claims decide from: every committed point of
regret-surrogate with the claim's own rank correlations, gda-validation's shifted window recomputed here from its
replay (tracking gap = a policy's answer-row regret minus the optimum's), and surrogate-failure-directions' two
optima per layer group -- each compared with the input set read independently of the overlay."""

from __future__ import annotations

import math

import pytest

from figures import render
from theorems.claims import CLAIMS
from theorems.claims.separation import tracking_gap
from theorems.claims.surrogate import SEED
from theorems.profile import QUICK
from theorems.results.directions import committed_directions
from theorems.results.overlays import figure_data
from theorems.results.recommendations import shift_quality
from theorems.results.surrogate import quality_points, surrogate_table


def test_surrogate_plots_every_point_and_the_claims_correlations():
    fig = render("surrogate", figure_data("surrogate", QUICK))
    points, _ = quality_points()
    for panel, (xq, yq) in {"stream": ("regret_stream", "kl_stream"), "answer": ("regret_answer", "dnll_answer")}.items():
        drawn = sorted((x, y) for key, s in fig.plotted.items() if key.startswith(panel + "/")
                       for x, y in zip(s["x"], s["y"]))
        assert drawn == sorted((p[xq], p[yq]) for p in points)
    table = surrogate_table(CLAIMS["regret-surrogate"].sizes_at(QUICK)["resamples"], SEED)
    for name, r in table["pairs"].items():
        assert f"{name}: pooled Spearman rho {r['pooled']:.2f} [{r['pooled_ci95'][0]:.2f}" in " ".join(fig.notes)
    assert fig.axes[0].get_title() == (f"stream: pooled rho {table['pairs']['stream']['pooled']:.2f}, within-prompt "
                                       f"{table['pairs']['stream']['within']:.2f}")


def test_gda_shift_plots_the_mean_and_range_of_each_policys_gap_and_answer_kl():
    plotted = render("gda_shift", figure_data("gda_shift", QUICK)).plotted
    q = shift_quality(also=("kl_answer",))
    for pol in ("Default", "H2O", "TOVA", "OPT"):
        for panel in ("gap", "kl_answer"):
            if pol == "OPT" and panel == "gap":
                assert "gap/OPT" not in plotted   # zero by definition
                continue
            s = plotted[f"{panel}/{pol}"]
            for i, k in enumerate(q["budgets"]):
                vals = [tracking_gap(c, pol) if panel == "gap" else c[pol]["kl_answer"]
                        for c in q["cases"].values() if c["budget"] == k]
                assert len(vals) == 3
                assert math.isclose(s["y"][i], sum(vals) / 3, rel_tol=1e-12)
                assert (s["low"][i], s["high"][i]) == (min(vals), max(vals))


def test_value_directions_plots_both_optima_per_layer_group():
    plotted = render("value_directions", figure_data("value_directions", QUICK)).plotted
    groups = committed_directions()["groups"]
    for panel in ("value", "mass"):
        for opt in ("by_mass", "by_value"):
            assert plotted[f"{panel}/{opt}"]["y"] == [groups[g][f"{panel}_{opt}"] for g in ("early", "middle", "late")]
    # each optimum is lowest on its own cost, in every group (the claim's exactness check, seen on the page)
    assert all(a <= b for a, b in zip(plotted["value/by_value"]["y"], plotted["value/by_mass"]["y"]))
    assert all(a <= b for a, b in zip(plotted["mass/by_mass"]["y"], plotted["mass/by_value"]["y"]))


def test_heads_plots_every_point_and_the_claims_per_head_statistics():
    """Every (head, point) pair of the committed per-head means, by layer group, and each head's rho, interval and CV
    from the claim's own table at its quick sizes."""
    from theorems.claims.heads import SEED as HEADS_SEED
    from theorems.results.heads import arrays, committed_means, heads_table

    fig = render("heads", figure_data("heads", QUICK))
    m, e, _ = arrays(committed_means())
    drawn = sorted((x, y) for key, s in fig.plotted.items() if key.startswith("scatter/")
                   for x, y in zip(s["x"], s["y"]))
    assert drawn == sorted(zip(m.ravel().tolist(), e.ravel().tolist()))
    t = heads_table(CLAIMS["displaced-mass-output-error"].sizes_at(QUICK)["resamples"], HEADS_SEED)
    for g, layers in (("early", range(0, 10)), ("middle", range(10, 20)), ("late", range(20, 30))):
        s = fig.plotted[f"heads/{g}"]
        ph = t["per_head"]
        assert s["x"] == [ph["cv"][i][j] for i in layers for j in range(t["kv_heads"])]
        assert s["y"] == [ph["rho"][i][j] for i in layers for j in range(t["kv_heads"])]
        assert s["low"] == [ph["rho_ci95"][i][j][0] for i in layers for j in range(t["kv_heads"])]
    assert f"{100 * t['share_rho']:.0f}% of heads at rho >= 0.8" in " ".join(fig.notes)


@pytest.mark.parametrize("fig_id", ["surrogate", "gda_shift", "value_directions", "heads"])
def test_without_data_the_figure_says_so(fig_id):
    fig = render(fig_id)
    assert all(s["x"] == [] for s in fig.plotted.values())
    assert any("no data" in t.get_text() for ax in fig.axes for t in ax.texts)
