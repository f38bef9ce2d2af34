"""LRU's phase argument (paper Section 2.2; Sleator & Tarjan 1985): split a sequence into maximal k-phases (runs
with at most k distinct items); LRU faults at most k times in each phase, and OPT_k faults at least once per phase
boundary, so LRU_k <= k * OPT_k + k.  Checked on seeded uniform and Zipf sequences and on fuzzed ones, for LRU and for
every policy the argument also covers (FIFO and FWF never evict an item requested in the current phase either)."""

import pytest
from hypothesis import given, strategies as st

from adversary.strategies import paging_traces
from theorems.results.classic import lru_phase_table, phase_argument_rows


def test_phase_argument_on_seeded_sequences():
    table = lru_phase_table(ks=(2, 3, 4, 8), T=1500, seeds=3)
    assert table.holds, table.explain()


@pytest.mark.parametrize("name", ["LRU", "FIFO", "FWF"])
@given(trace=paging_traces(max_items=7, max_steps=40), k=st.integers(1, 5))
def test_phase_argument_on_fuzzed_sequences(name, trace, k):
    row = phase_argument_rows(name, trace, k, "fuzzed")
    assert row.holds, f"{name}: {row.alg_cost} faults in one phase (k={k}) or OPT {row.opt_cost} < phases-1 {row.params}"
