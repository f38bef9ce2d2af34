""":func:`kvcore.exact_sum.fsum_array` against ``math.fsum`` (the plain reference), compiled and plain: the same float
on arrays of any finite floats -- subnormals, cancellation, magnitudes 2^-1074 to 2^1000 in one array, more
elements than one carry period -- and a non-finite element handed to ``fsum``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kvcore.exact_sum as es

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-2.0**1000, max_value=2.0**1000)


@pytest.fixture(scope="module", params=["compiled", "plain"])
def summed(request):
    """The compiled kernel, then the plain one (module-scoped: hypothesis' examples share it, nothing in it changes
    between them)."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "plain":
            patch.setattr(es.binned, "_compiled", es.binned.py_func)
        yield es.fsum_array


@given(x=hnp.arrays(np.float64, st.integers(0, 40), elements=finite))
def test_equals_fsum_on_any_finite_floats(summed, x):
    assert summed(x) == math.fsum(x.tolist())


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3000), spread=st.integers(0, 1070))
def test_equals_fsum_across_carries_and_cancellation(summed, seed, n, spread):
    """Many elements (up to six carry periods), exponents spread over ``spread`` binades, half of them negated
    copies of the others plus a residue: the exact sum is tiny beside the elements."""
    rng = np.random.default_rng(seed)
    x = rng.random(n) * np.exp2(-rng.integers(0, spread + 1, n).astype(float))
    x = np.concatenate([x, -x[: n // 2], rng.random(3) * 2.0**-1074 * 4])
    rng.shuffle(x)
    assert summed(x) == math.fsum(x.tolist())


def test_non_finite_goes_to_fsum(summed):
    assert summed(np.array([1.0, np.inf])) == math.inf
    assert math.isnan(summed(np.array([1.0, np.nan])))
    assert summed(np.array([], dtype=np.float64)) == 0.0


def test_one_bin_many_times(summed):
    """4,096 copies of the largest float below 1 (all in one bin, each mantissa 2^53 - 1): the bin must be carried
    before it overflows; the exact sum 4096 - 2^-41 is a float."""
    x = np.full(4096, 1.0 - 2.0**-53)
    assert summed(x) == 4096.0 - 2.0**-41 == math.fsum(x.tolist())
