"""The press bridge's pure part (no torch, no kvpress): kept cache slots -> positions -> NM schedule, and the
evaluation against the exact optimum, the best one-shot choice and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hypothesis import given
from hypothesis import strategies as st

from adversary.strategies import sparse_attention_traces
from kvcore.errors import ParameterError
from kvcore.optima import brute_nm, nm_opt
from kvcore.traces import AttentionTrace
from realtrace.press.eval import (OptCache, best_one_shot, charged_trace, evaluate, layer_group,
                                  schedule_regret)
from realtrace.press.schedule import Compression, PressRecord, PressRecordError, reindex, replay


def test_topk_order_and_reindexing_after_each_compression():
    # prefill 0..9; the press keeps slots 7, 2, 9, 0 in that (top-k) order: the cache is no longer in position order
    rec = PressRecord(forwards=[list(range(10)), [10], [11], [12]])
    rec.compressions.append(Compression(0, 0, 0, kept_slots=np.array([7, 2, 9, 0])))
    # after two decoding steps the cache is [7, 2, 9, 0, 10, 11]; slots 1, 4, 5 are positions 2, 10, 11
    rec.compressions.append(Compression(2, 0, 0, kept_slots=np.array([1, 4, 5])))
    s = replay(rec, 0, 0)
    assert [k.tolist() for _, k in s.kept] == [[7, 2, 9, 0], [2, 10, 11]]
    assert [step for step, _ in s.kept] == [10, 12]
    # dropped at the prefill: effective from step 10 (row 9 was computed with the full cache)
    assert s.drop.tolist() == [12, 10, 13, 10, 10, 10, 10, 12, 10, 12, 13, 13, 13]  # 13 = T: never dropped
    assert s.evictions() == [(10, 1), (10, 3), (10, 4), (10, 5), (10, 6), (10, 8), (12, 0), (12, 7), (12, 9)]
    assert s.resident_counts().tolist() == list(range(1, 11)) + [5, 6, 4]
    # another head of the same run is untouched
    assert replay(rec, 0, 1).drop.tolist() == [13] * 13


def test_reading_slots_as_positions_would_be_wrong():
    """The mistake the re-indexing avoids: the second compression's slots [1, 4, 5] are not positions 1, 4, 5."""
    rec = PressRecord(forwards=[list(range(6)), [6], [7]])
    rec.compressions += [Compression(0, 3, 2, kept_slots=np.array([5, 4, 0])),
                         Compression(1, 3, 2, kept_slots=np.array([3, 0]))]
    s = replay(rec, 3, 2)
    assert s.kept[-1][1].tolist() == [6, 5]
    assert np.flatnonzero(s.drop == s.drop.size).tolist() == [5, 6, 7]


def test_masked_slots_are_dead_from_the_next_step():
    rec = PressRecord(forwards=[list(range(5)), [5], [6]])
    rec.compressions.append(Compression(0, 0, 1, masked_slots=np.array([1, 3])))
    rec.compressions.append(Compression(1, 0, 1, kept_slots=np.array([5, 0, 1, 2, 3, 4])))  # reorder only
    s = replay(rec, 0, 1)
    assert s.drop.tolist() == [7, 5, 7, 5, 7, 7, 7]
    assert s.resident_counts().tolist() == [1, 2, 3, 4, 5, 4, 5]


def test_bad_records_are_one_line_errors():
    rec = PressRecord(forwards=[list(range(4))], compressions=[Compression(0, 0, 0, kept_slots=np.array([0, 4]))])
    with pytest.raises(PressRecordError, match="layer 0 KV head 0, forward 0: kept slot out of range 0..3"):
        replay(rec, 0, 0)
    with pytest.raises(PressRecordError, match="kept twice"):
        reindex(np.arange(4), np.array([1, 1]))


def dense(trace: AttentionTrace) -> np.ndarray:
    a = np.zeros((trace.T, trace.T))
    for t, idx, w in trace.rows():
        a[t, idx] = w
    return a


def brute_regret(trace: AttentionTrace, drop: np.ndarray, start: int) -> float:
    a = dense(trace)
    return float(sum(a[t, i] for t in range(start, trace.T) for i in range(t + 1) if drop[i] <= t))


@st.composite
def trace_and_press(draw):
    """A trace, a prefill boundary, and a press-like run: one compression at the boundary keeping a subset of the
    prompt in a random order, then decoding compressions every few steps keeping random slots."""
    trace = draw(sparse_attention_traces(min_T=3, max_T=10, max_support=4))  # brute_nm: at most 10 steps
    T = trace.T
    start = draw(st.integers(1, T - 1))
    rec = PressRecord(forwards=[list(range(start))] + [[t] for t in range(start, T)])
    size = start
    n_kept = draw(st.integers(1, start))
    rec.compressions.append(Compression(0, 0, 0, kept_slots=np.array(draw(st.permutations(range(size)))[:n_kept])))
    size = n_kept
    every = draw(st.integers(1, 4))
    for f in range(1, T - start + 1):
        size += 1
        if f % every == 0 and size > 1:
            keep = draw(st.integers(1, size))
            rec.compressions.append(Compression(f, 0, 0, kept_slots=np.array(
                draw(st.permutations(range(size)))[:keep])))
            size = keep
    return trace, start, rec


@given(trace_and_press())
def test_press_regret_is_charged_exactly_and_never_below_the_optimum(case):
    trace, start, rec = case
    sched = replay(rec, 0, 0)
    ev = evaluate("t", 0, "kv0", trace, sched, start, one_shot=False, toolkit=None, opts=OptCache(), layers=1)
    assert ev.press == pytest.approx(brute_regret(trace, sched.drop, start), abs=1e-12)
    assert ev.budget == int(max((sched.drop[: t + 1] > t).sum() for t in range(start, trace.T)))
    assert ev.press >= ev.opt - ev.opt_gap_bound - 1e-9
    # the optimum of the charged problem is the brute-force optimum of the trace with the prefill rows emptied
    assert ev.opt == pytest.approx(brute_nm(charged_trace(trace, start), ev.budget).cost, abs=1e-7)


@given(sparse_attention_traces(min_T=3, max_T=10, max_support=4), st.data())
def test_best_one_shot_is_the_brute_force_best_subset(trace, data):
    start = data.draw(st.integers(1, trace.T - 1))
    n_kept = data.draw(st.integers(0, start))
    a = dense(trace)
    best = min(sum(a[t, i] for t in range(start, trace.T) for i in range(start) if i not in keep)
               for keep in itertools.combinations(range(start), n_kept))
    got = best_one_shot(trace, start, n_kept)
    assert got == pytest.approx(best, abs=1e-12)
    # and it sits between the optimum at the one-shot's peak budget and any one-shot choice
    budget = n_kept + trace.T - start
    assert nm_opt(charged_trace(trace, start), max(budget, 1)).cost <= got + 1e-7


def test_charged_trace_empties_the_prefill_rows():
    tr = AttentionTrace(np.array([0, 1, 3, 5]), np.array([0, 0, 1, 0, 2]), np.array([1, .5, .5, .25, .75]), None, "x")
    c = charged_trace(tr, 2)
    assert c.T == 3 and c.indptr.tolist() == [0, 0, 0, 2] and c.residual.tolist() == [1.0, 1.0, 0.0]
    assert schedule_regret(tr, np.array([1, 3, 3]), 2) == 0.25  # row 2 loses token 0 (dropped at step 1)
    assert schedule_regret(tr, np.array([1, 3, 3]), 0) == 0.75  # rows 1 and 2 lose token 0


def test_layer_groups():
    assert [layer_group(x, 30) for x in (0, 9, 10, 19, 20, 29)] == ["early"] * 2 + ["middle"] * 2 + ["late"] * 2
    # Gemma 3 270M's 18 layers: thirds of 6; 4 layers: the first third takes the extra one
    assert [layer_group(x, 18) for x in (0, 5, 6, 11, 12, 17)] == ["early"] * 2 + ["middle"] * 2 + ["late"] * 2
    assert [layer_group(x, 4) for x in range(4)] == ["early", "early", "middle", "late"]
    with pytest.raises(ParameterError, match="not in 0..17"):
        layer_group(18, 18)
