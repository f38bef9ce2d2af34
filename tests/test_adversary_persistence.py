"""Persistence generators and Theorem 4's quantities (adversary/persistence.py), checked against brute-force
recomputation on dense matrices."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adversary import (enforce_persistence, heavy_union_size, idle_token_spike, persistence_holds,
                       persistence_violations, persistent_attention, tail_mass, tail_mass_per_step,
                       zipf_focus_attention, zipf_weights)
from adversary.strategies import sparse_attention_traces
from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace

PARAMS = st.tuples(st.sampled_from([0.25, 0.5, 0.9, 1.0]), st.integers(1, 4), st.sampled_from([0.1, 0.3, 0.5, 1.0]))


def brute_violations(a, rho, W, tau):
    T = a.shape[0]
    return [(t, i) for t in range(T) for i in range(t)
            if a[t, i] >= tau and not (a[max(0, t - W):t, i] >= rho * tau).any()]


def brute_union(a, rho, W, tau):
    T = a.shape[0]
    return max(int((a[max(0, t - W):t + 1] >= rho * tau).any(axis=0).sum()) for t in range(T))


@given(sparse_attention_traces(max_T=12, max_support=5), PARAMS)
def test_quantities_match_brute_force(trace, params):
    rho, W, tau = params
    a = trace.to_dense()
    assert persistence_violations(trace, rho, W, tau) == brute_violations(a, rho, W, tau)
    assert persistence_holds(trace, rho, W, tau) == (not brute_violations(a, rho, W, tau))
    assert heavy_union_size(trace, rho, W, tau) == brute_union(a, rho, W, tau)
    assert tail_mass(trace, tau) == pytest.approx(float(a[a < tau].sum()), abs=1e-12)
    assert np.allclose(tail_mass_per_step(trace, tau), np.where(a < tau, a, 0).sum(axis=1))


def test_quantities_by_hand():
    a = np.array([[1.0, 0, 0, 0],
                  [0.6, 0.4, 0, 0],
                  [0.1, 0.2, 0.7, 0],
                  [0.05, 0.8, 0.05, 0.1]])
    tr = AttentionTrace.from_dense(a)
    # tau = 0.5, rho = 0.5: token 1 is heavy at step 3; it had 0.4 >= 0.25 at step 1, 0.2 < 0.25 at step 2
    assert persistence_violations(tr, 0.5, 1, 0.5) == [(3, 1)]
    assert persistence_holds(tr, 0.5, 2, 0.5)
    # heavy sets at 0.25: {0}, {0, 1}, {2}, {1}; the union over [1, 2] is {0, 1, 2}
    assert heavy_union_size(tr, 0.5, 1, 0.5) == 3
    # heavy sets at 0.5: {0}, {0}, {2}, {1}; unions over [t-1, t]: {0}, {0}, {0, 2}, {1, 2}; over everything: 3
    assert heavy_union_size(tr, 0.5, 1, 1.0) == 2
    assert heavy_union_size(tr, 0.5, 3, 1.0) == 3
    assert tail_mass(tr, 0.5) == pytest.approx(0.4 + 0.1 + 0.2 + 0.05 + 0.05 + 0.1)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rho,W,tau", [(0.5, 4, 0.2), (0.3, 2, 0.1), (0.8, 8, 0.3)])
def test_generator_is_persistent_and_the_spike_breaks_it(seed, rho, W, tau):
    tr = persistent_attention(400, rho, W, tau, zipf_s=1.2, sinks=2, revisit=0.5, seed=seed)
    assert np.allclose(np.add.reduceat(tr.weights, tr.indptr[:-1]), 1.0)
    assert persistence_holds(tr, rho, W, tau)
    spiked = idle_token_spike(tr, 300, max(tau, 0.5), rho, W, tau)
    bad = persistence_violations(spiked, rho, W, tau)
    assert bad and bad[0][0] == 300
    assert not persistence_holds(spiked, rho, W, tau)


def test_enforcement_changes_only_violating_entries_and_keeps_the_row_sums():
    rho, W, tau = 0.5, 3, 0.2
    base = zipf_focus_attention(300, revisit=0.8, churn=0.5, seed=11)
    bad = persistence_violations(base, rho, W, tau)
    assert bad  # the base generator with revisits does break persistence
    fixed = enforce_persistence(base, rho, W, tau)
    assert persistence_holds(fixed, rho, W, tau)
    assert np.allclose(np.add.reduceat(fixed.weights, fixed.indptr[:-1]), 1.0)
    a, b = base.to_dense(), fixed.to_dense()
    changed = {(int(t), int(i)) for t, i in zip(*np.nonzero(~np.isclose(a, b)))}
    touched_rows = {t for t, _ in changed}
    for t, i in changed:  # every off-diagonal change is a cut to rho*tau, paid into the arriving token
        if i < t:
            assert b[t, i] == pytest.approx(rho * tau) and a[t, i] >= tau
        else:
            assert b[t, t] > a[t, t]
    assert touched_rows >= {bad[0][0]}
    assert enforce_persistence(fixed, rho, W, tau).weights.tolist() == fixed.weights.tolist()


def test_generators_are_seeded():
    a = persistent_attention(100, 0.5, 3, 0.2, seed=3)
    b = persistent_attention(100, 0.5, 3, 0.2, seed=np.random.default_rng(3))
    c = persistent_attention(100, 0.5, 3, 0.2, seed=4)
    assert np.array_equal(a.weights, b.weights) and np.array_equal(a.indices, b.indices)
    assert not (a.indices.size == c.indices.size and np.array_equal(a.indices, c.indices))


def test_zipf_weights():
    w = zipf_weights(4, 1.0)
    assert np.allclose(w, np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    assert np.allclose(zipf_weights(5, 0.0), 0.2)


def test_parameter_checks():
    tr = persistent_attention(50, 0.5, 3, 0.2)
    with pytest.raises(ParameterError, match="W = 0"):
        persistence_holds(tr, 0.5, 0, 0.2)
    with pytest.raises(ParameterError, match="rho = 1"):
        enforce_persistence(tr, 1.0, 3, 0.2)
    with pytest.raises(ParameterError, match="mass = 0.1"):
        idle_token_spike(tr, 30, 0.1, 0.5, 3, 0.2)
    with pytest.raises(ParameterError, match="token = 49"):
        idle_token_spike(tr, 40, 0.5, 0.5, 3, 0.2, token=49)
