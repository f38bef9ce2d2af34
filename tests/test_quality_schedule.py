"""Schedules and masks of the quality replay (realtrace.quality.schedule): pure numpy, no torch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcore.engine import run_nm
from kvcore.measure import schedule_regret
from kvcore.optima import nm_opt
from kvcore.traces import AttentionTrace
from policies import make
from realtrace.quality.exact import charge, charge_many, resident_sums
from realtrace.quality.schedule import (ScheduleError, check_capacity, check_drop, check_schedule, drop_from_evictions,
                                        drop_from_keep, drop_from_resident, evictions_from_drop, first_drop,
                                        lazy_drop, resident_bias, resident_counts, resident_mask,
                                        resident_sets)

# a hand-worked schedule over T = 5: position 0 dropped at step 2, position 2 at step 3, position 4 on arrival
EVICTIONS = [(2, 0), (3, 2), (4, 4)]
DROP = [2, 5, 3, 5, 4]
RESIDENT = [{0}, {0, 1}, {1, 2}, {1, 3}, {1, 3}]


def random_trace(rng: np.random.Generator, T: int) -> AttentionTrace:
    """Dense causal rows (every position of every row stored), each a softmax of random scores."""
    indptr, indices, weights = [0], [], []
    for t in range(T):
        w = rng.dirichlet(np.full(t + 1, 0.3))
        indices += list(range(t + 1))
        weights += w.tolist()
        indptr.append(len(indices))
    return AttentionTrace(np.array(indptr), np.array(indices), np.array(weights), None, "random")


def random_drop(rng: np.random.Generator, T: int) -> np.ndarray:
    """Any valid drop vector: position i is dropped at a step in i..T (T = never)."""
    return np.array([rng.integers(i, T + 1) for i in range(T)], dtype=np.int64)


def test_hand_worked_schedule_in_every_form():
    drop = drop_from_evictions(EVICTIONS, 5)
    assert drop.tolist() == DROP
    assert [set(r.tolist()) for r in resident_sets(drop)] == RESIDENT
    assert resident_counts(drop).tolist() == [1, 2, 2, 2, 2]
    keep = resident_mask(drop)
    # query 4 does not see position 4 (dropped on arrival) nor 0 and 2 (dropped before)
    assert keep[4].tolist() == [False, True, False, True, False]
    assert keep[1].tolist() == [True, True, False, False, False]  # position 0 still there at step 1
    assert resident_mask(drop, range(3, 5)).tolist() == keep[3:].tolist()
    assert evictions_from_drop(drop) == EVICTIONS
    assert drop_from_resident(RESIDENT).tolist() == DROP
    assert first_drop(np.array([[drop, np.full(5, 5)]])) == 2


def test_round_trips_on_random_schedules():
    rng = np.random.default_rng(0)
    for T in (1, 2, 7, 40):
        for _ in range(20):
            drop = random_drop(rng, T)
            assert drop_from_evictions(evictions_from_drop(drop), T).tolist() == drop.tolist()
            assert drop_from_keep(resident_mask(drop)).tolist() == drop.tolist()
            assert drop_from_resident(resident_sets(drop)).tolist() == drop.tolist()
            assert resident_counts(drop).tolist() == resident_mask(drop).sum(axis=1).tolist()


def test_mask_charges_exactly_the_nm_regret():
    """Eq. 4 from the mask (the mass of row t outside R_t) equals kvcore.measure.schedule_regret of the same schedule,
    and an off-by-one mask (positions still visible on the step they are dropped) does not."""
    rng = np.random.default_rng(1)
    T = 30
    tr = random_trace(rng, T)
    dense = np.zeros((T, T))
    for t, idx, w in tr.rows():
        dense[t, idx] = w
    for _ in range(10):
        drop = random_drop(rng, T)
        expected = schedule_regret(tr, evictions_from_drop(drop))
        lost = (dense * ~resident_mask(drop)).sum(axis=1)
        assert np.allclose(lost, expected, atol=1e-12)
        late = (dense * ~resident_mask(np.minimum(drop + 1, T))).sum(axis=1)
        if (drop < T).any():
            assert not np.allclose(late, expected, atol=1e-12)


def test_optimum_and_engine_schedules_convert_and_respect_the_budget():
    rng = np.random.default_rng(2)
    T, k = 40, 6
    tr = random_trace(rng, T)
    opt = nm_opt(tr, k, record=True)
    drop = drop_from_evictions(opt.evictions, T)
    check_capacity(drop, k)
    assert schedule_regret(tr, evictions_from_drop(drop)).sum() == pytest.approx(opt.cost, abs=1e-9)
    res = run_nm(make("H2O"), tr, k, record=True)
    drop = drop_from_evictions(res.evictions, T)
    check_capacity(drop, k)
    assert resident_counts(drop)[k:].tolist() == [k] * (T - k)  # a lazy policy keeps its cache full
    with pytest.raises(ScheduleError, match=f"more than the budget {k - 1}"):
        check_capacity(drop, k - 1)


def test_a_refetch_or_a_future_position_is_refused_in_one_line():
    with pytest.raises(ScheduleError, match="evicted at steps 1 and 3: .* NM has no refetch") as exc:
        drop_from_evictions([(1, 0), (3, 0)], 5)
    assert "\n" not in str(exc.value)
    with pytest.raises(ScheduleError, match="only after it arrived"):
        drop_from_evictions([(1, 2)], 5)
    with pytest.raises(ScheduleError, match="absent at step 1 and resident again at step 2"):
        drop_from_resident([{0}, {1}, {0, 1, 2}])
    with pytest.raises(ScheduleError, match="before it arrives"):
        drop_from_resident([{0, 1}, {0, 1}])
    with pytest.raises(ScheduleError, match="outside 0..2"):
        drop_from_resident([{0}, {0, 1}, {3}])
    with pytest.raises(ScheduleError, match="position 1 is dropped at step 0"):
        check_drop(np.array([3, 0, 3]))
    with pytest.raises(ScheduleError, match="shape"):
        check_schedule(np.zeros((2, 3, 4), dtype=np.int64), 2, 3, 5)
    assert check_schedule(np.full((2, 3, 4), 4), 2, 3, 4).dtype == np.int64


def truncated(trace: AttentionTrace, top: int) -> AttentionTrace:
    """The ``top`` largest entries of every row, the rest as residual (as the capture stores rows)."""
    indptr, indices, weights, residual = [0], [], [], []
    for t in range(trace.T):
        a, b = trace.indptr[t], trace.indptr[t + 1]
        keep = np.sort(np.argsort(-trace.weights[a:b], kind="stable")[:top])
        indices += trace.indices[a:b][keep].tolist()
        weights += trace.weights[a:b][keep].tolist()
        residual.append(max(0.0, 1.0 - trace.weights[a:b][keep].sum()))
        indptr.append(len(indices))
    return AttentionTrace(np.array(indptr), np.array(indices), np.array(weights), np.array(residual), "top")


def test_lazy_drop_hand_worked():
    # K = 3 over T = 5: the given schedule drops 0 at 2, 2 at 3 and 4 on arrival (at most 2 resident); lazily the
    # cache fills first (nothing leaves at steps 0-2), then one position per step, the one given the earliest drop
    assert lazy_drop(np.array(DROP), 3).tolist() == [3, 5, 4, 5, 5]
    assert resident_counts(lazy_drop(np.array(DROP), 3)).tolist() == [1, 2, 3, 3, 3]
    assert lazy_drop(np.array(DROP), 2).tolist() == DROP  # already lazy at K = 2
    with pytest.raises(ScheduleError, match="more than the budget 1"):
        lazy_drop(np.array(DROP), 1)
    with pytest.raises(ScheduleError, match="capacity"):
        lazy_drop(np.array(DROP), 0)


@pytest.mark.parametrize("seed", range(12))
def test_lazy_optimum_fills_the_cache_and_stays_optimal(seed):
    """On truncated rows the solved optimum drops positions no stored entry charges, long before the cache is full;
    its lazy form holds exactly min(t + 1, K) positions at every step, never drops a position earlier, and costs the
    same on the truncated rows (the optimum) and no more on the complete rows."""
    rng = np.random.default_rng(seed)
    T, K, top = int(rng.integers(12, 40)), int(rng.integers(2, 8)), int(rng.integers(1, 4))
    full = random_trace(rng, T)
    cut = truncated(full, top)
    res = nm_opt(cut, K, record=True)
    given = drop_from_evictions(res.evictions, T)
    lazy = lazy_drop(given, K)
    assert np.array_equal(resident_counts(lazy), np.minimum(np.arange(T) + 1, K))
    assert (lazy >= given).all()
    on_cut = schedule_regret(cut, evictions_from_drop(lazy))
    assert on_cut.sum() == pytest.approx(res.cost, abs=1e-12)
    assert schedule_regret(full, evictions_from_drop(lazy)).sum() <= (
        schedule_regret(full, evictions_from_drop(given)).sum() + 1e-12)
    # on complete rows the lazy optimum is exactly optimal: its cost is the optimum of the complete rows
    exact = nm_opt(full, K, record=True)
    lazy_full = lazy_drop(drop_from_evictions(exact.evictions, T), K)
    assert schedule_regret(full, evictions_from_drop(lazy_full)).sum() == pytest.approx(exact.cost, abs=1e-12)


def test_the_solved_optimum_on_truncated_rows_is_not_lazy():
    """What lazy_drop repairs (issue 27): the optimum of top-1 rows drops before the cache is full."""
    rng = np.random.default_rng(0)
    T, K = 30, 8
    given = drop_from_evictions(nm_opt(truncated(random_trace(rng, T), 1), K, record=True).evictions, T)
    assert (resident_counts(given) < np.minimum(np.arange(T) + 1, K)).any()


@settings(deadline=None)
@given(st.data(), st.integers(1, 30), st.integers(1, 4), st.sampled_from(["mass", "costs", "ties"]))
def test_charge_many_equals_charging_each_schedule(data, T, n_runs, kind):
    """The fast charge (row total minus the resident mass, compiled and plain) equals the plain sum of the lost
    entries for every schedule, to a few eps of the row total; rows before a schedule's first drop are exactly 0."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    rows = np.tril(rng.dirichlet(np.full(T, 0.3), size=T))
    if kind == "costs":  # value-weighted costs: rows that do not sum to 1, some exact zeros
        rows = rows * rng.exponential(size=(T, T)) * (rng.random((T, T)) < 0.8)
    elif kind == "ties":
        rows = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    drops = np.stack([random_drop(rng, T) for _ in range(n_runs)])
    expected = np.stack([charge(rows, d) for d in drops])
    scale = rows.sum(axis=1)[None, :]
    for kernel in (resident_sums, resident_sums.py_func):
        kept = np.zeros(drops.shape)
        kernel(rows, drops, kept)
        assert np.all(np.abs(scale - kept - expected) <= 8 * T * np.finfo(float).eps * scale)
    got = charge_many(rows, drops)
    assert np.all(np.abs(got - expected) <= 8 * T * np.finfo(float).eps * scale)
    for r, d in enumerate(drops):
        assert not got[r, :d.min()].any()


@given(st.data(), st.integers(1, 30))
def test_resident_bias_is_the_resident_mask_as_an_additive_bias(data, T):
    """The replay's additive mask (compiled and plain) is 0 exactly where :func:`resident_mask` keeps an entry and
    ``-inf`` elsewhere, on every row from any first one; its empty-row flags are the mask's rows with nothing kept
    (drops at arrival included, so some rows are empty)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    drop = random_drop(rng, T)
    gone = rng.random(T) < 0.3
    drop[gone] = np.arange(T)[gone]  # dropped on arrival: never resident
    first = data.draw(st.integers(0, T - 1))
    keep = resident_mask(drop, range(first, T))
    for kernel in (resident_bias, resident_bias.py_func):
        out = np.full((T - first, T), np.nan, dtype=np.float32)
        empty = kernel(drop, first, out)
        assert np.array_equal(out == 0.0, keep) and np.array_equal(np.isneginf(out), ~keep)
        assert np.array_equal(empty, ~keep.any(axis=1))


def test_charge_many_sees_a_schedule_that_keeps_a_position_one_step_too_long():
    """A drop one step later keeps that entry's mass: the charges must differ exactly there (the kernel's bound)."""
    rows = np.tril(np.full((4, 4), 0.25)) + np.diag([0.75, 0.5, 0.25, 0.0])
    drop = np.array([2, 4, 4, 4])
    late = np.array([3, 4, 4, 4])
    got = charge_many(rows, np.stack([drop, late]))
    assert got[0].tolist() == [0.0, 0.0, 0.25, 0.25]
    assert got[1].tolist() == [0.0, 0.0, 0.0, 0.25]


class _Rows:
    """What :meth:`realtrace.quality.run._Reference.rows` returns, for a reference made of arrays."""

    def __init__(self, a):
        self.a = a

    def numpy(self):
        return self.a


def test_a_prompts_runs_are_charged_as_each_schedule_alone():
    """:func:`realtrace.quality.charges.charged` charges all runs of a prompt on rows computed once; each run's stream
    and answer means, per layer and KV head, and its total equal charging that schedule alone with :func:`charge`."""
    from types import SimpleNamespace

    from realtrace.quality.charges import charged
    from realtrace.quality.value_cost import value_costs

    rng = np.random.default_rng(3)
    L, H, T, n_prompt = 2, 3, 40, 35
    rows = {(layer, g): np.tril(rng.dirichlet(np.full(T, 0.5), size=T)) for layer in range(L) for g in range(H)}
    rows = {key: a / a.sum(axis=1, keepdims=True) for key, a in rows.items()}
    values = {key: rng.normal(size=(T, 8)) for key in rows}
    ref = SimpleNamespace(L=L, H=H, T=T, prompt=SimpleNamespace(n_prompt=n_prompt),
                          rows=lambda layer, g: _Rows(rows[layer, g]), values=lambda layer, g: values[layer, g])
    budgets = [4, 9, 9]
    drops = [np.stack([np.stack([random_drop(rng, T) for _ in range(H)]) for _ in range(L)]) for _ in budgets]
    got = charged(ref, drops, budgets)
    for run, k, d in zip(got, budgets, drops):
        for layer, g in rows:
            regret = charge(rows[layer, g], d[layer, g])
            value = charge(value_costs(rows[layer, g], values[layer, g]), d[layer, g])
            for name, per_step in (("regret", regret), ("value", value)):
                assert run[f"{name}_stream"][layer, g] == pytest.approx(per_step[k:T - 1].mean(), rel=1e-12, abs=1e-15)
                assert run[f"{name}_answer"][layer, g] == pytest.approx(per_step[n_prompt - 1:T - 1].mean(), rel=1e-12,
                                                                       abs=1e-15)
            assert run["regret_total"][layer, g] == pytest.approx(regret.sum(), rel=1e-12)
