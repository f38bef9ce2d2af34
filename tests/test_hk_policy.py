"""OnlineMin (``policies/online_min.py``) is H_k-competitive: the optimal randomized ratio of Eq. 9 is reached.

Checked against the slow references of ``tests/hk_reference.py`` (explicit Koutsoupias-Papadimitriou layers, the
selection process recomputed from scratch for every priority order) and the exact optimum (Belady):

(a) exactness -- for every fixed priority order the policy's cache equals the lowest-priority valid configuration
    at every step; the sampled policy's per-step cache distribution and mean cost agree with the exact ones; the
    exact expected cost satisfies ``E[ALG] <= H_k OPT`` (additive constant 0: both caches start empty, cold misses
    count) on every sequence of length <= 8 over k+1 items (k = 1, 2, 3) and over k+2 items (k = 2), and on
    hypothesis-generated sequences -- while Marking's exact cost exceeds ``H_k OPT`` on a 12-request sequence;
(b) the classic constructions (cyclic and uniform k+1, marking phases) and the two-new-items-per-phase family on
    which Marking tends to ``2H_k - 1``: OnlineMin's seed-mean ratio stays within ``H_k`` (lower end of its 95%
    interval), Marking's exact cost there is ``k + (P - 1)(2H_k - 1)`` against an optimum of at most ``P + k``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policies
from adversary.lower_bounds import cyclic_k_plus_one, marking_phases, two_new_per_phase, uniform_k_plus_one
from kvcore.engine import RMSimulator
from kvcore.formulas import harmonic
from kvcore.measure import mean_ci, measure
from kvcore.optima import belady
from kvcore.traces import PagingTrace
from tests.hk_reference import (
    exhaustive_online_min,
    harmonic_fraction,
    initial_layers,
    kp_update,
    lowest_priority_configuration,
    marking_exact_cost,
    online_min_exact,
)

NAME = "OnlineMin"


def optimum(seq, k: int) -> int:
    return int(belady(PagingTrace.unit(np.asarray(seq, dtype=np.int64)), k).cost)


def test_metadata():
    info = policies.get(NAME)
    assert not info.deterministic and info.models == ("rm",)
    assert info.cls.guarantee == "H_k" and info.cls.weighted is False
    assert "Brodal" in info.citation


# -- (a) the rule against the selection process, order by order ----------------------------------------------------


class ScriptedPriorities:
    """Stands in for the run's generator: the n-th draw is the priority of the n-th request's item, fixed per item,
    so the run is the selection process for one priority order."""

    def __init__(self, requests, rank):
        self.values = [float(rank[r]) for r in requests]
        self.draws = 0

    def random(self):
        value = self.values[self.draws]
        self.draws += 1
        return value


@settings(max_examples=max(20, settings.default.max_examples))
@given(data=st.data())
def test_cache_is_the_lowest_priority_valid_configuration_for_every_order(data):
    k = data.draw(st.integers(2, 5), label="k")
    n = data.draw(st.integers(k + 1, k + 3), label="items")
    seq = data.draw(st.lists(st.integers(0, n - 1), min_size=k + 1, max_size=24), label="requests")
    orders = data.draw(st.lists(st.permutations(range(n)), min_size=1, max_size=6), label="orders, lowest first")
    for order in orders:
        rank = {p: r for r, p in enumerate(order)}
        pol = policies.make(NAME)
        sim = RMSimulator(pol, k, seed=0)
        pol.rng = ScriptedPriorities(seq, rank)
        layers = initial_layers(k)
        for t, r in enumerate(seq):
            sim.step([r])
            layers, _ = kp_update(layers, r)
            expected = {p for p in lowest_priority_configuration(layers, rank) if p >= 0}
            assert set(sim.resident) == expected, f"step {t}: requests {seq[:t + 1]}, order {order}"
        assert pol.rng.draws == len(seq)  # one priority per request, nothing else drawn


# -- (a) sampled runs against the exact distribution ----------------------------------------------------------------

SAMPLED = [(2, [0, 1, 2, 0, 3, 1, 2, 3, 0, 2]), (3, [0, 1, 2, 3, 4, 0, 2, 4, 1, 3, 0]), (3, [0, 1, 2, 3, 0, 1, 2, 3])]
RUNS = 1500


@pytest.mark.parametrize("k,seq", SAMPLED)
def test_sampled_runs_follow_the_exact_distribution(k, seq):
    exact = online_min_exact(seq, k)
    seen = [dict() for _ in seq]
    costs = []
    for seed in range(RUNS):
        sim = RMSimulator(policies.make(NAME), k, seed=seed)
        for t, r in enumerate(seq):
            sim.step([r])
            cache = frozenset(sim.resident)
            seen[t][cache] = seen[t].get(cache, 0) + 1
        costs.append(sim.cost)
    for t, (dist, counts) in enumerate(zip(exact.distributions, seen)):
        assert set(counts) <= set(dist), f"step {t}: a cache the exact distribution gives probability 0"
        for cache, p in dist.items():
            p = float(p)
            freq = counts.get(cache, 0) / RUNS
            # 5 standard errors (+ one count): a chance failure has probability below 1e-6 per cell
            assert abs(freq - p) <= 5 * math.sqrt(p * (1 - p) / RUNS) + 1 / RUNS, (t, sorted(cache), freq, p)
    mean, lo, hi = mean_ci(costs, confidence=0.999)
    assert lo <= float(exact.expected_cost) <= hi, (mean, float(exact.expected_cost))


# -- (a) the bound, exactly ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k,n_items,max_len", [(1, 2, 8), (2, 3, 8), (3, 4, 8), (2, 4, 8)])
def test_exact_expected_cost_within_Hk_on_every_short_sequence(k, n_items, max_len):
    """Every sequence up to renaming; the layers' L_0 count is the optimum (checked against Belady) and the exact
    expected cost is at most H_k times it, with additive constant 0."""
    hk = harmonic_fraction(k)
    worst = None
    for seq, cost, opt in exhaustive_online_min(k, n_items, max_len):
        assert opt == optimum(seq, k), f"{seq}: layers count {opt}, Belady {optimum(seq, k)}"
        assert cost <= hk * opt, f"{seq}: E[OnlineMin] = {cost} > H_{k} * OPT = {hk * opt}"
        gap = cost - hk * opt
        worst = gap if worst is None else max(worst, gap)
    # the largest excess is the first request's (both pay the cold miss): 1 - H_k
    assert worst == 1 - hk


@settings(max_examples=max(20, settings.default.max_examples // 2))
@given(k=st.integers(2, 4), data=st.data())
def test_exact_expected_cost_within_Hk_on_generated_sequences(k, data):
    n = data.draw(st.integers(k + 1, 5), label="items")
    seq = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=16), label="requests")
    exact = online_min_exact(seq, k)
    assert exact.opt == optimum(seq, k)
    assert exact.expected_cost <= harmonic_fraction(k) * exact.opt, (seq, exact.expected_cost, exact.opt)


def test_marking_exceeds_Hk_where_online_min_does_not():
    """k = 2: the 12-request sequence over 4 items with the largest ``E[Marking] - H_2 OPT`` (exhaustive search)."""
    seq, k = [0, 1, 2, 3, 0, 1, 3, 2, 1, 0, 2, 0], 2
    opt = optimum(seq, k)
    assert opt == 7
    assert marking_exact_cost(seq, k) == Fraction(23, 2) > Fraction(3, 2) * opt
    assert online_min_exact(seq, k).expected_cost <= Fraction(3, 2) * opt


# -- (b) the constructions ------------------------------------------------------------------------------------------

KS = range(2, 9)
SEEDS = range(24)


def constructions(k: int) -> dict[str, PagingTrace]:
    phases = 40
    return {
        "cyclic k+1": cyclic_k_plus_one(k, phases * k),
        "uniform k+1": uniform_k_plus_one(k, phases * k, seed=k),
        "marking phases, 1 new of k+1": marking_phases(k, phases, 1, seed=k, n_items=k + 1),
        "marking phases, 2 new of k+2": marking_phases(k, phases, 2, seed=k, n_items=k + 2),
        "two new per phase": two_new_per_phase(k, phases, seed=k),
    }


@pytest.mark.parametrize("k", KS)
def test_online_min_within_Hk_on_the_constructions(k):
    for label, trace in constructions(k).items():
        m = measure(policies.resolve(NAME), trace, k, seeds=SEEDS, opt=belady(trace, k))
        lo, hi = m.ci[1] / m.opt_cost, m.ci[2] / m.opt_cost
        assert m.within(harmonic(k)), f"{label}, k={k}: ratio {m.ratio:.3f} (95% CI {lo:.3f}..{hi:.3f}) > H_k"


@pytest.mark.parametrize("k", KS)
def test_marking_tends_to_2Hk_minus_1_on_two_new_per_phase(k):
    phases = 40
    trace = two_new_per_phase(k, phases, seed=k)
    opt = belady(trace, k).cost
    assert opt <= phases + k  # the parking strategy of the family's docstring
    expected = k + (phases - 1) * (2 * harmonic(k) - 1)
    if k <= 4:  # the exact distribution of (cache, marks) stays small
        assert marking_exact_cost(trace.items.tolist(), k) == k + (phases - 1) * (2 * harmonic_fraction(k) - 1)
    m = measure(policies.resolve("Marking"), trace, k, seeds=SEEDS, opt=opt)
    _, lo, hi = mean_ci(m.costs, confidence=0.999)  # seven k's: a 95% interval would miss one k in three runs
    assert lo <= expected <= hi, (m.ci, expected)
    # Marking's whole interval lies above H_k (the gap Eq. 9 is about), and its ratio is at least
    # (2H_k - 1) P / (P + k) -> 2H_k - 1 since k >= 2H_k - 1
    assert m.ci[1] / opt > harmonic(k)
    assert expected / opt >= (2 * harmonic(k) - 1) * phases / (phases + k)
