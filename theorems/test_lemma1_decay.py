"""Lemma 1 (paper Section 5): geometric decay is claimed to bound the accumulated-attention rule's regret on the
decoy-and-sleeper construction, the regret stopping after ``W_gamma = ln(1/eps)/ln(1/gamma)`` steps.

Measured (theorems/results/attention.py, read with ``eps = 1 - gamma``: the proof's decoy bound
``gamma^(t-P)/(1-gamma)`` falls below a sleeper score of 1 after ``W_gamma`` steps):
* NM: false for every gamma -- the crunch comes right after the decoys' last attention, the decayed decoy scores
  still exceed the sleeper's eps, the sleeper is dropped and never returns: regret >= (1-beta) * suffix.
* RM, one sleeper pair (the proof's setting): true for every (k, gamma) tried, and the last recompute comes at
  most ``W_gamma + 2`` steps after priming (the two arrival rows of the block carry no sleeper mass).
* RM, a stream of sleeper pairs: false for small k with slow decay (each new block pays at least once).
"""

import math

import pytest

from theorems.results.attention import lemma1_nm_table, lemma1_rm_table, w_gamma


def test_w_gamma_formula():
    assert w_gamma(0.9) == pytest.approx(math.log(10) / math.log(1 / 0.9))
    assert w_gamma(0.5, eps=0.25) == pytest.approx(2.0)


def test_nm_decayed_rule_drops_the_sleeper_for_every_gamma():
    table = lemma1_nm_table(ks=(3, 5), gammas=(0.5, 0.8, 0.95), suffixes=(40, 80))
    for r in table.rows:
        for S, regret in zip(r.params["suffixes"], r.params["regrets"]):
            assert regret >= S - 1e-9, (r.k, r.params)
        assert r.holds is False


def test_rm_single_pair_stops_paying_within_w_gamma():
    table = lemma1_rm_table(ks=(3, 4, 5, 8), gammas=(0.5, 0.7, 0.8, 0.9, 0.95), suffix=120, single=True)
    assert table.holds, table.explain()
    # the window is tight at k = 3 (one decoy, attended at every priming step): it stops within 2 of W_gamma + 2
    for r in table.rows:
        if r.k == 3 and r.params["gamma"] >= 0.8:
            assert r.params["last_paid_offset"] >= r.params["W_gamma"], r.params


def test_rm_stream_is_unbounded_for_small_k_and_slow_decay():
    table = lemma1_rm_table(ks=(3, 4), gammas=(0.8, 0.9, 0.95), suffix=120)
    blocks_added = 120 // (2 + 2 * 4)
    for r in table.rows:
        short, long = r.params["paid"]
        assert long - short >= blocks_added, (r.k, r.params)   # at least one recompute per added block
    fast = lemma1_rm_table(ks=(5, 8), gammas=(0.5, 0.7), suffix=120)
    assert all(r.params["bounded"] for r in fast.rows), fast.explain()


@pytest.mark.slow
def test_larger_grid():
    table = lemma1_rm_table(ks=(3, 6, 12), gammas=(0.9, 0.95, 0.98), suffix=400, single=True)
    assert table.holds, table.explain()
