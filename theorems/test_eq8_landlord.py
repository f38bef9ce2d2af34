"""Eq. 8 (paper Section 4(b); Young, Algorithmica 2002; Sleator & Tarjan 1985): with resource augmentation,
``ALG_k(σ) <= k/(k-h+1) * OPT_h(σ)`` for every σ and h <= k, additive constant 0 when both caches start empty.

Checked (on plain and on repeated-motif sequences, the shape of every classical lower bound) for every registered policy that declares the bound (metadata ``guarantee = "k/(k-h+1)"``: LRU, FIFO, FWF,
Landlord and GD-A -- Theorem 3 says GD-A inherits Landlord's bound) on hypothesis-fuzzed sequences (unit cost for
all; one fault cost per item and several requests per step for those that declare it ``weighted``, Landlord and
GD-A -- Young's setting: with a cost drawn per request the bound is false, see test_thm3_gda.py) and on seeded uniform/Zipf/weighted sequences; and the bound is tight: LRU and FIFO on
the cyclic sequence 1..k+1 realize a ratio that approaches k/(k-h+1) from below (the lower end is derived from a
count of Belady's faults on the cycle, not from a run).
"""

import pytest
from hypothesis import given, strategies as st

import policies
from adversary.strategies import item_cost_paging_traces, paging_traces, repeated_motif_traces
from kvcore.formulas import landlord_bound
from kvcore.optima import optimum
from theorems.results.classic import cyclic_table, eq8_table, upper_bound_policies
from theorems.tables import evaluate


@pytest.mark.parametrize("name", upper_bound_policies())
@given(trace=st.one_of(paging_traces(max_items=7, max_steps=40), repeated_motif_traces(7, max_repeat=20)),
       k=st.integers(1, 5), data=st.data())
def test_unit_cost_bound_on_fuzzed_sequences(name, trace, k, data):
    h = data.draw(st.integers(1, k), label="h")
    row = evaluate("eq8", policies.make(name), trace, k, h=h, bound=landlord_bound(k, h))
    assert row.holds, f"{name}: ALG_{k}={row.alg_cost} > {row.bound:.4g} * OPT_{h}={row.opt_cost} on {trace.items}"


@pytest.mark.parametrize("name", upper_bound_policies(weighted=True))
@given(trace=item_cost_paging_traces(max_items=6, max_steps=25, max_per_step=2), k=st.integers(2, 4),
       data=st.data())
def test_weighted_bound_on_fuzzed_sequences(name, trace, k, data):
    h = data.draw(st.integers(2, k), label="h")
    opt = optimum(trace, h)
    row = evaluate("eq8", policies.make(name), trace, k, h=h, bound=landlord_bound(k, h), opt_cost=opt.cost)
    assert row.holds, (f"{name}: ALG_{k}={row.alg_cost} > {row.bound:.4g} * OPT_{h}={row.opt_cost} on "
                       f"{[(q.tolist(), c.tolist()) for _, q, c in trace.steps()]}")


def test_bound_on_seeded_sequences():
    table = eq8_table(ks=(2, 3, 4), T=300, seeds=2)
    assert table.holds, table.explain()


def test_cyclic_sequence_approaches_the_bound():
    table = cyclic_table(ks=(2, 3, 4, 8), T_cycles=200)
    assert table.holds, table.explain()
    # tight, not merely below: OPT_h <= T/bound + (k+1) on the cycle, so bound - ratio <= bound^2 (k+1) / T
    for r in table.rows:
        T = r.params["T"]
        assert r.bound - r.ratio <= r.bound**2 * (r.k + 1) / T, f"{r.policy} k={r.k} h={r.h}: ratio {r.ratio}"


@pytest.mark.slow
def test_bound_large_k():
    table = eq8_table(ks=(8, 16), T=3000, seeds=3)
    assert table.holds, table.explain()
