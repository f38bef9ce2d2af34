"""The paper's two "Belady analogs" (Sections 3-4), checked against the exact optima.

NM: "keep the k tokens with the most future mass" (``kvcore.optima.future_mass_heuristic``) is a feasible schedule,
so ``nm_opt <= heuristic`` always; it is not optimal.  Hand-checked counterexample (kvcore/optima/future_mass.py):
rows (1), (.6, .4), (0, .4, .6), h = 1 -- the rule keeps token 1 at step 1 (future mass .8 > .6) and loses .6, then
.4: regret 1; keeping token 0 through step 1 and then token 2 loses .4 + .4 = .8.
RM: "evict the token whose next above-threshold attention is furthest" is Belady's rule; it equals ``rm_opt`` with
unit costs, but not with recompute costs growing with position: the 6-token trace of tests/test_optima.py (theta =
1/4, w_i = 1 + (i+1)/6, h = 3) makes it refetch token 2 (cost 1 + 3/6) where the optimum refetches token 0 (1 + 1/6).
"""

import pytest
from hypothesis import given, strategies as st

from adversary.strategies import paging_traces, sparse_attention_traces
from adversary import future_mass_counterexample, position_cost_counterexample
from kvcore.optima import brute_nm, furthest_next_heuristic, future_mass_heuristic, nm_opt, rm_opt
from theorems.results.attention import nm_belady_table, rm_belady_table


def test_future_mass_counterexample_by_hand():
    tr = future_mass_counterexample()
    assert future_mass_heuristic(tr, 1).cost == pytest.approx(1.0)
    assert nm_opt(tr, 1).cost == pytest.approx(0.8) == brute_nm(tr, 1).cost


def test_exhaustive_tiny_traces():
    table = nm_belady_table(T=4, levels=(0.2, 0.5, 0.8), hs=(1, 2))
    assert table.holds, table.explain()     # OPT <= heuristic everywhere
    assert table.rows[0].params["separates"]
    assert table.rows[1].params["separating"] > 0


@given(tr=sparse_attention_traces(max_T=9, max_support=3), h=st.integers(1, 3))
def test_heuristic_is_feasible_never_better_than_opt(tr, h):
    opt = nm_opt(tr, h).cost
    assert opt == pytest.approx(brute_nm(tr, h).cost, abs=1e-9)
    assert future_mass_heuristic(tr, h).cost >= opt - 1e-9


def test_rm_furthest_next_attention():
    req = position_cost_counterexample()
    assert furthest_next_heuristic(req, 3).cost == pytest.approx(1 + 3 / 6)
    assert rm_opt(req, 3).cost == pytest.approx(1 + 1 / 6)
    table = rm_belady_table(seeds=15, T=30, ks=(4, 5))
    assert table.holds, table.explain()      # OPT <= rule; unit costs: rule == OPT
    assert sum(r.params["separating_weighted"] for r in table.rows[1:]) > 0


@given(trace=paging_traces(max_items=6, max_steps=30, max_per_step=2), k=st.integers(2, 4))
def test_furthest_next_is_optimal_with_unit_costs(trace, k):
    assert furthest_next_heuristic(trace, k).cost == rm_opt(trace, k).cost
