"""Exact expected costs of randomized policies (:mod:`kvcore.exact_expectation`) against independent values.

* hand-computed: Random with k = 2 on ``0 1 2 0`` pays 3 + 1/2;
* closed form: Marking on :func:`adversary.two_new_per_phase` pays exactly ``k + (P - 1)(2H_k - 1)``
  (the generator's docstring derives it);
* a deterministic policy's exact expectation is its cost;
* sampling agrees: the exact value lies in a 99.9% interval of 400 seeded runs;
* what cannot be enumerated says so: a continuous draw (OnlineMin), too many states.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import policies
from adversary import oblivious_k_plus_one_nm, two_new_per_phase, uniform_k_plus_one
from kvcore.engine import run
from kvcore.exact_expectation import NotEnumerable, expected_cost
from kvcore.measure import mean_ci
from kvcore.traces import PagingTrace
from theorems.results.randomized import harmonic_exact


def test_random_on_a_hand_trace():
    """Cache {0, 1} is full when 2 arrives; Random drops 0 with probability 1/2, and then 0 faults again."""
    e = expected_cost(policies.make("Random"), PagingTrace.unit([0, 1, 2, 0]), 2)
    assert e.cost == Fraction(7, 2)
    assert e.per_step == [1, 1, 1, Fraction(1, 2)]


@pytest.mark.parametrize("k", [2, 3, 4])
def test_marking_on_two_new_per_phase_matches_its_closed_form(k):
    P = 6
    e = expected_cost(policies.make("Marking"), two_new_per_phase(k, P, seed=1), k)
    assert e.cost == k + (P - 1) * (2 * harmonic_exact(k) - 1)


def test_a_deterministic_policy_is_its_own_expectation():
    tr = uniform_k_plus_one(3, 60, seed=4)
    assert expected_cost(policies.make("LRU"), tr, 3).cost == run(policies.make("LRU"), tr, 3).cost
    assert expected_cost(policies.make("LRU"), tr, 3).states == 1


@pytest.mark.parametrize("name", ["Random", "Marking"])
def test_sampling_agrees_with_the_exact_value(name):
    tr = uniform_k_plus_one(3, 40, seed=2)
    exact = float(expected_cost(policies.make(name), tr, 3).cost)
    costs = [run(policies.make(name), tr, 3, seed=s).cost for s in range(400)]
    _, lo, hi = mean_ci(costs, 0.999)
    assert lo <= exact <= hi


def test_no_refetch_model():
    """NM, k = 1, three rows on the arriving token: Random drops the arrival or the resident token with
    probability 1/2 each at every step after the first, so each such row is lost with probability 1/2."""
    tr = oblivious_k_plus_one_nm(1, 3, 0)   # rows {0: 1}, {1: 1}, {0: 1}
    e = expected_cost(policies.make("Random"), tr, 1, "nm")
    assert e.per_step[:2] == [0, Fraction(1, 2)]
    assert e.model == "nm"


def test_what_cannot_be_enumerated_says_so():
    with pytest.raises(NotEnumerable, match="Generator.random"):
        expected_cost(policies.make("OnlineMin"), uniform_k_plus_one(2, 20, seed=0), 2)
    with pytest.raises(NotEnumerable, match="reachable states"):
        expected_cost(policies.make("Random"), uniform_k_plus_one(4, 200, seed=0), 4, max_states=3)
