"""The static allocation from estimated decreases (:mod:`kvcore.optima.float_curve`,
:func:`kvcore.optima.allocation.certified_allocation`), against the exact references.

* the successive-shortest-path decreases, compiled and plain, are the exact curve's (``RegretCurve``, certified
  flows in rationals) to rounding at every slot, and do not increase;
* the certified allocation is exactly the threshold allocation (and greedy's), on real flow curves whose dyadic
  weights tie often, at every total -- and so is the estimate itself there (dyadic sums are exact in doubles);
* a wrong estimate is never taken: with the estimate moved by one slot the result is still the threshold
  allocation, and an acceptance rule that skipped the check would return the wrong one (the mutant this catches);
  nor is one whose check reads a head's next slot one slot too far (hand-made curves, below);
* the threshold allocation's bisection on a hand example where testing a head's decrease one index late counts a
  slot it should not (found otherwise only by a deep hypothesis search).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adversary.strategies import sparse_attention_traces
from kvcore.optima import allocation, float_curve
from kvcore.optima.allocation import (RegretCurve, allocation_regret, certified_allocation, greedy_allocation,
                                      threshold_allocation)
from kvcore.optima.float_curve import FloatCurve, estimated_allocation


def float_decreases(trace, n: int) -> list[float]:
    curve = FloatCurve(RegretCurve(trace).entries, n)
    out = [curve.decrease]
    for _ in range(n - 1):
        out.append(curve.advance())
    return out


def value_curves(decreases: list[list[int]]) -> list:
    """Exact curves ``OPT(k)`` with the given decreases ``d(1), d(2), ...`` (flat after them)."""
    out = []
    for d in decreases:
        values = [Fraction(sum(d))]
        for x in d:
            values.append(values[-1] - x)
        out.append(lambda k, v=values: v[min(k, len(v) - 1)])
    return out


@pytest.mark.parametrize("rounds", [1, 2, 60])
def test_the_threshold_bisection_on_a_hand_example(rounds):
    """Decreases [1, 1] and [3, 2], limit 2, total 2: the two largest decreases are the second head's 3 and 2, so the
    allocation is [0, 2] (regret 2 + 0).  A bisection that tests ``d(mid + 1)`` for ``d(mid)`` credits head 2 with a
    single slot at ``lam`` in (2, 3] and hands the rest to head 1: [1, 1], regret 1 + 2 = 3."""
    curves = value_curves([[1, 1], [3, 2]])
    assert threshold_allocation(curves, 2, 2, rounds) == [0, 2]
    assert allocation_regret(curves, [0, 2]) == 2 < allocation_regret(curves, [1, 1])


def _stored_curves(decreases):
    """Curves given by values standing for stored ones (the estimate is replaced, so their entries are never read)."""
    curves = []
    for f in value_curves(decreases):
        curve = RegretCurve(solve=f)
        curve.entries = "stored"
        curves.append(curve)
    return curves


def test_a_check_reading_the_next_slot_too_far_does_not_take_a_wrong_estimate(monkeypatch):
    """Decreases [5, 4, 1] and [3, 0, 0], total 2: the allocation is [2, 0] (5 + 4 removed).  The estimate [1, 1] is
    wrong -- head 1's next slot (4) is worth more than head 2's last (3) -- and must be refused; a check reading each
    head's slot after next (1 and 0, both below 3) would accept it.  Curves given by values stand for stored ones
    (the estimate is replaced, so their entries are never read)."""
    curves = _stored_curves([[5, 4, 1], [3, 0, 0]])
    monkeypatch.setattr(float_curve, "estimated_allocation", lambda *a: [1, 1])
    assert certified_allocation(curves, 2, 3) == [2, 0] == greedy_allocation(curves, 2, 3)


def test_a_right_estimate_is_taken_without_the_threshold(monkeypatch):
    """The estimate proved right by the exact values at ``k_h - 1, k_h, k_h + 1`` is returned as it is: the
    threshold allocation (45-70 s of CPU on the model's 90 heads) is not run."""
    curves = _stored_curves([[5, 4, 1], [3, 0, 0]])
    monkeypatch.setattr(float_curve, "estimated_allocation", lambda *a: [2, 0])

    def refuse(*a):
        raise AssertionError("the threshold allocation ran on a proved estimate")

    monkeypatch.setattr(allocation, "threshold_allocation", refuse)
    assert certified_allocation(curves, 2, 3) == [2, 0]


@pytest.mark.parametrize("compiled", [True, False])
@given(trace=sparse_attention_traces(min_T=1, max_T=16, max_support=5))
def test_the_float_decreases_are_the_exact_ones(compiled, trace):
    exact = RegretCurve(trace)
    n = trace.T + 1
    with pytest.MonkeyPatch.context() as mp:
        if not compiled:  # the plain functions: the same numbers without numba
            mp.setattr(float_curve, "first_paths", float_curve.first_paths.py_func)
            mp.setattr(float_curve, "next_path", float_curve.next_path.py_func)
        est = float_decreases(trace, n)
    for k, d in enumerate(est, start=1):
        assert d == pytest.approx(float(exact.decrease(k)), abs=1e-12)
    assert all(a >= b for a, b in zip(est, est[1:]))


@given(traces=st.lists(sparse_attention_traces(min_T=6, max_T=6, max_support=4), min_size=1, max_size=5),
       data=st.data())
def test_the_certified_allocation_is_the_threshold_allocation(traces, data):
    T = traces[0].T
    total = data.draw(st.integers(0, len(traces) * T))
    k = certified_allocation([RegretCurve(t) for t in traces], total, T)
    assert k == threshold_allocation([RegretCurve(t) for t in traces], total, T)
    assert k == greedy_allocation([RegretCurve(t) for t in traces], total, T)
    # dyadic weights add up exactly in doubles, so here the estimate itself is right, ties included
    assert estimated_allocation([RegretCurve(t).entries for t in traces], total, T) == k


def test_a_wrong_estimate_falls_back_to_the_threshold(monkeypatch):
    """Three heads of uniform-ish rows: moving one slot of the estimate from one head to another is caught."""
    rng = np.random.default_rng(3)
    from adversary._build import attention_from_rows

    traces = [attention_from_rows([{i: w / sum(ws) for i, w in enumerate(ws)}
                                   for ws in (rng.random(t + 1) ** (h + 1) for t in range(8))], f"h{h}")
              for h in range(3)]
    total, T = 9, 8
    right = threshold_allocation([RegretCurve(t) for t in traces], total, T)
    assert estimated_allocation([RegretCurve(t).entries for t in traces], total, T) == right
    giver = max(range(3), key=lambda h: right[h])
    moved = [x - (h == giver) + (h == (giver + 1) % 3) for h, x in enumerate(right)]
    monkeypatch.setattr(float_curve, "estimated_allocation", lambda *a: list(moved))
    assert certified_allocation([RegretCurve(t) for t in traces], total, T) == right
    # without the exact check the moved estimate would be returned: it is not the threshold allocation
    assert moved != right


def test_curves_without_entries_use_the_threshold():
    vals = [Fraction(6), Fraction(3), Fraction(1), Fraction(0)]
    curves = [RegretCurve(solve=lambda k: vals[min(k, 3)]) for _ in range(2)]
    assert certified_allocation(curves, 3, 3) == threshold_allocation(curves, 3, 3) == [2, 1]
    with pytest.raises(allocation.ParameterError, match="exceeds"):
        certified_allocation(curves, 7, 3)

