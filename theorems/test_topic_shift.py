"""Topic shifts (paper Section 5, "the adversary is not only adversarial"): the paper predicts that accumulation-
heavy eviction degrades most right after a topic boundary and that decay helps most there.

On ``adversary.topic_shift`` traces with budget ``k >= sinks + heavy_size + 1`` a cache that follows the topics
loses nothing, so OPT's regret is 0 in every window (derived from the generator, checked with ``nm_opt``).  In the
first topic ACC loses nothing either: every non-heavy token is attended only in its own row, so its score stays
below every heavy token's and the budget holds the sinks, the heavy set and the arrival.  The windows right after
each boundary and late in each later topic are then measured for ACC, DecayedACC and GD-A; the claim's verdict
(theorems/claims/attention.py) is read from them: ACC degrades from the first boundary on and does not recover.
"""

import pytest

from theorems.results.attention import topic_shift_table


@pytest.fixture(scope="module")
def table():
    return topic_shift_table(T=500, topic_length=100, heavy_size=6, k=10, window=20, seeds=2)


def test_opt_loses_nothing_in_any_window(table):
    for r in table.rows:
        assert r.opt_cost <= 1e-9 and r.params["opt_max_window"] <= 1e-9


def test_acc_loses_nothing_before_the_first_boundary_and_degrades_after(table):
    for r in table.rows:
        if r.policy == "ACC":
            assert r.params["first"] == 0.0
            assert r.params["after"] > 0.1 and r.params["late"] > 0.1, r.params


def test_decay_reduces_the_loss_after_boundaries(table):
    by = {(r.workload, r.policy): r.params for r in table.rows}
    for (w, p), params in by.items():
        if p == "DecayedACC":
            acc = by[(w, "ACC")]
            assert params["after"] < acc["after"] and params["late"] < acc["late"]
