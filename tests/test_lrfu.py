"""LRFU (Lee et al., SIGMETRICS 1999): the log-space key against a brute-force CRF, and its two ends (LFU, LRU)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.engine import RMSimulator, run_nm, run_rm
from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace, PagingTrace
from policies import make


@st.composite
def paging_traces(draw, items: int = 7, max_T: int = 60, multi: bool = True):
    size = 3 if multi else 1
    steps = draw(st.lists(st.lists(st.integers(0, items - 1), min_size=1, max_size=size, unique=True),
                          min_size=1, max_size=max_T))
    return PagingTrace.from_steps(steps)


@st.composite
def attention_traces(draw, max_T: int = 30):
    T = draw(st.integers(1, max_T))
    rows = []
    for t in range(T):
        toks = draw(st.lists(st.integers(0, t), min_size=1, max_size=min(t + 1, 5), unique=True))
        ws = draw(st.lists(st.integers(1, 9), min_size=len(toks), max_size=len(toks)))
        rows.append({i: w / sum(ws) for i, w in zip(toks, ws)})
    return AttentionTrace.from_rows(rows)


def _fit(trace: PagingTrace, k: int) -> int:
    return max(k, max(len(trace.step(t)[0]) for t in range(trace.T)))


class _Brute:
    """The CRF from its definition, ``C_i = sum_j (1/2)^(lam (now - t_j))`` over the references since admission, on
    Lee et al.'s clock (one tick per reference)."""

    def __init__(self, lam: float):
        self.lam = lam
        self.refs: dict[int, list[int]] = {}
        self.now = 0

    def ref(self, item: int) -> None:
        self.now += 1
        self.refs.setdefault(item, []).append(self.now)

    def crf(self, item: int) -> float:
        return sum(0.5 ** (self.lam * (self.now - s)) for s in self.refs[item])

    def victim(self, resident, protected) -> int:
        cand = [i for i in resident if i not in protected]
        return min(cand, key=lambda i: (self.crf(i), self.refs[i][-1]))


@given(paging_traces(), st.integers(1, 4), st.sampled_from([0.0, 0.05, 0.3, 1.0, 2.5]))
def test_key_is_the_crf_and_victim_its_argmin(trace, k, lam):
    """Drive LRFU step by step: after every step each resident key gives the brute-force C, and every victim is
    the brute-force argmin of C (ties to the least recently referenced)."""
    k = _fit(trace, k)
    pol = make("LRFU", lam=lam)
    sim = RMSimulator(pol, k, record=True)
    brute = _Brute(lam)
    for t, items, costs in trace.steps():
        res_before = set(sim.resident)
        q = items.tolist()
        misses = [i for i in q if i not in res_before]
        need = len(res_before) + len(misses) - k
        expected = []
        live = set(res_before)
        for i in q:  # the engine reports hits first, in request order
            if i in res_before:
                brute.ref(i)
        for _ in range(max(need, 0)):
            v = brute.victim(live, frozenset(q))
            expected.append((t, v))
            live.discard(v)
            brute.refs.pop(v)
        n_before = len(sim.evictions)
        sim.step(q, costs.tolist())
        assert sim.evictions[n_before:] == expected
        for i in misses:
            brute.ref(i)
        assert pol.clock == brute.now
        for i in sim.resident:
            assert math.isclose(pol.crf(i), brute.crf(i), rel_tol=1e-9)


@given(paging_traces(), st.integers(1, 5))
def test_lambda_zero_is_lfu(trace, k):
    """lambda = 0: C counts references since admission (LFU's in-cache count) and ties go to the least recently
    used, which is LFU's tie rule -- the evictions coincide one for one."""
    k = _fit(trace, k)
    a = run_rm(make("LRFU", lam=0.0), trace, k, record=True)
    b = run_rm(make("LFU"), trace, k, record=True)
    assert a.evictions == b.evictions


@given(paging_traces(), st.integers(1, 5))
def test_lambda_one_is_lru_rm(trace, k):
    k = _fit(trace, k)
    assert (run_rm(make("LRFU", lam=1.0), trace, k, record=True).evictions
            == run_rm(make("LRU"), trace, k, record=True).evictions)


@given(attention_traces(), st.integers(1, 5))
def test_lambda_one_is_lru_nm(trace, k):
    """In NM the references are the arrival and every observed entry (threshold 0), as LRU's uses."""
    assert (run_nm(make("LRFU", lam=1.0), trace, k, record=True).evictions
            == run_nm(make("LRU"), trace, k, record=True).evictions)


def test_long_horizon_keys_do_not_overflow():
    """At lambda = 1 and 5000 steps a linear-space CRF key 2^(lambda t) would overflow a double; the log key does
    not, and LRU's order survives."""
    trace = PagingTrace.unit([t % 5 for t in range(5000)])
    a = run_rm(make("LRFU", lam=1.0), trace, 4, record=True)
    b = run_rm(make("LRU"), trace, 4, record=True)
    assert a.evictions == b.evictions and a.misses == 5000


def test_hand_worked_nm():
    """k = 2, lam = 1; references: arrivals and observed entries, one clock tick each (in row order).
    t0: token 0 arrives (tick 1); row {0: 1} (tick 2)                 key0 = log2(2^1 + 2^2)
    t1: token 1 (tick 3); row {0: .5, 1: .5} (ticks 4, 5)            refs 0: {1, 2, 4}, 1: {3, 5}
    t2: token 2 arrives (tick 6): at now = 6, C0 = 2^-5 + 2^-4 + 2^-2 = .34375, C1 = 2^-3 + 2^-1 = .625,
        C2 = 1 -> evict 0 (the token referenced longest ago wins the recency contest, as under LRU)
        row {1: .3, 2: .7} (ticks 7, 8)
    t3: token 3 (tick 9): C1 = 2^-6 + 2^-4 + 2^-2 = .328, C2 = 2^-3 + 2^-1 = .625, C3 = 1 -> evict 1."""
    trace = AttentionTrace.from_rows([{0: 1.0}, {0: 0.5, 1: 0.5}, {0: 0.3, 1: 0.3, 2: 0.4}, {2: 0.5, 3: 0.5}])
    res = run_nm(make("LRFU", lam=1.0), trace, 2, record=True)
    assert res.evictions == [(2, 0), (3, 1)]
    # the same trace at lam = 0 (LFU): t2: counts 0: 3, 1: 2, 2: 1 -> evict 2; row 2 on {0, 1} (ticks 7, 8):
    # t3: counts 0: 4, 1: 3, 3: 1 -> evict 3
    res0 = run_nm(make("LRFU", lam=0.0), trace, 2, record=True)
    assert res0.evictions == [(2, 2), (3, 3)]


def test_persisted_key_restores_history():
    pol = make("LRFU", lam=0.5)
    pol.reset(2, None)
    pol.admit(0, 7, 1.0)  # tick 1
    pol.hit(1, 7, 1.0)  # tick 2
    before = pol.crf(7)  # 2^-0.5 + 1
    state = pol.export_state(7)
    pol.evict(2, 1, frozenset())  # only item 7 is resident: it goes
    pol.admit(3, 7, 1.0)  # tick 3
    pol.import_state(3, 7, state)
    # C = the new admission (1) + the old history decayed by one tick
    assert math.isclose(pol.crf(7), 1.0 + before * 0.5 ** 0.5, rel_tol=1e-12)


def test_bad_parameters():
    with pytest.raises(ParameterError, match="lam"):
        make("LRFU", lam=-1.0)
    with pytest.raises(ParameterError, match="threshold"):
        make("LRFU", threshold=float("nan"))
