"""The static split by one-head solves and the exchange condition (:mod:`kvcore.optima.static_split`, with the
successive shortest paths of :mod:`kvcore.optima.successive`) against independent exact curves.

* from a certified one-head optimum, the shortest paths' marginals ``OPT(k) - OPT(k + 1)`` and ``OPT(k - 1) -
  OPT(k)`` equal the differences of the exact regret curve (:class:`kvcore.optima.allocation.RegretCurve`, the
  complete network solved at each ``k``) within 1e-9, compiled and as plain Python, at every ``k`` the flow is moved
  through, up to ``T`` and back down to 0; the flow after each move holds ``k`` at the line's busiest step;
* whole slots from a share sum to the budget, stay in ``[0, T]`` and within one of the share when no cap binds;
* the split equals the best split by dynamic programming over the exact curves (no convexity assumed), exactly,
  certified, with the exchange condition's two sides equal to the curves' differences at the split -- also when the
  moves in doubles are switched off, the exact moves then doing the work (and on some of those instances they must);
* a head may get no slot; a solve stopped after one round is not certified and its bound is below the optimum;
* the prices the paths leave at ``k - 1``, ``k`` and ``k + 1`` are optimal duals there (their Lagrangian bound is the
  exact optimum); only the last ``PREFIX_HELD`` heads keep their prefix sums after the one-head solves, and moves
  among a few heads never make a head's prefix sums twice.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.optima import static_split, successive
from kvcore.optima.allocation import RegretCurve, dp_allocation
from kvcore.optima.lagrangian import lagrangian_bound
from kvcore.optima.priced import priced_optimum
from kvcore.optima.static_split import whole_slots
from kvcore.optima.successive import HeadFlow
from tests.test_priced import as_trace, instance, random_rows


def flow_at(a: np.ndarray, k: int) -> HeadFlow:
    res = priced_optimum(lambda _: a, 1, a.shape[0], k, "coupled")
    return static_split._flow(res, lambda: a)


def resident(f: HeadFlow) -> np.ndarray:
    """Tokens resident at each step of the flow's schedule."""
    T, kept = f.T, np.flatnonzero(f.exit >= 0)
    starts = np.bincount(kept, minlength=T + 1) - np.bincount(f.exit[kept] + 1, minlength=T + 1)
    return np.cumsum(starts)[:T]


@pytest.mark.parametrize("compiled", [True, False])
@given(seed=st.integers(0, 2**32 - 1))
def test_the_shortest_paths_give_the_exact_curves_differences(compiled, seed):
    with pytest.MonkeyPatch.context() as mp:
        if not compiled:
            mp.setattr(successive, "shortest", successive.shortest.py_func)
        walk(seed)


def walk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    T = int(rng.integers(2, 12))
    a = random_rows(rng, T)
    curve = RegretCurve(as_trace(a))
    k = int(rng.integers(1, T + 1))
    f = flow_at(a, k)
    for step in [1] * (T - k) + [-1] * T:
        if f.k < T:
            assert f.up == pytest.approx(float(curve(f.k) - curve(f.k + 1)), abs=1e-9)
        if f.k > 0:
            assert f.down == pytest.approx(float(curve(f.k - 1) - curve(f.k)), abs=1e-9)
        f.move(step)
        assert resident(f).max(initial=0) <= f.k and (f.flow == f.k - resident(f)).all()
    assert f.k == 0 and f.down == np.inf and (f.exit == -1).all()


@given(st.lists(st.floats(0, 50), min_size=1, max_size=8), st.integers(1, 60), st.integers(0, 400))
def test_whole_slots_sum_to_the_budget_near_the_share(raw, T, budget):
    share = np.array(raw)
    budget = min(budget, T * share.size)
    share = share * (budget / share.sum()) if share.sum() > 1e-6 else np.full(share.size, budget / share.size)
    k = whole_slots(share, budget, T)
    assert k.sum() == budget and k.min() >= 0 and k.max() <= T
    if share.max() <= T:
        assert np.abs(k - share).max() < 1.0 + 1e-9


def best_split(rows, T, B):
    curves = [RegretCurve(as_trace(a)) for a in rows]
    return curves, dp_allocation([lambda k, c=c: c(min(k, T)) for c in curves], B)[0]


@pytest.mark.parametrize("moves", [True, False])
@given(seed=st.integers(0, 2**32 - 1))
def test_the_split_is_the_best_split_with_its_exchange_condition(moves, seed):
    with pytest.MonkeyPatch.context() as mp:
        if not moves:
            mp.setattr(static_split, "_move", lambda flows: 0)
        check_split(seed)


def check_split(seed: int) -> None:
    rows, H, T, B = instance(seed, max_heads=4, max_T=10)
    res = priced_optimum(lambda h: rows[h], H, T, B, "static")
    curves, best = best_split(rows, T, B)
    assert res.exact_regret == best and res.certificate.certified
    k = res.slots
    assert sum(k) == B and min(k) >= 0 and max(k) <= T
    assert [float(c(x)) for c, x in zip(curves, k)] == pytest.approx(res.per_head, abs=1e-12)
    gains = [c(x) - c(x + 1) for c, x in zip(curves, k) if x < T]
    losses = [c(x - 1) - c(x) for c, x in zip(curves, k) if x > 0]
    ex = res.certificate.exchange
    assert ex["largest_gain"] == (float(max(gains)) if gains else None)
    assert ex["least_loss"] == (float(min(losses)) if losses else None)
    if gains and losses:
        assert max(gains) <= min(losses)


def test_without_moves_in_doubles_the_exact_moves_find_the_split(monkeypatch):
    """The shares the coupled prices suggest are not the optimum on every instance: with the moves in doubles off,
    the exact moves must work on some of twenty, and each still reaches the best split."""
    monkeypatch.setattr(static_split, "_move", lambda flows: 0)
    worked = 0
    for seed in range(20):
        rows, H, T, B = instance(seed, max_heads=4, max_T=10)
        res = priced_optimum(lambda h: rows[h], H, T, B, "static")
        assert res.exact_regret == best_split(rows, T, B)[1]
        worked += res.certificate.exchange["exact_moves"] > 0
    assert worked > 0


def test_a_head_may_get_no_slot():
    """Three heads, two slots: one head keeps nothing and drops every token on arrival."""
    rng = np.random.default_rng(3)
    rows = [random_rows(rng, 6) for _ in range(3)]
    res = priced_optimum(lambda h: rows[h], 3, 6, 2, "static")
    assert 0 in res.slots and res.exact_regret == best_split(rows, 6, 2)[1]
    assert (res.drops[res.slots.index(0)] == np.arange(6)).all()


@given(seed=st.integers(0, 2**32 - 1))
def test_a_split_stopped_uncertified_keeps_a_valid_bound(seed):
    rows, H, T, B = instance(seed, max_heads=4, max_T=10)
    res = priced_optimum(lambda h: rows[h], H, T, B, "static", max_rounds=1, per_item=1)
    best = best_split(rows, T, B)[1]
    if not res.certificate.certified:
        assert res.certificate.lower_bound <= float(best) + 1e-9
    assert res.exact_regret >= best


@pytest.mark.parametrize("seed", range(4))
def test_the_moves_in_doubles_leave_the_exact_stage_nothing_to_move(seed):
    """Four heads of 60 steps, 12 slots each (the instances of ``tests/test_dual_start.py``): the shortest paths
    move the shares the coupled prices suggest to the exact split, so the exact stage only certifies it."""
    rng = np.random.default_rng(seed)
    rows = [random_rows(rng, 60) for _ in range(4)]
    res = priced_optimum(lambda h: rows[h], 4, 60, 48, "static")
    assert res.certificate.certified and res.certificate.exchange["exact_moves"] == 0
    assert res.exact_regret == best_split(rows, 60, 48)[1]


@given(seed=st.integers(0, 2**32 - 1))
def test_the_prices_after_a_move_are_optimal_there(seed):
    """The slot prices :meth:`HeadFlow.prices` gives for ``k - 1``, ``k`` and ``k + 1`` (the start of the exact
    neighbour solves) are optimal duals there: their Lagrangian bound is the exact optimum at that capacity."""
    rng = np.random.default_rng(seed)
    T = int(rng.integers(3, 12))
    a = random_rows(rng, T)
    curve = RegretCurve(as_trace(a))
    k = int(rng.integers(1, T))
    f = flow_at(a, k)
    for step in (-1, 0, 1):
        lam = f.prices(step)
        pot = np.concatenate([[0.0], -np.cumsum(lam)])
        assert lagrangian_bound([a], pot, k + step) == pytest.approx(float(curve(k + step)), abs=1e-9)


def test_only_the_last_heads_keep_their_prefix_sums(monkeypatch):
    """Twelve heads: after the one-head solves at the shares, the last ``PREFIX_HELD`` hold their prefix sums and
    the others have let them go (8 T^2 bytes each: 2.9 GB for 90 heads at 2,000 steps if all were kept)."""
    rng = np.random.default_rng(5)
    rows = [random_rows(rng, 8) for _ in range(12)]
    seen = []
    move = static_split._move
    monkeypatch.setattr(static_split, "_move", lambda flows: seen.append([f._C is not None for f in flows])
                        or move(flows))
    priced_optimum(lambda h: rows[h], 12, 8, 40, "static")
    assert seen == [[False] * (12 - static_split.PREFIX_HELD) + [True] * static_split.PREFIX_HELD]


def test_the_moves_make_no_prefix_sums_again_for_a_few_heads():
    """Four heads, every slot first on head 0: the moves spread them, and as no more than ``PREFIX_HELD`` heads
    move, none of their prefix sums is made a second time (each is made once, when its flow is)."""
    rng = np.random.default_rng(11)
    rows = [random_rows(rng, 10) for _ in range(4)]
    made = [0] * 4

    def reader(h):
        def read():
            made[h] += 1
            return rows[h]
        return read

    flows = [static_split._flow(priced_optimum(lambda _: rows[h], 1, 10, k, "coupled"), reader(h))
             for h, k in enumerate([10, 1, 1, 1])]
    assert made == [1, 1, 1, 1]
    assert static_split._move(flows) > 0 and made == [1, 1, 1, 1]
