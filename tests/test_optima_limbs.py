"""Exact wide integers in int64 limbs (:mod:`kvcore.optima.limbs`, issue 30): every operation against Python integers
on random values of up to a few hundred bits, compiled and as plain Python; the potentials and reduced costs of a
random spanning tree against the same computed in Python integers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.optima import limbs
from kvcore.optima.limbs import Limbs, join, reduced_costs, segment_prefix, tree_potentials, width_for

KERNELS = [k for k in vars(limbs).values() if isinstance(k, limbs.Kernel)]


@pytest.fixture(scope="module", params=["compiled", "plain"])
def mode(request):
    """Every test runs with the compiled kernels and again with the plain Python ones (the fixture is module-scoped:
    hypothesis' examples share it, and nothing in it changes between them)."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "plain":
            for k in KERNELS:
                patch.setattr(k, "_compiled", k.py_func)
        yield request.param


def wide(max_bits: int):
    return st.integers(-(1 << max_bits) + 1, (1 << max_bits) - 1)


@st.composite
def rows(draw, max_bits=200):
    bits = draw(st.integers(1, max_bits))
    vals = draw(st.lists(st.one_of(wide(bits), st.sampled_from([0, 1, -1, (1 << 31) - 1, -(1 << 31)])),
                         min_size=1, max_size=12))
    width = width_for(max(abs(v).bit_length() for v in vals)) + draw(st.integers(0, 2))
    return vals, width


def objects(vals):
    a = np.empty(len(vals), dtype=object)
    a[:] = vals
    return a


@given(rows())
def test_round_trip_sign_negation_and_bits(mode, inst):
    vals, width = inst
    x = Limbs.of(objects(vals), width)
    assert x.to_objects().tolist() == vals
    assert (-x).to_objects().tolist() == [-v for v in vals]
    assert x.widened(width + 3).to_objects().tolist() == vals
    assert x.signs().tolist() == [(v > 0) - (v < 0) for v in vals]
    assert x.bit_length() == max(abs(v).bit_length() for v in vals)
    # normalized: every limb below the top in [0, 2**31)
    assert ((x.d[:, :-1] >= 0) & (x.d[:, :-1] <= limbs.MASK)).all()


@given(rows(), st.integers(0, 260), st.one_of(st.integers(0, 5), st.integers(0, 61).map(lambda b: 1 << b)))
def test_shift_round_is_round_half_up_then_clip(mode, inst, k, bound):
    vals, width = inst
    x = Limbs.of(objects(vals), width)
    want = [max(-bound, min(bound, (v + (1 << (k - 1))) >> k if k else v)) for v in vals]
    assert x.shift_round(k, bound).tolist() == want


@given(st.lists(wide(62), min_size=1, max_size=12), st.integers(0, 3))
def test_int64_in_and_out(mode, vals, extra):
    x = Limbs.of(np.array(vals, dtype=np.int64), width_for(63) + extra)
    assert x.to_objects().tolist() == vals
    assert x.to_int64().tolist() == vals


def test_to_int64_refuses_what_does_not_fit():
    with pytest.raises(OverflowError, match="63 bits"):
        Limbs.of(objects([1 << 62]), 4).to_int64()


@given(st.lists(st.tuples(st.sampled_from([1, -1]), st.integers(0, (1 << 53) - 1), st.integers(0, 1100)),
                min_size=1, max_size=12))
def test_scaled_builds_sign_times_odd_times_power_of_two(mode, parts):
    sign, odd, shift = (np.array(p, dtype=np.int64) for p in zip(*parts))
    x = Limbs.scaled(sign, odd, shift, width_for(1100 + 53))
    assert x.to_objects().tolist() == [s * o << e for s, o, e in parts]


@given(rows(max_bits=150), st.data())
def test_segment_prefix_restarts_at_every_segment(mode, inst, data):
    vals, width = inst
    cuts = sorted(data.draw(st.sets(st.integers(1, len(vals) - 1), max_size=len(vals) - 1))) if len(vals) > 1 else []
    counts = np.diff([0] + cuts + [len(vals)])
    got = segment_prefix(Limbs.of(objects(vals), width + 1), counts).to_objects().tolist()
    want, i = [], 0
    for c in counts:
        acc = 0
        for v in vals[i:i + c]:
            acc += v
            want.append(acc)
        i += c
    assert got == want


@given(rows(), st.lists(wide(62), max_size=5))
def test_join_keeps_order_and_values(mode, inst, small):
    vals, width = inst
    assert join([np.array(small, dtype=np.int64), Limbs.of(objects(vals), width)]).to_objects().tolist() == \
        small + vals
    assert isinstance(join([np.array(small, dtype=np.int64), np.zeros(2, np.int64)]), np.ndarray)


@st.composite
def trees(draw):
    """A random spanning tree hung from a root (last node) with random extra arcs, and wide costs."""
    n = draw(st.integers(1, 12))
    parent = [draw(st.integers(0, v - 1)) if v else n for v in range(n)]  # node v hangs below an earlier node
    arcs = []
    pred = []
    for v, p in enumerate(parent):
        if p == n:
            pred.append(None)
        else:
            pred.append(len(arcs))
            arcs.append((v, p) if draw(st.booleans()) else (p, v))
    for _ in range(draw(st.integers(0, 8))):
        arcs.append((draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))))
    costs = draw(st.lists(wide(draw(st.integers(1, 180))), min_size=len(arcs), max_size=len(arcs)))
    return n, parent, pred, arcs, costs


@given(trees())
def test_potentials_and_reduced_costs_equal_python_integers(mode, inst):
    n, parent, pred, arcs, costs = inst
    m = len(arcs)
    tail = np.array([a for a, _ in arcs], dtype=np.int64).reshape(-1)
    head = np.array([b for _, b in arcs], dtype=np.int64).reshape(-1)
    pred_arr = np.array([m + v if a is None else a for v, a in enumerate(pred)] + [-1], dtype=np.int64)
    order = np.array([n] + list(range(n)), dtype=np.int64)  # parents come before children
    pot_py = [0] * (n + 1)
    for v in range(n):
        a = pred[v]
        if a is None:
            pot_py[v] = 0
        elif arcs[a][0] == v:
            pot_py[v] = pot_py[arcs[a][1]] - costs[a]
        else:
            pot_py[v] = pot_py[arcs[a][0]] + costs[a]
    width = width_for(max([abs(c).bit_length() for c in costs] + [1]) + (2 * n + 1).bit_length())
    c = Limbs.of(objects(costs), width)
    pot = tree_potentials(c, tail, head, pred_arr, order, width)
    assert pot.to_objects().tolist() == pot_py
    rc, signs = reduced_costs(c, pot, tail, head)
    want = [costs[a] + pot_py[arcs[a][0]] - pot_py[arcs[a][1]] for a in range(m)]
    assert rc.to_objects().tolist() == want
    assert signs.tolist() == [(v > 0) - (v < 0) for v in want]
    assert reduced_costs(c, pot, tail, head, store=False)[1].tolist() == signs.tolist()
    assert all(want[a] == 0 for a in pred if a is not None)
