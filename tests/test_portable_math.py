"""kvcore.portable_math against 60-digit decimal arithmetic (an independent evaluation: the ``decimal`` module's
``ln``/``exp`` are correctly rounded), at the accuracy its docstring states, plus the exact special values."""

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore import portable_math as pm


def _ulps(got: float, true: Decimal) -> float:
    t = float(true)
    return abs(Decimal(got) - true) / Decimal(math.ulp(t))


def _decimal(fn):
    with localcontext(prec=60):
        return fn()


positive = st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False)


@given(positive)
def test_log_within_three_units_in_the_last_place(x):
    assert x == 1.0 or _ulps(pm.log(x), _decimal(lambda: Decimal(x).ln())) <= 3


@given(st.floats(min_value=-700, max_value=700))
def test_exp_within_one_and_a_half_units_in_the_last_place(y):
    assert _ulps(pm.exp(y), _decimal(lambda: Decimal(y).exp())) <= 1.5


def test_the_worst_cases_on_a_dense_grid_where_the_series_are_longest():
    """ln on [1/2, 2] (the exponent term vanishes, so the atanh series carries the whole value; |f| reaches its
    maximum at sqrt(2)) and exp on [-2, 2] (the reduced argument covers its whole range): the measured worst errors,
    2.42 and 0.97 units.  One atanh term fewer than needed gives 6.1, one Taylor term fewer 2.1."""
    xs, ys = np.linspace(0.5, 2, 4001), np.linspace(-2, 2, 4001)
    worst_ln = max(_ulps(g, _decimal(lambda x=x: Decimal(x).ln())) for g, x in zip(pm.log(xs), xs.tolist()) if x != 1)
    worst_exp = max(_ulps(g, _decimal(lambda y=y: Decimal(y).exp())) for g, y in zip(pm.exp(ys), ys.tolist()))
    assert worst_ln <= 2.5 and worst_exp <= 1.0, (worst_ln, worst_exp)


@given(st.floats(min_value=0.5, max_value=1e6), st.floats(min_value=-4, max_value=4))
def test_power_within_its_stated_bound(x, y):
    true = _decimal(lambda: Decimal(x) ** Decimal(y))
    if not (1e-300 < true < Decimal(1e300)):
        return
    assert _ulps(pm.power(x, y), true) <= 2 + 2 * abs(y * math.log(x))


def test_zipf_powers_of_every_rank_the_figures_use():
    """r^-s for every rank of Fig. 13 (n = 4096) and its exponents: the arrays the traces and figures are made of."""
    ranks = np.arange(1, 4097, dtype=np.float64)
    for s in (0.8, 1.1, 1.6):
        got = pm.power(ranks, -s)
        worst = max(float(_ulps(float(g), _decimal(lambda r=r: Decimal(r) ** Decimal(-s)))) / (2 + 2 * s * math.log(r))
                    for g, r in zip(got, ranks.tolist()))
        assert worst <= 1, (s, worst)


def test_exact_and_special_values_and_shapes():
    assert pm.log(1.0) == 0.0 and pm.exp(0.0) == 1.0 and pm.log(8.0, 2) == 3.0
    assert pm.log(0.0) == -math.inf and math.isnan(pm.log(-1.0)) and pm.log(math.inf) == math.inf
    assert pm.exp(-math.inf) == 0.0 and pm.exp(800.0) == math.inf and pm.exp(-800.0) == 0.0
    assert pm.power(0.0, 2.0) == 0.0 and pm.power(0.0, -1.0) == math.inf and pm.power(5.0, 0.0) == 1.0
    assert pm.power(1.0, 123.4) == 1.0
    assert pm.power(np.arange(1.0, 7.0).reshape(2, 3), 2.0).shape == (2, 3)
    assert isinstance(pm.log(2.0), float) and pm.logspace(0, 2, 3).tolist() == pytest.approx([1, 10, 100])
    with pytest.raises(ValueError, match="log base"):
        pm.log(2.0, 1.0)
