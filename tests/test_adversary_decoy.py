"""Decoy-and-sleeper (adversary/decoy_sleeper.py): row sums, the documented masses, and what the construction
does to accumulated-attention rules versus the exact optimum (paper Section 5, Theorem 2 and Lemma 1)."""

import numpy as np
import pytest

from adversary import (decoy_and_sleeper, decoy_and_sleeper_rm, decoy_and_sleeper_rm_blocks,
                       decoy_and_sleeper_roles)
from kvcore.engine import run, run_nm
from kvcore.errors import ParameterError
from kvcore.optima.nm_flow import nm_opt
from kvcore.optima.rm_flow import rm_opt
from kvcore.traces import rm_requests_from_attention
from policies import make

CASES = [(2, 0.1, 1.0, 0.0), (3, 0.05, 1.0, 0.1), (5, 0.0, 0.6, 0.2), (6, 0.1, 0.9, 0.0)]


@pytest.mark.parametrize("order", ["paper", "filler_first"])
@pytest.mark.parametrize("k,eps,f,beta", CASES)
def test_rows_sum_to_one_and_masses_are_as_documented(order, k, eps, f, beta):
    suffix = 7
    trace = decoy_and_sleeper(k, eps, suffix, filler_mass=f, background=beta, order=order)
    roles = decoy_and_sleeper_roles(k, order)
    a = trace.to_dense()
    assert trace.T == k + 1 + suffix
    assert np.allclose(a.sum(axis=1), 1.0, atol=1e-12)
    pre = a[: roles.suffix_start].sum(axis=0)
    assert pre[roles.sleeper] == pytest.approx(eps, abs=1e-15)
    D = k - 1
    share = (1 - eps) / D if order == "paper" else (1 - f) / D
    for j in roles.decoys:
        expected = sum(1.0 / (t + 1) for t in range(j, k - 1)) + share + (1 - f if order == "paper" and j == 0 else 0)
        assert pre[j] == pytest.approx(expected, abs=1e-12)
        assert pre[j] > eps
    suffix_rows = a[roles.suffix_start:]
    assert np.all(suffix_rows[:, list(roles.decoys)] == 0)
    assert np.allclose(suffix_rows[:, roles.sleeper], 1 - beta)
    for t in range(roles.suffix_start, trace.T):
        assert a[t, t] == pytest.approx(beta)


@pytest.mark.parametrize("protect_arrival", [True, False])
@pytest.mark.parametrize("k,eps,beta", [(3, 0.05, 0.0), (5, 0.1, 0.2)])
def test_filler_first_defeats_acc_under_both_arrival_conventions(protect_arrival, k, eps, beta):
    suffix = 40
    trace = decoy_and_sleeper(k, eps, suffix, background=beta)
    assert nm_opt(trace, k).cost == pytest.approx(0.0, abs=1e-9)
    for name in ("ACC", "DecayedACC"):
        # DecayedACC too: in NM the sleeper is dropped right after priming, before decay can help (Lemma 1 gap)
        res = run_nm(make(name, protect_arrival=protect_arrival), trace, k)
        assert res.cost >= (1 - beta) * suffix - 1e-9


def test_paper_order_lets_acc_that_scores_arrivals_at_zero_keep_the_sleeper():
    # the finding: the arriving filler has score 0 < epsilon, so a rule that does not protect it drops the filler
    k, eps = 4, 0.05
    trace = decoy_and_sleeper(k, eps, 30, order="paper")
    roles = decoy_and_sleeper_roles(k, "paper")
    res = run_nm(make("ACC", protect_arrival=False), trace, k, record=True)
    assert roles.sleeper not in {i for _, i in res.evictions}
    assert (roles.suffix_start - 1, roles.filler) in res.evictions
    protected = run_nm(make("ACC", protect_arrival=True), trace, k, record=True)
    assert (roles.suffix_start - 1, roles.sleeper) in protected.evictions
    assert protected.cost >= 30 - 1e-9


def test_nm_parameter_checks():
    with pytest.raises(ParameterError, match="epsilon"):
        decoy_and_sleeper(5, 0.3, 10)  # the lightest decoy gets 1/4
    with pytest.raises(ParameterError, match="k = 1"):
        decoy_and_sleeper(1, 0.0, 10)
    with pytest.raises(ParameterError, match="filler_mass"):
        decoy_and_sleeper(4, 0.0, 10, filler_mass=0.0)


@pytest.mark.parametrize("k,priming,suffix,rounds,beta", [(3, 12, 40, 3, 0.0), (5, 40, 60, 4, 0.1),
                                                          (6, 60, 35, 5, 0.3)])
def test_rm_version_requests_and_masses(k, priming, suffix, rounds, beta):
    trace = decoy_and_sleeper_rm(k, priming, suffix, rounds, background=beta)
    assert trace.T == priming + suffix
    a = trace.to_dense()
    assert np.allclose(a.sum(axis=1), 1.0, atol=1e-12)
    decoys = list(range(k - 2))
    lightest = a[:, decoys].sum(axis=0).min()
    assert lightest == pytest.approx((priming - k + 3) / (k - 2))
    theta = 0.5
    req = rm_requests_from_attention(trace, theta)
    for blk in decoy_and_sleeper_rm_blocks(k, priming, suffix, rounds):
        assert a[:, blk.x].sum() < lightest and a[:, blk.y].sum() < lightest
        for t in range(blk.start, blk.stop):
            items = req.step(t)[0].tolist()
            r = t - blk.start
            assert items == ([t] if r < 2 else [t, blk.x if r % 2 == 0 else blk.y])
    assert a[priming:, decoys].sum() == 0


@pytest.mark.parametrize("k,priming,suffix,rounds", [(3, 12, 40, 3), (5, 40, 80, 4)])
def test_rm_version_acc_pays_every_alternation_while_opt_pays_nothing(k, priming, suffix, rounds):
    trace = decoy_and_sleeper_rm(k, priming, suffix, rounds)
    theta = 0.5
    assert rm_opt(rm_requests_from_attention(trace, theta), k).cost == 0.0
    acc = run(make("ACC"), trace, k, model="rm", theta=theta, record=True)
    for blk in decoy_and_sleeper_rm_blocks(k, priming, suffix, rounds):
        # from the second re-request of a block on, the two sleepers evict each other
        assert np.all(acc.per_step[blk.start + 3: blk.stop] > 0)


@pytest.mark.parametrize("gamma", [0.8, 0.9])
def test_rm_version_decayed_rule_stops_paying_with_room_for_two_pairs(gamma):
    # Lemma 1 in RM: once the decoys' decayed scores fall below the sleepers', the decayed rule keeps the active
    # pair; with k = 5 it also has room for the spent pair, so a fresh pair costs it nothing either
    k, priming, suffix = 5, 40, 200
    trace = decoy_and_sleeper_rm(k, priming, suffix, 4)
    dec = run(make("DecayedACC", gamma=gamma), trace, k, model="rm", theta=0.5, record=True)
    assert dec.per_step[priming:].sum() > 0
    assert dec.per_step[priming + suffix // 2:].sum() == 0.0


def test_rm_parameter_checks():
    with pytest.raises(ParameterError, match="priming = 10"):
        decoy_and_sleeper_rm(5, 10, 20, rounds=4)
    with pytest.raises(ParameterError, match="background"):
        decoy_and_sleeper_rm(5, 40, 20, rounds=4, background=0.5)
