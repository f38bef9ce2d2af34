"""Budgets across heads (paper §8, §11): the exact per-head regret curves, the static allocation, the dynamic coupled
optimum, each against an independent reference.

* the incremental (warm) curve and the per-capacity solves equal ``nm_opt`` at every capacity, and the curves of
  random sparse traces are convex and non-increasing in exact arithmetic;
* greedy on convex curves equals every-split brute force and the DP (any curves); on a non-convex curve greedy is
  beaten (the hypothesis is needed: this is the mutant the exactness test would catch);
* the coupled flow equals dynamic programming over the joint resident sets on tiny two-head traces, equals ``nm_opt``
  for one head, and is never above the best static split (any static split is a coupled schedule).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adversary._build import attention_from_rows
from adversary.strategies import sparse_attention_traces
from kvcore.errors import ParameterError
from kvcore.optima import nm_opt
from kvcore.optima.allocation import (RegretCurve, allocation_regret, brute_allocation, convexity_violations,
                                      dp_allocation, greedy_allocation, greedy_order, marginal_interval,
                                      uniform_allocation)
from kvcore.optima.capacity_curve import entries_of, optimum_curve, regret_curve
from kvcore.optima.coupled import brute_coupled, coupled_curve, coupled_nm_opt


@st.composite
def convex_curves(draw, max_heads=4, max_len=7):
    """Exact convex non-increasing curves: a start mass and non-increasing non-negative decreases."""
    out = []
    for _ in range(draw(st.integers(1, max_heads))):
        dec = sorted(draw(st.lists(st.integers(0, 40), min_size=max_len, max_size=max_len)), reverse=True)
        vals = [Fraction(sum(dec) + draw(st.integers(0, 5)), 8)]
        for d in dec:
            vals.append(vals[-1] - Fraction(d, 8))
        out.append(vals)
    return out


def uniform_rows(T):
    """Row t spreads its mass evenly over tokens 0..t."""
    return attention_from_rows([{i: 1 / (t + 1) for i in range(t + 1)} for t in range(T)], f"uniform rows T={T}")


def as_functions(curves):
    return [lambda k, v=v: v[min(k, len(v) - 1)] for v in curves]


@given(sparse_attention_traces(min_T=1, max_T=14), st.booleans())
def test_the_curve_equals_nm_opt_at_every_capacity_and_is_convex(trace, warm):
    caps = list(range(1, trace.T + 2))
    e = entries_of([trace])
    lost = [p.lost for p in optimum_curve(e, caps, warm=warm)]
    for c, mask in zip(caps, lost):
        assert abs(e.weight[mask].sum() - nm_opt(trace, c).cost) < 1e-9
    curve = RegretCurve(trace)
    assert convexity_violations(curve.values(trace.T + 1)) == {"increase": [], "concave": []}
    assert curve(trace.T + 1) == 0 or trace.nnz == 0 or curve(trace.T) == curve(trace.T + 1)


@given(convex_curves(), st.integers(0, 12))
def test_greedy_is_the_exact_static_optimum_on_convex_curves(curves, total):
    f = as_functions(curves)
    k = greedy_allocation(f, total)
    assert sum(k) == total
    best = brute_allocation(f, total)
    assert allocation_regret(f, k) == best
    assert dp_allocation(f, total)[0] == best
    last, nxt = marginal_interval(f, k)
    assert last is None or last >= nxt  # §8's condition at the optimum


@given(st.lists(sparse_attention_traces(min_T=4, max_T=9), min_size=2, max_size=3), st.integers(1, 10))
def test_greedy_on_real_flow_curves_equals_brute_force(traces, total):
    curves = [RegretCurve(t) for t in traces]
    k = greedy_allocation(curves, total)
    assert allocation_regret(curves, k) == brute_allocation(curves, total)


def test_greedy_needs_convexity():
    """A curve that drops only at its second slot: greedy gives the slots elsewhere and misses the optimum."""
    f = as_functions([[Fraction(10), Fraction(10), Fraction(0)], [Fraction(3), Fraction(2), Fraction(1)]])
    assert convexity_violations([Fraction(10), Fraction(10), Fraction(0)])["concave"] == [1]
    assert allocation_regret(f, greedy_allocation(f, 2)) == 11 > brute_allocation(f, 2) == 3


def test_a_curve_flat_from_two_equal_values_is_not_solved_further():
    """RegretCurve's shortcut (its docstring): once two consecutive solved values are equal, larger capacities return
    that value without calling the solver; :meth:`RegretCurve.solved` still solves."""
    values = [Fraction(5), Fraction(2), Fraction(1), Fraction(1), Fraction(1)]
    asked = []
    curve = RegretCurve(solve=lambda k: asked.append(k) or values[min(k, 4)])
    assert [curve(2), curve(3)] == [1, 1] and asked == [0, 2, 3]
    assert curve(4) == 1 and curve(9) == 1 and asked == [0, 2, 3]
    assert curve.solved(4) == 1 and asked == [0, 2, 3, 4]


def test_the_marginal_interval_on_a_hand_example():
    """Decreases [5, 4, 1] and [3, 2, 0] at [1, 2]: the last slots removed 5 and 2, the next ones would remove 4 and
    0, so the interval is (2, 4) and §8's condition fails (a slot moved from head 2 to head 1 gains 4 - 2).  At the
    optimum [2, 1] it is (3, 2)."""
    f = as_functions([[Fraction(10), Fraction(5), Fraction(1), Fraction(0)],
                      [Fraction(5), Fraction(2), Fraction(0), Fraction(0)]])
    assert marginal_interval(f, [1, 2]) == (2, 4)
    assert marginal_interval(f, [2, 1]) == (3, 2)
    assert marginal_interval(f, [0, 0]) == (None, 5)


def test_uniform_and_greedy_order_and_bad_budgets():
    assert uniform_allocation(3, 7) == [3, 2, 2]
    assert uniform_allocation(2, 3) == [2, 1] and uniform_allocation(4, 7) == [2, 2, 2, 1]  # odd quotients too
    f = as_functions([[Fraction(4), Fraction(1), Fraction(0)], [Fraction(4), Fraction(2), Fraction(1)]])
    order = greedy_order(f, 4, limit=2)
    assert order == [0, 1, 0, 1] and greedy_allocation(f, 3, limit=2) == [2, 1]
    with pytest.raises(ParameterError, match="exceeds"):
        greedy_order(f, 5, limit=2)
    for bad in (-1, 1.5, True):
        with pytest.raises(ParameterError, match="total budget"):
            greedy_allocation(f, bad)
    with pytest.raises(ParameterError, match="increasing"):
        regret_curve(uniform_rows(2), [2, 2])


@st.composite
def head_pairs(draw):
    T = draw(st.integers(1, 5))
    return [draw(sparse_attention_traces(min_T=T, max_T=T, max_support=3)) for _ in range(2)]


@given(head_pairs(), st.integers(1, 5))
def test_the_coupled_flow_equals_brute_force(traces, budget):
    res = coupled_nm_opt(traces, budget)
    assert res.certified and res.gap_bound == 0.0
    assert abs(res.regret - brute_coupled(traces, budget)) < 1e-9
    assert abs(sum(res.per_head) - res.regret) < 1e-9
    # any static split is a coupled schedule: the coupled optimum is never above the best one
    curves = [RegretCurve(t) for t in traces]
    assert res.exact_regret <= allocation_regret(curves, greedy_allocation(curves, budget))


@given(sparse_attention_traces(min_T=1, max_T=12), st.integers(1, 6))
def test_one_head_coupled_is_nm_opt(trace, budget):
    assert abs(coupled_nm_opt([trace], budget).regret - nm_opt(trace, budget).cost) < 1e-9


@given(head_pairs(), st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True))
def test_warm_coupled_budgets_equal_cold_ones(traces, budgets):
    budgets = sorted(budgets)
    warm, cold = coupled_curve(traces, budgets), coupled_curve(traces, budgets, warm=False)
    assert [r.exact_regret for r in warm] == [r.exact_regret for r in cold]


def test_traces_of_different_lengths_are_refused():
    with pytest.raises(ParameterError, match="one line needs one length"):
        coupled_nm_opt([uniform_rows(3), uniform_rows(4)], 2)
