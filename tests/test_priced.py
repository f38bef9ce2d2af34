"""The coupled and static optima by pricing (:mod:`kvcore.optima.priced`) against the plain complete network.

* on random small instances, with and without exits leaving the network between rounds, the priced coupled
  optimum equals the coupled flow on every exit
  (:func:`kvcore.optima.coupled.coupled_curve`), the priced static one the best split of the exact regret curves by
  dynamic programming (:func:`kvcore.optima.allocation.dp_allocation`, no convexity assumed), exactly (Fractions);
  the result is certified, and an independent exact check of every exit's reduced cost (:func:`verify`) finds none
  that breaks complementary slackness;
* a deliberately broken pricing that never prices the diagonal exits is caught by that check (and its regret is
  above the optimum);
* the Lagrangian bound of any round is a lower bound on the exact optimum (a solve stopped after one round on the
  heaviest entry per row brackets it), and at the certified optimum it is the optimum up to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.errors import ParameterError
from kvcore.optima.allocation import RegretCurve, dp_allocation
from kvcore.optima.coupled import coupled_curve
from kvcore.optima.lagrangian import verify
from kvcore.optima.priced import STARTS, priced_optimum
from kvcore.traces import AttentionTrace


def random_rows(rng: np.random.Generator, T: int) -> np.ndarray:
    """Complete rows with skewed weights, some entries exactly 0 (no exit there), every diagonal positive."""
    a = np.tril(rng.random((T, T)) ** 3)
    a[rng.random((T, T)) < 0.3] = 0.0
    a[np.arange(T), np.arange(T)] += 1e-3
    return a / a.sum(axis=1, keepdims=True)


def as_trace(a: np.ndarray) -> AttentionTrace:
    """Every positive entry of ``a`` stored: the complete network of :mod:`kvcore.optima.nm_flow`."""
    T = a.shape[0]
    step, index = np.nonzero(np.tril(a))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(step, minlength=T))])
    return AttentionTrace(indptr, index, a[step, index], np.zeros(T), "random rows")


def instance(seed: int, max_heads: int = 3, max_T: int = 9):
    rng = np.random.default_rng(seed)
    H, T = int(rng.integers(1, max_heads + 1)), int(rng.integers(2, max_T + 1))
    rows = [random_rows(rng, T) for _ in range(H)]
    return rows, H, T, int(rng.integers(1, H * T + 1))


@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(1, 4), st.booleans(), st.sampled_from(STARTS))
def test_the_priced_coupled_optimum_is_the_complete_networks(seed, top, per_item, drop, start):
    rows, H, T, B = instance(seed)
    res = priced_optimum(lambda h: rows[h], H, T, B, "coupled", top=top, per_item=per_item, drop=drop, start=start)
    assert res.exact_regret == coupled_curve([as_trace(a) for a in rows], [B])[0].exact_regret
    assert res.certificate.certified and res.certificate.margin >= 0
    assert verify(rows, res) == []
    t, i = np.arange(T)[:, None], np.arange(T)[None, :]
    resident = sum(((d[None, :] > t) & (i <= t)).sum(axis=1) for d in res.drops)  # per step, all heads
    assert resident.max() <= B


@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.booleans(), st.sampled_from(STARTS))
def test_the_priced_static_optimum_is_the_best_split(seed, top, drop, start):
    rows, H, T, B = instance(seed)
    res = priced_optimum(lambda h: rows[h], H, T, B, "static", top=top, drop=drop, start=start)
    curves = [RegretCurve(as_trace(a)) for a in rows]
    best, _ = dp_allocation([lambda k, c=c: c(min(k, T)) for c in curves], B)
    assert res.exact_regret == best
    assert sum(res.slots) == B and max(res.slots) <= T
    assert res.exact_regret == sum((c(k) for c, k in zip(curves, res.slots)), 0)
    assert res.certificate.certified and verify(rows, res) == []


def test_a_pricing_that_skips_the_diagonal_exits_is_caught():
    """Two heads whose tokens are worth keeping through their arrival step (0.3 on the diagonal, 0.2 one step later,
    the rest on token 0): the network starts from token 0's exits and each token's last one (top = 1), and a pricing
    that never looks at the diagonal exits stops at once, claiming a certificate -- the exact check finds the exits
    it skipped."""
    T = 6
    a = np.zeros((T, T))
    a[np.arange(T), np.arange(T)] = 0.3
    a[np.arange(1, T), np.arange(T - 1)] = 0.2
    a[:, 0] += 1.0 - a.sum(axis=1)
    rows = [a, a.copy()]
    good = priced_optimum(lambda h: rows[h], 2, T, 4, "coupled", top=1, start="top")
    broken = priced_optimum(lambda h: rows[h], 2, T, 4, "coupled", top=1, skip=lambda t, i: t == i, start="top")
    assert verify(rows, good) == []
    assert broken.exact_regret > good.exact_regret
    assert verify(rows, broken) != []


@given(st.integers(0, 2**32 - 1))
def test_the_first_network_keeps_every_token_to_its_last_entry(seed):
    """With room for every token (``B = H T``) the optimum keeps each to its last positive entry, no regret: the
    first network holds each token's last exit beside its rows' heaviest entries, so its solve (one round, before
    any pricing) already loses nothing, even from one entry per row."""
    rows, H, T, _ = instance(seed)
    res = priced_optimum(lambda h: rows[h], H, T, H * T, "coupled", top=1, max_rounds=1, start="top")
    assert res.exact_regret == 0 and res.certificate.rounds == 1
    assert all((d == T - np.argmax(np.tril(a)[::-1] > 0, axis=0)).all() for a, d in zip(rows, res.drops))


@given(st.integers(0, 2**32 - 1), st.sampled_from(["coupled", "static"]))
def test_the_lagrangian_bound_is_a_lower_bound_and_tight_at_the_optimum(seed, kind):
    rows, H, T, B = instance(seed, max_T=10)
    exact = priced_optimum(lambda h: rows[h], H, T, B, kind)
    one = priced_optimum(lambda h: rows[h], H, T, B, kind, top=1, max_rounds=1, start="top")
    scale = 1e-12 * H * T
    assert one.certificate.lower_bound <= exact.regret + scale
    assert exact.regret <= one.regret + scale  # a restricted solve's schedule is feasible: an upper bound
    assert exact.certificate.lower_bound == pytest.approx(exact.regret, abs=scale)


def test_bad_input_is_one_parameter_error():
    a = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    with pytest.raises(ParameterError, match="kind"):
        priced_optimum(lambda h: a, 1, 3, 2, "dynamic")
    with pytest.raises(ParameterError, match="shape"):
        priced_optimum(lambda h: a[:2], 1, 3, 2)
    with pytest.raises(ParameterError, match="step 1"):
        priced_optimum(lambda h: np.where(np.eye(3, dtype=bool) & (np.arange(3) == 1), -1.0, a), 1, 3, 2)
    with pytest.raises(ParameterError, match="exceeds"):
        priced_optimum(lambda h: a, 1, 3, 4, "static")


def truncated_trace(a: np.ndarray, top: int) -> AttentionTrace:
    """The ``top`` heaviest entries of each row of ``a``, the rest as the row's residual."""
    keep = np.zeros_like(a, dtype=bool)
    order = np.argsort(-np.tril(a), axis=1, kind="stable")[:, :top]
    keep[np.arange(a.shape[0])[:, None], order] = True
    kept = np.where(keep & (np.tril(a) > 0), a, 0.0)
    T = a.shape[0]
    step, index = np.nonzero(kept)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(step, minlength=T))])
    return AttentionTrace(indptr, index, kept[step, index], np.maximum(1.0 - kept.sum(axis=1), 0.0), "truncated")


def truncated_head(seed: int, top: int, max_T: int):
    """One head of random complete rows (``T`` in ``[2, max_T)``), a capacity ``k``, the complete rows' exact NM
    optimum at ``k`` and the optimum of its rows cut to the ``top`` heaviest entries: ``(a, k, exact, cut)``."""
    from kvcore.optima import nm_opt
    from kvcore.optima.capacity_curve import entries_of, optimum_curve

    rng = np.random.default_rng(seed)
    T = int(rng.integers(2, max_T))
    a = random_rows(rng, T)
    k = int(rng.integers(1, T + 1))
    (cut,) = optimum_curve(entries_of([truncated_trace(a, top)]), [k])
    return a, k, nm_opt(as_trace(a), k).cost, cut


@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_a_truncated_solves_slot_prices_bound_the_complete_optimum(seed, top):
    """One head: the Lagrangian bound from the line potentials of the optimum of the truncated rows is at most the
    complete rows' optimum; from the complete solve's own potentials it is that optimum."""
    from kvcore.optima.capacity_curve import entries_of, optimum_curve
    from kvcore.optima.lagrangian import lagrangian_bound

    a, k, exact, cut = truncated_head(seed, top, 12)
    assert lagrangian_bound([a], cut.line_potentials, k) <= exact + 1e-12
    (full,) = optimum_curve(entries_of([as_trace(a)]), [k])
    assert lagrangian_bound([a], full.line_potentials, k) == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize("compiled", [True, False])
def test_the_exact_prefix_masses_are_the_rational_sums(compiled):
    """The exits' prefix masses in limbs (compiled kernel and plain Python) equal the sums of the weights as
    Fractions, at the common unit of the smallest bit of any weight."""
    from fractions import Fraction

    from kvcore.optima import pricing
    from kvcore.optima.mincost import dyadic

    rng = np.random.default_rng(5)
    a = random_rows(rng, 12) * np.ldexp(1.0, -rng.integers(0, 80, (12, 12)))  # many binary exponents
    lsb = int(dyadic(a[a > 0])[2].min())
    tok, step = np.nonzero(np.tril(a).T > 0)
    kernel = pricing.column_prefix
    if not compiled:
        pricing.column_prefix = pricing.column_prefix.py_func
    try:
        got = pricing.exact_prefix(a, lsb, 8, tok, step).to_objects()
    finally:
        pricing.column_prefix = kernel
    want = [sum((Fraction(float(a[s, i])) for s in range(i, t + 1)), Fraction(0)) / Fraction(2) ** lsb
            for i, t in zip(tok, step)]
    assert [Fraction(int(x)) for x in got] == want


def test_the_pricing_kernel_runs_the_same_plain():
    """:func:`price_head` compiled and as plain Python: the same candidates, counts, margin and bound term."""
    from kvcore.optima import pricing

    rng = np.random.default_rng(9)
    a = random_rows(rng, 15)
    line = np.cumsum(rng.random(16) * 0.05)[::-1].copy()
    item, none = line[:15] - 0.2, np.zeros(0, np.int64)
    fast = pricing.price_head(a, (none, none), line, item, 2, None)
    kernel = pricing.price_rows
    pricing.price_rows = pricing.price_rows.py_func
    try:
        plain = pricing.price_head(a, (none, none), line, item, 2, None)
    finally:
        pricing.price_rows = kernel
    assert fast.token.size > 0 and np.array_equal(fast.token, plain.token) and np.array_equal(fast.step, plain.step)
    assert (fast.omitted, fast.margin, fast.bound_term) == (plain.omitted, plain.margin, plain.bound_term)
