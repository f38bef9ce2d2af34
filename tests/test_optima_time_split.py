"""The RM optimum solved half by half along the time line (:mod:`kvcore.optima.time_split`) is the exact optimum.

Small leaves force every trace through many splits and warm-started merges; the answer must equal the exhaustive DP
``brute_rm``, the whole-network simplex (``split_steps=None``, the previous default) and networkx, with ties, equal
costs, capacity 1, items requested once, several requests per step and costs spanning many binary exponents.  The
recorded schedule replays through the engine at the reported cost.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.errors import ParameterError
from kvcore.optima import brute_rm, rm_opt
from kvcore.optima.mincost import FlowNetwork
from kvcore.optima.time_split import solve_time_split
from kvcore.traces import PagingTrace
from tests.command_line import is_one_line_error, run_module
from tests.test_optima import paging_instances, replay_rm

LEAVES = st.integers(2, 6)


@st.composite
def tied_instances(draw, max_steps=30):
    """One or more requests per step over few items with costs from a two-value set (many equal-cost optima) or all
    equal, a capacity down to 1 where it fits, and items that are requested only once."""
    T = draw(st.integers(1, max_steps))
    n = draw(st.integers(1, 8))
    per = draw(st.integers(1, 2))
    steps = [draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=min(per, n), unique=True)) for _ in range(T)]
    values = draw(st.sampled_from([(1.0,), (1.0, 2.0), (0.5, 0.5), (0.0, 3.0)]))
    costs = [[draw(st.sampled_from(values)) for _ in q] for q in steps]
    widest = max(len(q) for q in steps)
    once = [[item + 100 + 10 * t for item in q] if draw(st.booleans()) and t % 5 == 0 else q
            for t, q in enumerate(steps)]  # fresh ids: requested exactly once
    return PagingTrace.from_steps(once, costs), draw(st.integers(widest, widest + 2))


@given(paging_instances(), LEAVES)
def test_split_equals_brute_force(inst, leaf):
    trace, h = inst
    res = rm_opt(trace, h, record=True, split_steps=leaf)
    assert res.cost == brute_rm(trace, h).cost
    assert res.certified and replay_rm(trace, res) == res.cost


@given(tied_instances(), LEAVES)
def test_split_equals_whole_network_and_networkx_on_ties(inst, leaf):
    trace, h = inst
    res = rm_opt(trace, h, record=True, split_steps=leaf)
    assert res.cost == rm_opt(trace, h, split_steps=None).cost == rm_opt(trace, h, solver="networkx").cost
    assert replay_rm(trace, res) == res.cost


@given(st.lists(st.sampled_from([1e-9, 1e20, 1.0, 3e-12, 7e15, 1e-300, 1e300]), min_size=40, max_size=40),
       st.integers(0, 2**32 - 1))
def test_split_is_exact_on_costs_of_every_magnitude(magnitudes, seed):
    """Costs whose exact integers do not fit int64: every range goes through the rounding and exact re-verification
    rounds of the simplex, and warm starts must survive them."""
    rng = np.random.default_rng(seed)
    items = rng.integers(0, 6, 40)
    trace = PagingTrace(items, np.array(magnitudes) * rng.integers(1, 4, 40), np.arange(41), source="mixed")
    res = rm_opt(trace, 3, split_steps=4)
    assert res.cost == rm_opt(trace, 3, solver="networkx").cost and res.certified


@pytest.mark.parametrize("leaf", [7, 100, 999])
def test_split_on_a_medium_zipf_trace(leaf):
    """3,000 weighted Zipf requests over 300 items, capacity 20: many ranges, every merge repairs a busy cut."""
    from bench.workloads import weighted_zipf_trace

    trace = weighted_zipf_trace(3000, 300, seed=5)
    whole = rm_opt(trace, 20, split_steps=None)
    res = rm_opt(trace, 20, record=True, split_steps=leaf)
    assert res.cost == whole.cost == rm_opt(trace, 20, solver="highs").cost
    assert replay_rm(trace, res) == res.cost


def _line_network(**change) -> FlowNetwork:
    """Three nodes, line arcs 0->1, 1->2 and one gap 0->2, two units idle on the line; ``change`` breaks a field."""
    fields = dict(n_nodes=3, tail=np.array([0, 1, 0]), head=np.array([1, 2, 2]), lower=np.array([1, 1, 0]),
                  cap=np.array([2, 2, 1]), cost=np.array([0, 0, -1]), cost_unit=1, supply=np.array([2, 0, -2]),
                  start=np.array([2, 2, 0]), scan_order=None)
    fields.update(change)
    return FlowNetwork(**fields)


def test_split_solves_a_line_network_and_refuses_others():
    assert solve_time_split(_line_network(), leaf=2).flow.tolist() == [1, 1, 1]  # the gap is kept: -1
    for broken in (dict(start=np.array([2, 2, 1]), lower=np.array([1, 1, 1])),  # gap arc not empty
                   dict(tail=np.array([1, 0, 0]), head=np.array([2, 1, 2])),  # line arcs not first
                   dict(tail=np.array([0, 1, 2]), head=np.array([1, 2, 0])),  # an arc backward in time
                   dict(supply=np.array([1, 1, -2]))):  # supply not at the ends
        with pytest.raises(ValueError, match="time split"):
            solve_time_split(_line_network(**broken), leaf=2)
    with pytest.raises(ParameterError, match="split_steps = 1: must be at least 2"):
        rm_opt(PagingTrace.unit([0, 1, 0]), 1, split_steps=1)
    with pytest.raises(ParameterError, match="split_steps = 0"):
        rm_opt(PagingTrace.unit([0, 1, 0]), 1, solver="highs", split_steps=0)


def test_the_benchmark_command_line():
    """``python -m bench.rm_optimum`` as a user types it: both solvers in fresh processes, equal certified costs, the
    ratio printed; bad input is one line with exit status 2."""
    code, out, err = run_module("bench.rm_optimum", "--sizes", "3000", "--capacity", "40", "--json")
    assert code == 0, err
    row, = json.loads(out)["rows"]
    assert row["same_cost"] and row["certified"] and row["new"]["cost"] == row["previous"]["cost"]
    assert row["cpu_ratio"] == row["new"]["cpu_seconds"] / row["previous"]["cpu_seconds"]
    code, out, err = run_module("bench.rm_optimum", "--sizes", "3000", "--capacity", "40")
    assert code == 0 and "new / previous" in out and "same cost: True" in out
    assert is_one_line_error(*run_module("bench.rm_optimum", "--sizes", "0")[::2], "--sizes")
