"""The fast kernels equal the plain reference, request by request (policies.kernels, policies.fast).

Reference = the registered policy run through the checked engine (kvcore.engine.run_rm) for LRU, FIFO and LFU, and
kvcore.optima.belady for Belady.  Both execution paths of every kernel are checked: the compiled one (numba, when
installed) and the interpreted one (the same function run as plain Python), so CI covers the kernels with or
without the optional ``fast`` extra.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.engine import run_rm
from kvcore.errors import ParameterError
from kvcore.traces import PagingTrace
from policies import kernels, make
from policies.base import Policy
from policies.fast import KERNELS, dense_ids, hits_per_step, lru_miss_curve, simulate_fast

KERNEL_POLICIES = ("LRU", "FIFO", "LFU")


@st.composite
def traces(draw, max_len=80):
    """Unit traces over a few items; ids sometimes far apart, so the ``np.unique`` renumbering path runs too."""
    n_items = draw(st.integers(1, 10))
    spread = draw(st.sampled_from([1, 1, 1_000_003]))
    seq = draw(st.lists(st.integers(0, n_items - 1), min_size=1, max_size=max_len))
    k = draw(st.integers(1, n_items + 1))
    return np.asarray(seq, dtype=np.int64) * spread, k


def engine_hits(name: str, seq: np.ndarray, k: int) -> np.ndarray:
    res = run_rm(make(name), PagingTrace.unit(seq), k, record=True)
    return res.per_step == 0.0


@pytest.mark.parametrize("name", KERNEL_POLICIES)
@given(case=traces())
def test_kernel_hits_equal_engine_step_by_step(name, case):
    seq, k = case
    expected = engine_hits(name, seq, k)
    np.testing.assert_array_equal(hits_per_step(name, seq, k), expected)
    np.testing.assert_array_equal(hits_per_step(name, seq, k, compiled=False), expected)
    assert simulate_fast(name, seq, k) == int(np.count_nonzero(~expected))


@given(case=traces())
def test_belady_kernel_equals_optima_belady(case):
    from kvcore.optima import belady

    seq, k = case
    expected = belady(PagingTrace.unit(seq), k).misses
    for hits in (hits_per_step("Belady", seq, k), hits_per_step("Belady", seq, k, compiled=False)):
        assert int(np.count_nonzero(~hits)) == expected
    assert simulate_fast("OPT", seq, k) == expected


@given(case=traces())
def test_belady_kernel_never_worse_than_a_kernel_policy(case):
    # Belady is optimal, so on every trace it misses at most as often as LRU, FIFO and LFU.
    seq, k = case
    opt = simulate_fast("belady", seq, k)
    assert all(opt <= simulate_fast(name, seq, k) for name in KERNEL_POLICIES)


@given(case=traces(max_len=60))
def test_lru_miss_curve_equals_per_size_lru_runs(case):
    seq, _ = case
    curve = lru_miss_curve(seq)
    assert curve.size == np.unique(seq).size
    trace = PagingTrace.unit(seq)
    expected = [run_rm(make("LRU"), trace, c).misses for c in range(1, curve.size + 1)]
    np.testing.assert_array_equal(curve, expected)
    ids, n = dense_ids(seq)
    dist = kernels.interpreted(kernels.lru_stack_distances)(ids, n)
    np.testing.assert_array_equal(kernels.miss_curve_from_distances(dist), expected)


def test_lfu_tie_goes_to_least_recently_used_by_hand():
    # k = 2.  After 0 1 1 0 both residents have count 2; item 1 was used less recently (step 2) than item 0
    # (step 3), so 2 evicts 1.  Then 1 comes back and evicts 2 (count 1 < 2); 0 is still resident.
    seq = np.array([0, 1, 1, 0, 2, 1, 0])
    expected = np.array([False, False, True, True, False, False, True])
    np.testing.assert_array_equal(hits_per_step("LFU", seq, 2), expected)
    np.testing.assert_array_equal(engine_hits("LFU", seq, 2), expected)


def test_lfu_counts_restart_after_eviction_by_hand():
    # k = 2.  0 reaches count 3, 1 reaches count 4; 2 evicts 0 (3 < 4) at step 7.  0 comes back at step 8 with
    # count 1 (evicting 2), so at step 9 item 2 evicts 0 again and step 10 misses.  Had 0 kept its old count (4),
    # step 9 would have evicted 1 (tie at 4, 1 less recently used) and step 10 would hit.
    seq = np.array([0, 0, 0, 1, 1, 1, 1, 2, 0, 2, 0])
    expected = np.array([False, True, True, False, True, True, True, False, False, False, False])
    np.testing.assert_array_equal(hits_per_step("LFU", seq, 2), expected)
    np.testing.assert_array_equal(engine_hits("LFU", seq, 2), expected)


class _MostRecentlyUsed(Policy):
    """A user-written policy outside the registry: evict the most recently requested resident item."""

    name = "MRU-user"

    def on_reset(self):
        self._last = {}

    def on_admit(self, t, item, cost):
        self._last[item] = t

    def on_hit(self, t, item, cost):
        self._last[item] = t

    def on_evict(self, t, item):
        del self._last[item]

    def victim(self, t, protected):
        return max((i for i in self._last if i not in protected), key=self._last.__getitem__)


@given(case=traces(max_len=40))
def test_dispatch_falls_back_to_the_engine(case):
    seq, k = case
    trace = PagingTrace.unit(seq)
    assert simulate_fast(_MostRecentlyUsed(), trace, k) == run_rm(_MostRecentlyUsed(), trace, k).misses
    # A weighted trace takes the engine path; LRU's choices ignore costs, so its misses equal the kernel's.
    weighted = PagingTrace(seq, np.full(seq.size, 2.0), np.arange(seq.size + 1))
    assert simulate_fast("lru", weighted, k) == simulate_fast("lru", trace, k)


def test_kernel_table_covers_the_policies_and_belady():
    assert set(KERNELS) == {"lru", "fifo", "lfu", "belady", "opt"}


def test_bad_input_is_one_clear_error():
    seq = np.array([0, 1, 2])
    with pytest.raises(ParameterError, match="no fast kernel"):
        hits_per_step("Marking", seq, 2)
    with pytest.raises(ParameterError, match="capacity"):
        simulate_fast("LRU", seq, 0)
    with pytest.raises(ParameterError, match="one request per step"):
        hits_per_step("LRU", PagingTrace.from_steps([[0, 1], [2]]), 2)
    with pytest.raises(ParameterError, match="one request per step"):
        lru_miss_curve(PagingTrace.from_steps([[0, 1], [2]]))
    with pytest.raises(ParameterError, match="PagingTrace"):
        simulate_fast("LRU", [0, 1, 2], 2)
