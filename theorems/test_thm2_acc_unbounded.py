"""Theorem 2 (paper Section 5): undecayed accumulated attention (ACC) is not competitive.

NM: on decoy-and-sleeper (adversary/decoy_sleeper.py) ACC drops the sleeper at the crunch and loses
``1 - background`` on every suffix row, so its regret is at least ``(1 - background) * suffix`` while the exact
optimum (``nm_opt``) loses 0.  Both token orders are checked: the paper's literal order (sleeper, then filler)
works only against an ACC that protects the arriving token -- an ACC that scores arrivals 0 drops the filler
(score 0 < eps) and keeps the sleeper, losing only the filler's row; ``order="filler_first"`` defeats both.
RM (the paper's "recompute-model version"): with a stream of sleeper pairs ACC pays on every alternation from a
block's second re-request on, at least ``sum_blocks (len - 3)`` steps of cost >= 1, while OPT pays 0.
The bounds are read off the construction, not off a run.
"""

import pytest
from hypothesis import given, strategies as st

import policies
from adversary import decoy_and_sleeper
from kvcore.engine import run_nm
from kvcore.optima import nm_opt
from theorems.results.attention import thm2_nm_table, thm2_rm_table


def test_nm_regret_grows_with_the_suffix_while_opt_is_zero():
    table = thm2_nm_table(ks=(3, 4, 6), suffixes=(20, 40, 80))
    assert table.holds, table.explain()
    growing = [r for r in table.rows if r.params["prediction"] == "grows linearly"]
    assert len(growing) == 3 * 3 * 3
    for r in growing:
        assert r.alg_cost >= r.params["suffix"] - 1e-9 and r.opt_cost <= 1e-9


def test_literal_order_fails_against_acc_that_scores_arrivals_zero():
    table = thm2_nm_table(ks=(3, 5), suffixes=(30, 90))
    literal = [r for r in table.rows if r.params["order"] == "paper" and not r.params["protect_arrival"]]
    assert literal and all(r.holds for r in literal), table.explain()
    # bounded: the same loss (the filler's row, filler_mass = 1, background 0) at both suffix lengths, sleeper kept
    assert {r.alg_cost for r in literal} == {1.0}
    assert not any(r.params["sleeper_dropped"] for r in literal)


def test_background_mass_lowers_the_slope_to_one_minus_beta():
    table = thm2_nm_table(ks=(4,), suffixes=(25, 50), background=0.3)
    assert table.holds, table.explain()


@given(k=st.integers(2, 7), S=st.integers(1, 60), beta=st.sampled_from((0.0, 0.1, 0.4)),
       protect=st.booleans())
def test_filler_first_defeats_acc_on_generated_parameters(k, S, beta, protect):
    eps = 0.01
    tr = decoy_and_sleeper(k, eps, S, background=beta)
    regret = run_nm(policies.make("ACC", protect_arrival=protect), tr, k).cost
    assert regret >= (1 - beta) * S - 1e-9
    assert nm_opt(tr, k).cost <= 1e-9


def test_rm_stream_acc_pays_every_alternation_opt_pays_nothing():
    table = thm2_rm_table(ks=(3, 5), suffixes=(40, 80, 160))
    assert table.holds, table.explain()
    for k in (3, 5):
        paid = [r.params["paid_steps"] for r in table.rows if r.k == k]
        # linear in the number of sleepers: doubling the suffix at least doubles the paid steps (minus one block)
        assert paid[1] >= 2 * paid[0] - 7 and paid[2] >= 2 * paid[1] - 7, paid


@pytest.mark.slow
def test_larger_instances():
    assert thm2_nm_table(ks=(8, 16), suffixes=(200, 400)).holds
    assert thm2_rm_table(ks=(8,), suffixes=(400, 800)).holds
