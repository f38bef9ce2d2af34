"""The count behind ``surrogate-exactness`` (issue 52 item 4): pairs of schedules at equal memory, oriented by their
complete-row regret, and whether the lower-regret one gives the worse answer.

* On constructed runs whose outcome is known by hand, the pairs are formed, oriented and counted as stated (the
  quality margin decides "same": a difference within ``max(0.10 x reference, ln 1.01)`` is no difference).
* The sign test equals the binomial tail computed independently (scipy).
* On the committed replays, every pair's lower-regret side is ``a``, the counts add up, and the positive control
  sees the constructed effect in every pair and none where it is absent.
"""

from __future__ import annotations

import math

import pytest
from scipy.stats import binom

from theorems.claims.paradox import sign_test
from theorems.results.paradox import CONTROL_SCALE, FAMILIES, READINGS, control, count, counts, pairs, paradox_table


def _run(regret, kl, right):
    return {"regret": regret, "kl": kl, "right": right}


def test_constructed_pairs_are_oriented_and_counted():
    runs = {
        # K = 64, p1: the exact solve has less regret and a KL 0.3 above the truncated one's 0.1 -> worse; and it
        # loses the answer -> worse under accuracy
        ("OPT", None, 64, "p1"): _run(100.0, 0.4, 0), ("OPT", 32, 64, "p1"): _run(120.0, 0.1, 1),
        # K = 64, p2: the truncated solve has less regret (listed second) and the smaller KL -> better, same answer
        ("OPT", None, 64, "p2"): _run(90.0, 0.5, 1), ("OPT", 32, 64, "p2"): _run(80.0, 0.2, 1),
        # K = 128, p1: KL within the floor ln 1.01 of each other -> same; equal regret elsewhere -> no pair
        ("OPT", None, 128, "p1"): _run(50.0, 0.010, 1), ("OPT", 32, 128, "p1"): _run(60.0, 0.001, 1),
        ("OPT:coupled", None, 128, "p1"): _run(40.0, 0.3, 1), ("OPT:coupled", 32, 128, "p1"): _run(40.0, 0.0, 1),
    }
    ps = pairs(runs)
    assert [(p["family"], p["a"], p["b"], p["budget"], p["prompt"]) for p in ps] == [
        ("exact vs truncated", "OPT", "OPT --opt-top 32", 64, "p1"),
        ("exact vs truncated", "OPT --opt-top 32", "OPT", 64, "p2"),
        ("exact vs truncated", "OPT", "OPT --opt-top 32", 128, "p1"),
        ("uniform vs static vs coupled", "OPT:coupled", "OPT", 128, "p1")]
    assert all(p["regret_a"] < p["regret_b"] for p in ps)
    kl = count(ps[:3], "answer_kl")
    assert kl == {"pairs": 3, "worse": 1, "better": 1, "same": 1}
    assert count(ps[:3], "accuracy") == {"pairs": 3, "worse": 1, "better": 0, "same": 2}
    # the coupled optimum (40) against uniform (50) at K = 128: KL 0.3 against 0.010 -> worse
    assert count(ps[3:], "answer_kl") == {"pairs": 1, "worse": 1, "better": 0, "same": 0}
    c = counts(ps)
    assert c["answer_kl"]["budget"] == {"64": {"pairs": 2, "worse": 1, "better": 1, "same": 0},
                                        "128": {"pairs": 2, "worse": 1, "better": 0, "same": 1}}
    assert set(c["answer_kl"]["family"]) == set(FAMILIES)


@pytest.mark.parametrize("better,worse", [(13, 9), (0, 0), (5, 0), (0, 4), (20, 3)])
def test_the_sign_test_is_the_binomial_tail(better, worse):
    n = better + worse
    expected = 1.0 if n == 0 else float(binom.sf(better - 1, n, 0.5))
    assert sign_test(better, worse) == pytest.approx(expected, rel=1e-12)


def test_the_committed_count_and_its_positive_control():
    t = paradox_table()
    ps = t["pairs"]
    assert ps, "no pair in the committed replays"
    assert all(p["regret_a"] < p["regret_b"] for p in ps)
    for r in READINGS:
        a = t["counts"][r]["all"]
        assert a["worse"] + a["better"] + a["same"] == a["pairs"] == len(ps)
        assert sum(f["pairs"] for f in t["counts"][r]["family"].values()) == len(ps)
    ctl = control(ps)
    assert all(ctl["present"][r] == {"pairs": len(ps), "worse": len(ps), "better": 0, "same": 0} for r in READINGS)
    assert all(ctl["absent"][r]["worse"] == 0 for r in READINGS) and ctl["absent"]["answer_kl"]["better"] > 0
    # the absent control's outputs follow the regret: "better" exactly where the regrets, scaled by 10 nats per unit,
    # differ by more than the margin of the smaller one's
    assert CONTROL_SCALE == 10
    expect = sum(1 for p in ps if 10 * (p["regret_b"] - p["regret_a"]) > max(0.1 * 10 * p["regret_a"], math.log(1.01)))
    assert ctl["absent"]["answer_kl"]["better"] == expect
