"""Eq. 9 (paper Section 4(c)): randomized paging.

- Marking's expected cost is at most (2H_k - 1) OPT (Fiat, Karp, Luby, McGeoch, Sleator, Young, J. Algorithms 1991;
  the paper states 2H_k, a looser constant), checked as the 95% interval of the seed mean on marking-phase and
  uniform sequences and on fuzzed sequences.
- Yao's lower bound: on i.i.d. uniform requests over k+1 items every policy that keeps its cache full (LRU, FIFO,
  Marking, Random) has ratio -> H_k, while FWF's ratio -> k (its cost and Belady's are checked exactly per phase).
"""

from hypothesis import given, strategies as st

from adversary.strategies import paging_traces
from kvcore.formulas import harmonic
from theorems.check import measure_ratio
from theorems.conftest import explain
from theorems.results import marking_table, uniform_limit_table

import policies


def test_marking_within_2Hk_minus_1():
    table = marking_table(ks=(2, 3, 4), phases=30, seeds=12)
    assert table.holds, explain(table)


@given(trace=paging_traces(max_items=6, min_steps=4, max_steps=30), k=st.integers(2, 4))
def test_marking_on_fuzzed_sequences(trace, k):
    m = measure_ratio(lambda: policies.make("Marking"), trace, k, seeds=12)
    assert m.ci[0] <= m.bound + 1e-9, f"Marking mean ratio {m.ratio} (CI {m.ci}) > 2H_k-1 = {m.bound}"


def test_full_cache_policies_reach_Hk_and_fwf_reaches_k():
    table = uniform_limit_table(ks=(2, 3, 4), T=6000, seeds=6)
    assert table.holds, explain(table)
    fwf = [r for r in table.rows if r.policy == "FWF"]
    # FWF's ratio exceeds every full-cache policy's H_k as soon as k >= 3: the gap k vs H_k that Eq. 9 is about
    assert all(r.ratio > harmonic(r.k) for r in fwf if r.k >= 3)
