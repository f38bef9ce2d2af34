"""Every formula figure plots what its caption says (issue 23): the recorded series of each figure
(``fig.plotted``, exactly what was drawn) against the formula recomputed here with numpy from the numbers the caption
states -- not from :mod:`kvcore.formulas`, which the builders call.  A figure drawn for the wrong k, n or S fails.

Covered: the closed-form series of Figs. 2, 3, 6, 7, 8, 9, 11, 13, 14, 15.  Not covered here: the roofline throughput
curves of Fig. 15 (their constants are the hardware model's, checked in tests/test_formulas.py), the diagrams and
tables (Figs. 1, 4, 5, 10, 12; their recorded graphs are checked in tests/test_figures.py), and the measured overlays
(tests/test_figure_data.py: each measured series equals the rows of the table it came from).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import figures

FIGS = figures.FIGURES
GIB = 2.0 ** 30


def plotted(fig_id: str) -> dict:
    return FIGS[fig_id].builder(None).plotted


def xy(series: dict) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(series["x"], dtype=float), np.asarray(series["y"], dtype=float)


def caption_number(fig_id: str, pattern: str) -> float:
    m = re.search(pattern, FIGS[fig_id].caption)
    assert m, f"figure {fig_id}: the caption no longer states {pattern!r}"
    return float(m.group(1).replace(",", ""))


def zipf_retained(s: float, k: int, n: int) -> float:
    w = np.arange(1, n + 1, dtype=float) ** -s
    return float(w[:k].sum() / w.sum())


def harmonic(k: int) -> float:
    return float(np.sum(1.0 / np.arange(1, k + 1)))


def test_fig2_every_configuration_is_eq2_at_the_captions_sizes():
    configs = re.findall(r"(\d+B)[^(]*\(L=(\d+), n_kv=(\d+), d_h=(\d+)\)", FIGS["2"].caption)
    assert len(configs) == 3
    data = plotted("2")
    for name, L, n_kv, d in configs:
        (key,) = [k for k in data if k.startswith(f"formula/{name} ")]
        x, y = xy(data[key])
        s_tokens = x * 1024
        np.testing.assert_allclose(y, s_tokens * 2 * int(L) * int(n_kv) * int(d) * 2 / GIB, rtol=1e-12)


def test_fig3_and_fig6_gain_is_S_over_k():
    x, y = xy(plotted("3")["formula/S/k"])
    np.testing.assert_allclose(y, x, rtol=1e-12)  # the gain against the memory factor S/k: the diagonal
    S = caption_number("6", r"S = ([\d,]+)") if re.search(r"S = [\d,]+", FIGS["6"].caption) else 16_000
    x, y = xy(plotted("6")["formula/S/k"])
    np.testing.assert_allclose(y, S / x, rtol=1e-12)


@pytest.mark.parametrize("key", ["bound/k=4", "bound/k=16", "bound/k=2000"])
def test_fig7_landlord_ratio_at_every_integer_h(key):
    k = int(key.split("=")[1])
    x, y = xy(plotted("7")[key])
    h = np.arange(1, k + 1)
    np.testing.assert_allclose(x, h / k, rtol=1e-12)
    np.testing.assert_allclose(y, k / (k - h + 1), rtol=1e-12)
    x, y = xy(plotted("7")["marked/k=2000,h=1000"])
    assert (x[0], y[0]) == pytest.approx((0.5, 2000 / 1001), rel=1e-12)


def test_fig8_harmonic_curves():
    data = plotted("8")
    x, y = xy(data["curve/H_k"])
    H = np.array([harmonic(int(k)) for k in x])
    np.testing.assert_allclose(y, H, rtol=1e-12)
    np.testing.assert_allclose(xy(data["curve/2H_k"])[1], 2 * H, rtol=1e-12)
    np.testing.assert_allclose(xy(data["curve/2H_k-1"])[1], 2 * H - 1, rtol=1e-12)
    np.testing.assert_allclose(xy(data["curve/k"])[1], x, rtol=1e-12)
    xl, yl = xy(data["curve/ln k"])
    np.testing.assert_allclose(yl, np.log(xl), rtol=1e-12)
    for k in (200, 2000):
        assert xy(data[f"marked/H_{k}"])[1][0] == pytest.approx(harmonic(k), rel=1e-12)


def test_fig9_scores_are_the_decayed_sums_of_the_drawn_masses():
    """Without data the paper's instance: the filler arrives at step P and the sleeper is evicted there, so from step
    P on the policy observes no mass on the sleeper (its undecayed score freezes, its decayed score fades) and the
    dotted series continues the undecayed sum of the mass it would have seen."""
    P = int(caption_number("9", r"P = (\d+) priming steps"))
    data = plotted("9")
    for role in ("decoy (each)", "sleeper", "filler"):
        t, mass = xy(data[f"mass/{role}"])
        for gamma in (1.0, 0.8):
            _, score = xy(data[f"score/{role}/gamma={gamma:g}"])
            seen = np.where(t >= P, 0.0, mass) if role == "sleeper" else mass
            want = np.array([sum(gamma ** (j - i) * seen[i] for i in range(j + 1)) for j in range(len(t))])
            np.testing.assert_allclose(score, want, rtol=1e-9, atol=1e-15)
    t, mass = xy(data["mass/sleeper"])
    tu, unobserved = xy(data["unobserved/sleeper"])
    assert tu[0] == P
    full = np.cumsum(mass)
    np.testing.assert_allclose(unobserved[:len(t) - P], full[P:], rtol=1e-9)


def test_fig11_regret_rates_of_the_stationary_model():
    n = int(caption_number("11", r"over n = (\d+)"))
    k = int(caption_number("11", r"budget k = (\d+)"))
    w = int(caption_number("11", r"recency floor w = (\d+)"))
    s = caption_number("11", r"Zipf\(s = ([\d.]+)\)")
    data = plotted("11")
    rates = {"recency": 1 - k / n, "importance": 1 - zipf_retained(s, k, n),
             "hybrid": (1 - zipf_retained(s, k - w, n)) * (1 - w / n)}
    for family, r in rates.items():
        t, y = xy(data[f"model/{family}"])
        np.testing.assert_allclose(y, t * r, rtol=1e-9)


def test_fig13_tail_mass_for_exactly_the_captions_budgets():
    n = int(caption_number("13", r"over n = (\d+) tokens"))
    ks = sorted(int(k) for k in re.search(r"for k = ([\d, ]+)\.", FIGS["13"].caption).group(1).split(","))
    data = plotted("13")
    assert sorted(int(key.split("=")[1]) for key in data if key.startswith("bound/")) == ks
    for k in ks:
        s, y = xy(data[f"bound/k={k}"])
        np.testing.assert_allclose(y, [1 - zipf_retained(float(v), k, n) for v in s], rtol=1e-9)


def test_fig14_model_curves_are_the_retained_zipf_mass():
    n = int(caption_number("14", r"n = (\d+)"))
    data = plotted("14")
    keys = [key for key in data if key.startswith("model/s=")]
    assert keys
    for key in keys:
        s = float(key.split("=")[1])
        frac, y = xy(data[key])
        k = np.rint(frac * n).astype(int)
        np.testing.assert_allclose(k, frac * n, atol=1e-9)  # the budgets are whole tokens
        np.testing.assert_allclose(y, [zipf_retained(s, int(j), n) for j in k], rtol=1e-9)


def test_fig15_gain_against_S_over_k():
    S = caption_number("15", r"S = ([\d,]+)")
    k, y = xy(plotted("15")["gain/S/k"])
    np.testing.assert_allclose(y, S / k, rtol=1e-12)
