"""Exact expected costs of randomized policies (:mod:`kvcore.exact_expectation`) against independent values.

* hand-computed: Random with k = 2 on ``0 1 2 0`` pays 3 + 1/2;
* a step of several draws (two requests forcing two evictions): a direct recursion over resident-set
  distributions, written from Random's definition alone;
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
from kvcore.engine import RMSimulator
from kvcore.exact_expectation import NotEnumerable, _ScriptedDraws, _state_key, expected_cost
from kvcore.measure import mean_ci
from kvcore.traces import PagingTrace
from theorems.results.randomized import harmonic_exact


def test_random_on_a_hand_trace():
    """Cache {0, 1} is full when 2 arrives; Random drops 0 with probability 1/2, and then 0 faults again."""
    e = expected_cost(policies.make("Random"), PagingTrace.unit([0, 1, 2, 0]), 2)
    assert e.cost == Fraction(7, 2)
    assert e.per_step == [1, 1, 1, Fraction(1, 2)]


def random_eviction_reference(steps: list[list[int]], k: int) -> Fraction:
    """Random's exact expected unit cost, independently of the engine: the distribution over resident sets, each
    request of a step served in order; a miss into a full cache evicts a resident not requested in this step, each
    with equal probability (Random's docstring: a resident, unprotected item chosen uniformly)."""
    dist, total = {frozenset(): Fraction(1)}, Fraction(0)
    for step in steps:
        for item in step:
            nxt: dict[frozenset, Fraction] = {}
            for cache, p in dist.items():
                if item not in cache:
                    total += p
                outcomes = [cache] if item in cache else [cache | {item}] if len(cache) < k else \
                    [(cache - {x}) | {item} for x in cache if x not in step]
                for after in outcomes:
                    nxt[after] = nxt.get(after, Fraction(0)) + p / len(outcomes)
            dist = nxt
    return total


def test_a_step_of_two_draws():
    """k = 3, then the step [3, 4] misses twice into a full cache: two draws (3 then 2 candidates), each pair of
    victims with probability 1/6 + 1/6; the old item left survives with probability 1/3, so the next request of 0
    misses with probability 2/3.  The per-step values and the total agree with the independent recursion."""
    steps = [[0], [1], [2], [3, 4], [0], [1], [2]]
    e = expected_cost(policies.make("Random"), PagingTrace.from_steps(steps), 3)
    assert e.per_step[3:5] == [2, Fraction(2, 3)]
    assert e.cost == random_eviction_reference(steps, 3)
    assert [random_eviction_reference(steps[:t + 1], 3) for t in range(len(steps))] == \
        [sum(e.per_step[:t + 1]) for t in range(len(steps))]


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


def test_the_scripted_draws_answer_every_value_of_the_range():
    """``integers(low, high)`` and ``integers(low, high, endpoint=True)`` answer ``low + script[j]`` and record the
    number of outcomes, as numpy's generator ranges are: ``high - low``, one more with the endpoint (mutants
    survived where only ``integers(n)`` from 0 was exercised)."""
    draws = _ScriptedDraws([0, 1, 2, 3], max_draws=8)
    assert [draws.integers(2, 5), draws.integers(2, 5), draws.integers(2, 5, endpoint=True),
            draws.integers(2, 5, endpoint=True)] == [2, 3, 4, 5]
    assert draws.arities == [3, 3, 4, 4]
    assert draws.integers(7) == 0 and draws.arities[-1] == 7  # past the script: the first outcome


def test_the_state_key_is_every_attribute_but_the_generator():
    """Two runs merge only if the resident set and every policy attribute but ``rng`` agree, whatever the
    attribute's name (a mutant that kept only names sorting before "rng" survived the other tests)."""
    sims = [RMSimulator(policies.make("Random"), 2, seed=0) for _ in range(3)]
    sims[1].policy.zone = 1  # a name sorting after "rng"
    sims[2].policy.rng = None  # the generator alone differs
    assert _state_key(sims[0]) != _state_key(sims[1])
    assert _state_key(sims[0]) == _state_key(sims[2])
