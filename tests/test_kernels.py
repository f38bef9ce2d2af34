"""The array kernels equal the plain reference, request by request (kvcore.kernels, the engine's fast path).
The block-study kernel (kvcore.block_kernel) is checked the same way in ``tests/test_block_study.py``.

Reference = the registered policy run through the checked loop (``kvcore.engine.run_rm(..., kernel=False)``) for LRU,
FIFO and LFU, and the heap loop of ``kvcore.optima.belady(..., record=True)`` for Belady.  Both execution paths of
every kernel are checked: the compiled one (numba) and the interpreted one (``kernel.py_func``, the same source run
as plain Python).  The dispatch tests check that the engine hands a run to a kernel only for exactly the registered
classes, and that the result it returns is the loop's result.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore import kernels
from kvcore.engine import run, run_rm
from kvcore.errors import ParameterError
from kvcore.optima import belady
from kvcore.traces import PagingTrace
from policies import make
from policies.base import Policy
from policies.fast import hits_per_step, lru_miss_curve, simulate_fast
from policies.lru import LRU

KERNEL_POLICIES = ("LRU", "FIFO", "LFU")


@st.composite
def traces(draw, max_len=150):
    """Unit traces over up to 40 items; ids sometimes far apart, so the hash renumbering path runs too.  Half the
    examples are seeded Zipf streams of up to 1,500 requests: hypothesis' own lists stay short, and a Belady heap
    needs many evictions at a larger k before a sift that loses the heap order changes a victim."""
    n_items = draw(st.integers(1, 40))
    spread = draw(st.sampled_from([1, 1, 1_000_003, 2**63 // 41]))
    if draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        seq = (rng.zipf(draw(st.sampled_from([1.1, 1.5, 2.0])), draw(st.integers(1, 10 * max_len))) - 1) % n_items
    else:
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
    for compiled in (True, False):
        misses, hits = kernels.simulate(name.lower(), seq, k, compiled=compiled)
        assert hits is None and misses == int(np.count_nonzero(~expected))


@pytest.mark.parametrize("name", KERNEL_POLICIES)
@given(case=traces())
def test_engine_dispatch_returns_the_checked_loops_result(name, case):
    seq, k = case
    trace = PagingTrace.unit(seq)
    fast, slow = run(make(name), trace, k), run(make(name), trace, k, kernel=False)
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)


@given(case=traces())
def test_belady_kernel_equals_the_reference_loop(case):
    seq, k = case
    trace = PagingTrace.unit(seq)
    reference = belady(trace, k, record=True)
    assert reference.evictions is not None and belady(trace, k).misses == reference.misses
    for compiled in (True, False):
        hits = hits_per_step("Belady", seq, k, compiled=compiled)
        assert int(np.count_nonzero(~hits)) == reference.misses
    assert simulate_fast("OPT", seq, k) == reference.misses


@given(case=traces())
def test_belady_kernel_never_worse_than_a_kernel_policy(case):
    # Belady is optimal, so on every trace it misses at most as often as LRU, FIFO and LFU.
    seq, k = case
    opt = simulate_fast("belady", seq, k)
    assert all(opt <= simulate_fast(name, seq, k) for name in KERNEL_POLICIES)


@pytest.mark.parametrize("k", [3, 17, 60])
def test_kernels_equal_references_on_a_longer_skewed_trace(k):
    # Small hypothesis examples rarely grow a heap past two levels; a seeded Zipf trace over 200 items does, so a
    # heap that loses its order (a wrong child compared in a sift) shows up here.
    seq = np.random.default_rng(k).zipf(1.3, 3000) % 200
    trace = PagingTrace.unit(seq)
    for name in KERNEL_POLICIES:
        np.testing.assert_array_equal(hits_per_step(name, seq, k), engine_hits(name, seq, k))
    assert simulate_fast("belady", seq, k) == belady(trace, k, record=True).misses


@given(case=traces(max_len=60))
def test_lru_miss_curve_equals_per_size_lru_runs(case):
    seq, _ = case
    curve = lru_miss_curve(seq)
    assert curve.size == np.unique(seq).size
    trace = PagingTrace.unit(seq)
    expected = [run_rm(make("LRU"), trace, c, kernel=False).misses for c in range(1, curve.size + 1)]
    np.testing.assert_array_equal(curve, expected)
    np.testing.assert_array_equal(kernels.lru_miss_curve(seq, compiled=False), expected)


@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=300), st.booleans())
def test_renumbering_is_a_bijection_in_order_of_first_request(ids, compiled):
    items = np.asarray(ids, dtype=np.int64)
    dense = np.empty(items.size, np.int64)
    n = (kernels.renumber if compiled else kernels.renumber.py_func)(items, dense)
    _, first = np.unique(items, return_index=True)
    order = items[np.sort(first)]  # distinct ids in order of first request
    assert n == order.size
    np.testing.assert_array_equal(order[dense], items)


def test_next_requests_by_hand():
    ids = np.array([2, 0, 2, 1, 0])
    for compiled in (True, False):
        nxt = kernels.next_requests(ids, 3, compiled)
        assert nxt.tolist() == [2, 4, 5, 5, 5] and nxt.dtype == np.int32


def test_list_helpers_keep_circular_lists_by_hand():
    # nodes 0..3, sentinels 4 and 5: append 0, 1, 2 to list 4 and 3 to list 5, then move 1 to list 5.  Walking
    # ``after`` from a sentinel must give its nodes oldest first, ``before`` the reverse, and an emptied list is the
    # sentinel alone.  (kvcore.block_kernel relies on these helpers too.)
    before, after = np.arange(6), np.arange(6)
    for sentinel, x in [(4, 0), (4, 1), (4, 2), (5, 3)]:
        kernels.list_append(before, after, sentinel, x)
    kernels.list_unlink(before, after, 1)
    kernels.list_append(before, after, 5, 1)

    def walk(links, sentinel):
        out, x = [], links[sentinel]
        while x != sentinel:
            out.append(int(x))
            x = links[x]
        return out

    assert walk(after, 4) == [0, 2] and walk(before, 4) == [2, 0]
    assert walk(after, 5) == [3, 1] and walk(before, 5) == [1, 3]
    for x in (0, 2):
        kernels.list_unlink(before, after, x)
    assert after[4] == before[4] == 4


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


# -- which policies the engine hands to a kernel -----------------------------------------------------------------------


@dataclasses.dataclass
class _MostRecentlyUsed(LRU):
    """A user's subclass of LRU that evicts the most recently used item: it must never run as the LRU kernel."""

    name = "MRU-user"

    def victim(self, t, protected):
        return next(i for i in reversed(self._order) if i not in protected)


# k = 2: LRU misses 0, 1, 2 (evicting 0) and then hits every request; MRU evicts the item requested next every time
PING_PONG = PagingTrace.unit([0, 1] + [2, 1] * 20)


def test_a_subclass_never_runs_as_a_kernel():
    assert kernels.kernel_for(make("LRU")) == "lru" and kernels.kernel_for(_MostRecentlyUsed()) is None
    assert run(_MostRecentlyUsed(), PING_PONG, 2).misses == PING_PONG.T == 42
    assert run(make("LRU"), PING_PONG, 2).misses == 3


def test_a_replaced_method_never_runs_as_a_kernel(monkeypatch):
    lru = make("LRU")
    lru.victim = lambda t, protected: next(i for i in reversed(lru._order) if i not in protected)
    assert kernels.kernel_for(lru) is None and run(lru, PING_PONG, 2).misses == 42
    monkeypatch.setattr(LRU, "victim", _MostRecentlyUsed.victim)
    assert kernels.kernel_for(make("LRU")) is None and run(make("LRU"), PING_PONG, 2).misses == 42


def test_fast_path_conditions():
    lru = make("LRU", threshold=0.5)  # the threshold is NM-only: still the LRU rule in RM
    assert kernels.kernel_for(lru) == "lru"
    assert kernels.kernel_for(make("Marking")) is None and kernels.kernel_for(Policy()) is None
    weighted = PagingTrace(PING_PONG.items, np.full(PING_PONG.T, 2.0))
    multi = PagingTrace.from_steps([[0, 1], [2], [1]])
    assert not weighted.is_unit_single and not multi.is_unit_single and PING_PONG.is_unit_single
    # the loop's results on the other traces: the kernel would be wrong (costs) or not applicable (two per step)
    assert run(lru, weighted, 2).cost == 6.0 and run(lru, multi, 2).misses == 3  # multi: 0 1 | 2 evicts 0 | 1 hits
    assert run(lru, PING_PONG, 2, record=True).per_step is not None  # a record comes from the loop


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
    with pytest.raises(TypeError, match="trace: expected a PagingTrace, got list"):
        simulate_fast("LRU", [0, 1, 2], 2)
    with pytest.raises(ValueError, match="kernel 'mru'"):
        kernels.simulate("mru", seq, 2)


def test_importing_the_core_does_not_load_numba():
    # The kernels compile on first use, so commands that never simulate do not pay numba's start-up (about 1 s).
    import subprocess
    import sys

    code = "import sys, kvcore, kvcore.optima, policies; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
