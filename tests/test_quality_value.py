"""The value-aware optimum (``OPT:value``, realtrace.quality.value_cost) and the flow entry point it uses
(kvcore.optima.nm_opt_costs), on small random tensors: numpy only, no model, no torch."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcore.errors import ParameterError
from kvcore.optima import nm_opt, nm_opt_costs
from kvcore.traces import AttentionTrace
from realtrace.quality.schedule import drop_from_evictions, lazy_drop, resident_counts
from realtrace.quality.value_cost import (fused_costs, lost, top_entries, total_cost, value_costs, value_costs_plain,
                                          value_distance, value_optimum)


def random_head(rng: np.random.Generator, T: int, d: int = 4, alpha: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    """Causal rows ``(T, T)`` (each a Dirichlet draw over ``0..t``, so peaked for small ``alpha``) and values
    ``(T, d)`` with a few outliers (every fifth value scaled up)."""
    rows = np.zeros((T, T))
    for t in range(T):
        rows[t, :t + 1] = rng.dirichlet(np.full(t + 1, alpha))
    values = rng.normal(size=(T, d))
    values[::5] *= 4.0
    return rows, values


def dense_trace(rows: np.ndarray) -> AttentionTrace:
    T = rows.shape[0]
    return AttentionTrace(np.cumsum([0] + list(range(1, T + 1))), np.concatenate([np.arange(t + 1) for t in range(T)]),
                          np.concatenate([rows[t, :t + 1] for t in range(T)]), None, "random")


def mass_optimum(rows: np.ndarray, k: int) -> np.ndarray:
    """OPT's schedule on complete rows, through the ordinary trace entry point (nm_opt), made lazy."""
    T = rows.shape[0]
    return lazy_drop(drop_from_evictions(nm_opt(dense_trace(rows), k, record=True).evictions, T), k)


def brute_costs(costs: np.ndarray, k: int) -> float:
    """The no-refetch optimum of per-entry costs by dynamic programming over every resident set (independent of the
    flow): at step t token t arrives, any subset of the previous set plus t of at most k tokens stays, and the step
    pays the costs of its row's tokens outside that set."""
    T = costs.shape[0]
    table = {frozenset(): 0.0}
    for t in range(T):
        nxt: dict[frozenset, float] = {}
        for state, paid in table.items():
            pool = sorted(state | {t})
            for size in range(min(k, len(pool)) + 1):
                for keep in combinations(pool, size):
                    s = frozenset(keep)
                    value = paid + math.fsum(costs[t, i] for i in range(t + 1) if i not in s)
                    if value < nxt.get(s, np.inf):
                        nxt[s] = value
        table = nxt
    return min(table.values())


def test_value_distance_is_the_norm_of_value_minus_output():
    rng = np.random.default_rng(0)
    rows, values = random_head(rng, 9)
    o = rows @ values
    want = np.array([[np.linalg.norm(values[i] - o[t]) if i <= t else 0.0 for i in range(9)] for t in range(9)])
    assert np.allclose(value_distance(rows, values), want, rtol=1e-10, atol=1e-12)
    assert np.array_equal(value_costs(rows, values), rows * value_distance(rows, values))


def exact_distance(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``||v_i - o_t||`` with ``o = rows @ values`` in doubles (the output the distance is of), the square summed in
    rationals, so the only rounding is the final square root's (half an ulp after one of the square)."""
    o = rows @ values
    T = rows.shape[0]
    out = np.zeros((T, T))
    for t in range(T):
        for i in range(t + 1):
            out[t, i] = math.sqrt(sum((Fraction(x) - Fraction(y)) ** 2 for x, y in zip(values[i].tolist(),
                                                                                        o[t].tolist())))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_near_aligned_distances_are_within_the_documented_error(seed):
    """On rows that put nearly all their mass on the diagonal (each value a little off its output, squares from about
    1e-8 to 1e-3 of ``|v|^2 + |o|^2``), every distance -- :func:`value_distance` and the fused costs divided by their
    rows -- is within the relative error the docstring states for the entries not refined, about 1e-11 (a few
    ``eps / REFINE``), of a direct computation in rationals; refined ones are far closer.  With the refinement
    threshold lowered to 1e-6 the worst is near 1e-10."""
    rng = np.random.default_rng(seed)
    T, d = 12, 6
    values = rng.normal(size=(T, d))
    for weight in (1e2, 1e3, 1e4):
        rows = np.tril(rng.random((T, T)) + weight * np.eye(T))
        rows /= rows.sum(axis=1, keepdims=True)
        want = exact_distance(rows, values)
        fused = np.divide(value_costs(rows, values), rows, out=np.zeros((T, T)), where=np.tri(T, dtype=bool))
        for got in (value_distance(rows, values), fused):
            assert np.all(np.abs(got - want) <= 1e-11 * want), weight


@settings(deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 6), st.booleans(), st.booleans())
def test_value_costs_are_the_plain_costs_bit_for_bit(seed, T, d, aligned, plain_kernel):
    """The fused costs (compiled and plain Python) equal the rows times :func:`value_distance` in every bit, also
    where the distance is refined: with ``aligned`` most rows put nearly all their mass on one position, so that
    value lies next to the output and the square cancels."""
    rng = np.random.default_rng(seed)
    rows, values = random_head(rng, T, d, alpha=0.02 if aligned else 0.4)
    if aligned:
        rows = np.tril(rows + 1e4 * np.eye(T))
        rows /= rows.sum(axis=1, keepdims=True)
    want = value_costs_plain(rows, values)
    if plain_kernel:  # the kernel's plain function in place of the compiled one, the rest as value_costs does it
        import realtrace.quality.value_cost as vc
        old, vc.fused_costs = vc.fused_costs, fused_costs.py_func
        try:
            got = value_costs(rows, values)
        finally:
            vc.fused_costs = old
    else:
        got = value_costs(rows, values)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    if aligned and T > 1:  # the refinement is exercised
        o, refine = rows @ values, np.zeros((T, T), dtype=np.bool_)
        fused_costs(rows, (values ** 2).sum(axis=1), (o ** 2).sum(axis=1), o @ values.T, np.empty((T, T)), refine)
        assert refine.any()


@pytest.mark.parametrize("seed", range(10))
def test_cost_flow_equals_brute_force_on_tiny_cases(seed):
    """nm_opt_costs on arbitrary non-negative costs (rows summing anywhere) against the exhaustive DP."""
    rng = np.random.default_rng(seed)
    T, k = int(rng.integers(3, 7)), int(rng.integers(1, 4))
    costs = np.tril(rng.exponential(size=(T, T)) * (rng.random((T, T)) < 0.8))
    res = nm_opt_costs(costs, k, record=True)
    assert res.cost == pytest.approx(brute_costs(costs, k), abs=1e-12)
    drop = drop_from_evictions(res.evictions, T)
    assert resident_counts(drop).max() <= k
    assert total_cost(costs, drop) == pytest.approx(res.cost, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_cost_flow_on_attention_rows_is_nm_opt(seed):
    rng = np.random.default_rng(seed)
    rows, _ = random_head(rng, 25)
    assert nm_opt_costs(rows, 5).cost == nm_opt(dense_trace(rows), 5).cost


@pytest.mark.parametrize("seed", range(12))
def test_each_optimum_wins_on_its_own_cost_exactly(seed):
    """On the same head the value optimum's value cost is at most the mass optimum's, and the mass optimum's mass
    regret at most the value optimum's -- compared exactly (correctly rounded sums of the same float entries, so no
    tolerance); both lazy schedules hold min(t + 1, k)."""
    rng = np.random.default_rng(seed)
    T, k = int(rng.integers(15, 35)), int(rng.integers(2, 7))
    rows, values = random_head(rng, T)
    costs = value_costs(rows, values)
    by_value, lower, cost = value_optimum(costs, k)
    by_mass = mass_optimum(rows, k)
    full = np.minimum(np.arange(T) + 1, k)
    assert np.array_equal(resident_counts(by_value), full) and np.array_equal(resident_counts(by_mass), full)
    assert cost == lower == total_cost(costs, by_value)  # the lazy schedule is exactly optimal on complete rows
    assert total_cost(costs, by_value) <= total_cost(costs, by_mass)
    assert total_cost(rows, by_mass) <= total_cost(rows, by_value)


def test_the_two_optima_differ_somewhere():
    """The comparison above is not vacuous: on some of these heads each optimum is strictly worse on the other's
    cost."""
    strict_value = strict_mass = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        T, k = int(rng.integers(15, 35)), int(rng.integers(2, 7))
        rows, values = random_head(rng, T)
        costs = value_costs(rows, values)
        by_value, by_mass = value_optimum(costs, k)[0], mass_optimum(rows, k)
        strict_value += total_cost(costs, by_value) < total_cost(costs, by_mass)
        strict_mass += total_cost(rows, by_mass) < total_cost(rows, by_value)
    assert strict_value > 0 and strict_mass > 0


@pytest.mark.parametrize("seed", range(4))
def test_truncated_value_optimum_brackets_the_optimum(seed):
    rng = np.random.default_rng(seed)
    rows, values = random_head(rng, 30)
    costs = value_costs(rows, values)
    exact = value_optimum(costs, 4)[1]
    _, lower, cost = value_optimum(costs, 4, top=2)
    assert lower <= exact + 1e-12 and exact <= cost + 1e-12
    assert (np.count_nonzero(top_entries(costs, 2), axis=1) <= 2).all()


def test_lost_marks_entries_of_dropped_positions():
    assert lost(np.array([1, 3, 3]), 3).tolist() == [[False, False, False], [True, False, False],
                                                     [True, False, False]]


@pytest.mark.parametrize("costs, match", [
    (np.array([[1.0, 0.5], [0.2, 0.3]]), "step 0: the cost of token 1 is a future token's"),
    (np.array([[1.0, 0.0], [-0.2, 0.3]]), "step 1: the cost of token 0 is negative"),
    (np.array([[np.nan, 0.0], [0.2, 0.3]]), "step 0: the cost of token 0 is not finite"),
    (np.ones((2, 3)), "must be a square"),
])
def test_bad_costs_are_one_line_errors(costs, match):
    with pytest.raises(ParameterError, match=match):
        nm_opt_costs(costs, 1)


def test_ordinary_traces_keep_their_row_check():
    """The cost entry point does not weaken AttentionTrace: a row summing above 1 is still refused there."""
    with pytest.raises(Exception, match="row sums to"):
        AttentionTrace(np.array([0, 1]), np.array([0]), np.array([1.5]), None, "heavy")


def test_quality_help_names_the_value_optimum():
    from tests.command_line import run_module

    code, out, err = run_module("paper_check", "quality", "--help", timeout=300)
    assert code == 0 and "OPT:value" in out and "||v_i - o_t||" in " ".join(out.split()), err[-500:]


def test_value_optimum_is_parsed_like_opt():
    from realtrace.quality.run import parse_config

    assert parse_config("opt:VALUE")[0].spec == "OPT:value"
    with pytest.raises(ParameterError, match="unknown optimum"):
        parse_config("OPT:values")
