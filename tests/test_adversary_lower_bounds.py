"""Defining properties of the k+1 lower-bound workloads (adversary/lower_bounds.py)."""

import numpy as np
import pytest

from adversary import (adaptive_k_plus_one, adaptive_k_plus_one_nm, cyclic_k_plus_one, marking_phases,
                       phase_starts, uniform_k_plus_one)
from kvcore.engine import run_nm, run_rm
from kvcore.errors import ParameterError
from kvcore.optima.rm_flow import rm_opt
from kvcore.traces import PagingTrace
from policies import make

RM_POLICIES = ["LRU", "FIFO", "LFU", "LIFO", "FWF", "Landlord", "Marking", "Random"]


@pytest.mark.parametrize("name", RM_POLICIES)
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_adaptive_adversary_forces_a_fault_on_every_request(name, k):
    T = 40
    trace = adaptive_k_plus_one(make(name), k, T, seed=7)
    assert trace.T == T and set(trace.items.tolist()) <= set(range(k + 1))
    # replaying the fixed trace with the same seed reproduces the run: every request misses
    assert run_rm(make(name), trace, k, seed=7).misses == T


@pytest.mark.parametrize("k", [2, 3, 4])
def test_optimum_on_adaptive_trace_meets_the_k_plus_one_item_bound(k):
    # SPEC section 5: OPT_h <= (k-h+1)/k * n + h on any sequence over k+1 items
    T = 60
    trace = adaptive_k_plus_one(make("LRU"), k, T)
    for h in range(1, k + 1):
        assert rm_opt(trace, h).cost <= (k - h + 1) / k * T + h + 1e-9


def test_adaptive_adversary_requests_lowest_missing_item():
    # LRU with k = 2 on items {0, 1, 2}: cold 0, 1, then always the item LRU just evicted
    assert adaptive_k_plus_one(make("LRU"), 2, 7).items.tolist() == [0, 1, 2, 0, 1, 2, 0]
    # FIFO behaves the same here; LIFO keeps 0 and thrashes its last slot
    assert adaptive_k_plus_one(make("LIFO"), 2, 6).items.tolist() == [0, 1, 2, 1, 2, 1]


@pytest.mark.parametrize("name", ["LRU", "FIFO", "ACC"])
def test_nm_adaptive_adversary_costs_one_per_row_after_the_first_drop(name):
    k, T = 3, 30
    trace = adaptive_k_plus_one_nm(make(name), k, T)
    res = run_nm(make(name), trace, k, record=True)
    targets = np.array([trace.row(t)[0][0] for t in range(T)])
    aimed_back = targets < np.arange(T)
    assert aimed_back.sum() >= T - k - 1  # the first drop happens at step k at the latest
    assert np.all(res.per_step[aimed_back] == 1.0)
    assert res.cost == aimed_back.sum()


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_cyclic_sequence_has_period_k_plus_one(k):
    trace = cyclic_k_plus_one(k, 5 * (k + 1) + 2)
    seq = trace.items
    assert np.array_equal(seq[: k + 1], np.arange(k + 1))
    assert np.array_equal(seq[k + 1:], seq[: seq.size - (k + 1)])
    # LRU and FIFO fault on every request of it
    assert run_rm(make("LRU"), trace, k).misses == trace.T
    assert run_rm(make("FIFO"), trace, k).misses == trace.T


def test_uniform_is_seeded_and_uniform():
    a, b, c = (uniform_k_plus_one(4, 5000, seed=s) for s in (3, 3, 4))
    assert np.array_equal(a.items, b.items) and not np.array_equal(a.items, c.items)
    assert np.array_equal(uniform_k_plus_one(4, 50, np.random.default_rng(9)).items,
                          uniform_k_plus_one(4, 50, 9).items)
    counts = np.bincount(a.items, minlength=5)
    assert counts.size == 5
    # chi-square with 4 degrees of freedom; 18.47 is the 0.999 quantile
    chi2 = float(((counts - 1000) ** 2 / 1000).sum())
    assert chi2 < 18.47


def test_phase_starts_by_hand():
    trace = PagingTrace.unit([0, 1, 0, 2, 2, 1, 3, 3])
    assert phase_starts(trace, 2) == [0, 3, 6]
    assert phase_starts(trace, 4) == [0]
    multi = PagingTrace.from_steps([[0, 1], [2], [0, 2], [1]])
    assert phase_starts(multi, 2) == [0, 1, 3]


@pytest.mark.parametrize("k,new,n_items", [(3, 1, None), (4, 2, None), (4, 4, None), (3, 1, 4), (5, 2, 9)])
def test_marking_phases_have_the_requested_new_items(k, new, n_items):
    phases = 12
    trace = marking_phases(k, phases, new, seed=1, n_items=n_items)
    starts = phase_starts(trace, k) + [trace.T]
    assert len(starts) - 1 == phases
    sets = [set(trace.items[a:b].tolist()) for a, b in zip(starts, starts[1:])]
    assert all(len(s) == k for s in sets)
    assert all(len(cur - prev) == new for prev, cur in zip(sets, sets[1:]))
    if n_items is not None:
        assert trace.items.max() < n_items


def test_marking_phases_seeded():
    assert np.array_equal(marking_phases(4, 6, 2, seed=5).items, marking_phases(4, 6, 2, seed=5).items)


def test_bad_parameters_are_one_line_errors():
    with pytest.raises(ParameterError, match="k = 0"):
        cyclic_k_plus_one(0, 5)
    with pytest.raises(ParameterError, match="new_per_phase = 5"):
        marking_phases(4, 3, 5)
    with pytest.raises(ParameterError, match="n_items = 4"):
        marking_phases(4, 3, 1, n_items=4)
