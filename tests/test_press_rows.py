"""Charging a press on complete rows against its stored top-k rows (issue 27 item 3), without torch: a hand-worked
trace whose two charges differ by a known amount, the same difference as a property of random rows and schedules,
unattributed exactly 0 on complete rows, the optimum solved on complete rows never above the press, and the
stored-entry check.  The same on the real model: tests/test_press_rows_model.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.optima import brute_nm
from kvcore.traces import AttentionTrace
from realtrace.press.eval import OptCache, charged_trace, evaluate
from realtrace.press.rows import COMPLETE_NOTE, ROW_KINDS, STORED_NOTE, charged_note, stored_deviation
from realtrace.press.schedule import HeadSchedule


def complete_trace(a: np.ndarray, source: str) -> AttentionTrace:
    """Every entry ``a[t, i]``, ``i <= t``, of lower-triangular rows summing to 1; residual 0."""
    T = a.shape[0]
    indptr = np.concatenate([[0], np.cumsum(np.arange(1, T + 1))])
    indices = np.concatenate([np.arange(t + 1) for t in range(T)])
    weights = np.concatenate([a[t, :t + 1] for t in range(T)])
    return AttentionTrace(indptr, indices, weights, np.zeros(T), source)


def stored_trace(a: np.ndarray, top: int, source: str) -> AttentionTrace:
    """The ``top`` largest entries of each row (lowest position on a tie), the rest as residual."""
    T = a.shape[0]
    kept = [np.sort(np.argsort(-a[t, :t + 1], kind="stable")[:top]) for t in range(T)]
    weights = [a[t, k] for t, k in enumerate(kept)]
    return AttentionTrace(np.concatenate([[0], np.cumsum([k.size for k in kept])]), np.concatenate(kept),
                          np.concatenate(weights), np.array([1.0 - w.sum() for w in weights]).clip(0), source)


def both(a, drop, start, top=2, one_shot=False, opts=None):
    """``(complete, stored)`` evaluations of drop vector ``drop`` on rows ``a``, one optimum memo for both."""
    opts = OptCache() if opts is None else opts
    sched = HeadSchedule(np.asarray(drop, dtype=np.int64), [])
    return tuple(evaluate("L00_kv0", 0, "kv0", tr, sched, start, one_shot, None, opts, layers=1)
                 for tr in (complete_trace(a, "x (complete rows)"), stored_trace(a, top, "x")))


# rows 0..3; a press keeps position 0 of the prompt {0, 1} at the boundary start = 2, then everything
HAND = np.array([[1.0, 0.0, 0.0, 0.0],
                 [0.7, 0.3, 0.0, 0.0],
                 [0.5, 0.3, 0.2, 0.0],
                 [0.4, 0.1, 0.2, 0.3]])
HAND_DROP = [4, 2, 4, 4]


def test_hand_worked_complete_and_stored_charges_differ_by_the_unstored_dropped_mass():
    """Top-2 rows store a[2, 1] = 0.3 but not a[3, 1] = 0.1: the press (position 1 gone from step 2) is charged
    0.3 + 0.1 on complete rows and 0.3 on stored ones; the difference is exactly a[3, 1].  Its peak cache is 3, at
    which the optimum drops the 0.1 of row 3 only; on the stored rows position 1 is free at row 3 (not stored) and
    the optimum is 0 -- the optimum of the truncation.  The best one-shot choice keeps position 0 (column 0.9 against
    0.4), as the press does."""
    c, s = both(HAND, HAND_DROP, 2, one_shot=True)
    assert c.budget == s.budget == 3 and c.n_kept == 1
    assert c.press == pytest.approx(0.4, abs=1e-15) and s.press == pytest.approx(0.3, abs=1e-15)
    assert c.press - s.press == pytest.approx(HAND[3, 1], abs=1e-15)
    assert c.unattributed == 0.0 and s.unattributed == pytest.approx(0.2 + 0.3, abs=1e-15)
    assert c.opt == pytest.approx(0.1, abs=1e-9) and s.opt == pytest.approx(0.0, abs=1e-9)
    assert c.one_shot == pytest.approx(0.4, abs=1e-15)
    assert c.charged_mass == pytest.approx(2.0, abs=1e-15)
    assert c.opt <= c.one_shot + 1e-12 <= c.press + 2e-12


@st.composite
def rows_and_schedule(draw):
    """Random causal rows (each sums to 1), a prefill boundary, a top-k cut and an NM drop vector."""
    T = draw(st.integers(3, 9))  # brute_nm below: at most 10 steps
    a = np.zeros((T, T))
    for t in range(T):
        w = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=t + 1, max_size=t + 1)))
        a[t, :t + 1] = w / w.sum()
    drop = np.array([draw(st.integers(i + 1, T)) for i in range(T)])  # each token held on arrival: K >= 1
    return a, drop, draw(st.integers(1, T - 1)), draw(st.integers(1, 3))


@given(rows_and_schedule())
def test_complete_minus_stored_charge_is_the_dropped_mass_below_the_cut(case):
    a, drop, start, top = case
    T = a.shape[0]
    c, s = both(a, drop, start, top)
    stored = stored_trace(a, top, "x")
    is_stored = np.zeros_like(a, dtype=bool)
    for t, idx, _ in stored.rows():
        is_stored[t, idx] = True
    gone = (drop[None, :] <= np.arange(T)[:, None]) & np.tri(T, dtype=bool) & (np.arange(T) >= start)[:, None]
    assert c.press == pytest.approx(a[gone].sum(), abs=1e-12)
    assert c.press - s.press == pytest.approx(a[gone & ~is_stored].sum(), abs=1e-12)
    # the stored charge brackets the complete one, and the complete rows leave nothing unattributed
    assert s.press - 1e-12 <= c.press <= s.press + s.unattributed + 1e-12
    assert c.unattributed == 0.0 and c.charged_mass == pytest.approx(T - start, abs=1e-12)
    # the optimum on complete rows: the exact one (brute force), never above the press, never below the truncation's
    assert c.opt == pytest.approx(brute_nm(charged_trace(complete_trace(a, "b"), start), c.budget).cost, abs=1e-7)
    assert c.opt <= c.press + 1e-9 and s.opt <= c.opt + 1e-9


def test_one_optimum_memo_keeps_complete_and_stored_rows_apart():
    """A leaderboard shares one memo; the complete rows' optimum must not be the stored rows' (same trace name)."""
    opts = OptCache()
    s = both(HAND, HAND_DROP, 2, opts=opts)[1]
    c = both(HAND, HAND_DROP, 2, opts=opts)[0]
    assert s.opt == pytest.approx(0.0, abs=1e-9) and c.opt == pytest.approx(0.1, abs=1e-9)


def test_stored_deviation_and_the_notes():
    stored = stored_trace(HAND, 2, "x")
    assert stored_deviation(stored, HAND) == 0.0
    off = HAND.copy()
    off[3, 3] += 1e-3
    assert stored_deviation(stored, off) == pytest.approx(1e-3, abs=1e-15)
    off[3, 1] += 1.0  # not stored: not compared
    assert stored_deviation(stored, off) == pytest.approx(1e-3, abs=1e-15)
    assert [charged_note(k) for k in ROW_KINDS] == [COMPLETE_NOTE, STORED_NOTE]
    assert "[regret, regret + unattributed]" in STORED_NOTE and "nothing unattributed" in COMPLETE_NOTE


def test_complete_rows_trace_has_every_entry_and_no_residual():
    """The quality package's complete-row trace (the press charges on it): every causal entry, residual exactly 0."""
    torch = pytest.importorskip("torch", reason="the complete rows are torch tensors (the [real] extra)")
    from realtrace.quality.exact import rows_trace

    a = np.tril(np.random.default_rng(4).random((7, 7))) + np.eye(7)
    a /= a.sum(axis=1, keepdims=True)
    tr = rows_trace(torch.from_numpy(a), None, "r")
    assert tr.indices.size == 7 * 8 // 2 and np.array_equal(tr.residual, np.zeros(7))
    assert np.allclose(tr.weights, complete_trace(a, "c").weights, rtol=0, atol=1e-15)
