"""Every exact-optimum backend on tiny, huge and mixed costs (issue 23), against independent references.

Backends: the three min-cost-flow solvers of :mod:`kvcore.optima.mincost` (``netsimplex``, ``highs``,
``networkx``) and the dispatcher :func:`kvcore.optima.optimum` (Belady on unit single-request traces, otherwise the
default solver).  Cost regimes, each a multiple ``k = 0..16`` of a power of two so that every sum of a few dozen of
them is exact in floating point and the references compare with ``==``:

* ``tiny``   ``k * 2**-30`` (about 1e-9);
* ``huge``   ``k * 2**30`` (about 1e9; RM only: an attention row sums to 1);
* ``mixed``  ``k * 2**e`` with ``e`` drawn per request from a range of 40 binary orders (12 decimal orders).

References: the exhaustive DPs :func:`kvcore.optima.brute_rm` / :func:`~kvcore.optima.brute_nm` on small instances,
Belady's fault count times the common cost on unit-cost traces scaled to tiny and huge costs, and the backends against
each other on instances beyond the DPs' reach.

The HiGHS backend hands HiGHS its costs scaled into ``[-1, 1]`` because HiGHS' tolerances are absolute (about 1e-7):
costs of 1e-9 handed over as they are look all equal to zero, HiGHS stops at a non-optimal vertex, the exact
certificate fails and the exact network simplex silently redoes the work (``solver == "highs+netsimplex"``), so the
cost alone cannot tell whether the scaling works.  When all costs lie within a factor 16 of each other (``tiny``,
``huge``) the scaled problem is well inside HiGHS' tolerances, so HiGHS' own answer must be certified:
``solver == "highs"``.  Mixed costs may legitimately need the fallback (1e-12 of the largest cost is below the
tolerance), so there only the cost is checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.optima import belady, brute_nm, brute_rm, mincost, nm_opt, optimum, rm_opt
from kvcore.traces import AttentionTrace, PagingTrace

BACKENDS = (*mincost.SOLVERS, "dispatcher")
SCALE_BITS = 30  # tiny = 2**-30 ~ 9.3e-10, huge = 2**30 ~ 1.07e9
MIXED_BITS = 40  # 2**40 ~ 1.1e12: twelve decimal orders of magnitude
REGIMES = {
    "tiny": st.just(-SCALE_BITS),
    "huge": st.just(SCALE_BITS),
    "mixed": st.integers(-MIXED_BITS // 2, MIXED_BITS // 2),
}
SELF_CERTIFYING = ("tiny", "huge")  # every cost within a factor 16 of the largest: HiGHS must certify its own vertex


def run_rm(trace: PagingTrace, h: int, backend: str):
    return optimum(trace, h, model="rm") if backend == "dispatcher" else rm_opt(trace, h, solver=backend)


def run_nm(trace: AttentionTrace, h: int, backend: str):
    return optimum(trace, h, model="nm") if backend == "dispatcher" else nm_opt(trace, h, solver=backend)


def check_backend(res, backend: str, regime: str) -> None:
    """Certified, and HiGHS certified by itself where its tolerances allow it (module docstring)."""
    assert res.certified
    if backend == "highs" and regime in SELF_CERTIFYING:
        assert res.solver == "highs", "HiGHS' answer was not certified: its cost scaling is not working"


@st.composite
def paging_instances(draw, regime: str, max_steps=10, max_items=6):
    """Up to two requests per step over a few more items than fit; costs ``k * 2**e`` with ``e`` from ``regime``."""
    T = draw(st.integers(1, max_steps))
    n = draw(st.integers(2, max_items))
    steps = [draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2, unique=True)) for _ in range(T)]
    exponent = REGIMES[regime]
    costs = [[draw(st.integers(0, 16)) * 2.0 ** draw(exponent) for _ in q] for q in steps]
    widest = max(len(q) for q in steps)
    return PagingTrace.from_steps(steps, costs), draw(st.integers(widest, widest + 1))


def with_residual(rows: list[dict[int, float]]) -> AttentionTrace:
    """The rows as stored entries, each row's remaining mass (exact: the entries are dyadic) as its residual."""
    sorted_rows = [sorted(r.items()) for r in rows]
    return AttentionTrace(np.cumsum([0] + [len(r) for r in sorted_rows]),
                          np.array([i for r in sorted_rows for i, _ in r], dtype=np.int64),
                          np.array([x for r in sorted_rows for _, x in r]),
                          np.array([1.0 - sum(x for _, x in r) for r in sorted_rows]))


@st.composite
def attention_instances(draw, regime: str, max_steps=7):
    """Rows of at most three stored entries ``k * 2**e`` (``e <= -6``, so a row's entries sum to at most 3/4); the
    rest of each row is unstored residual.  ``regime`` shifts ``e`` down to about 1e-9 (tiny) or spreads it over 40
    binary orders (mixed)."""
    T = draw(st.integers(1, max_steps))
    shift = SCALE_BITS if regime == "tiny" else 0
    exponent = st.integers(-6 - MIXED_BITS, -6) if regime == "mixed" else st.just(-6 - shift)
    rows = []
    for t in range(T):
        tokens = draw(st.lists(st.integers(0, t), min_size=1, max_size=3, unique=True))
        rows.append({i: draw(st.integers(1, 16)) * 2.0 ** draw(exponent) for i in tokens})
    return with_residual(rows), draw(st.integers(1, 3))


# -- small instances: the exhaustive DPs ---------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("regime", list(REGIMES))
@given(data=st.data())
def test_rm_backends_equal_brute_force(backend, regime, data):
    trace, h = data.draw(paging_instances(regime))
    res = run_rm(trace, h, backend)
    assert res.cost == brute_rm(trace, h).cost
    check_backend(res, backend, regime)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("regime", ["tiny", "mixed"])
@given(data=st.data())
def test_nm_backends_equal_brute_force(backend, regime, data):
    trace, h = data.draw(attention_instances(regime))
    res = run_nm(trace, h, backend)
    assert res.cost == brute_nm(trace, h).cost
    check_backend(res, backend, regime)


# -- unit costs scaled: Belady -------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [1e-9, 2.0 ** -SCALE_BITS, 1e9, 2.0 ** SCALE_BITS])
def test_uniform_tiny_and_huge_costs_equal_belady(backend, scale):
    """300 requests over 40 items, cache of 8: beyond the DP's reach.  Every request costs ``scale``, so the optimum
    is ``scale`` times Belady's fault count (fsum of equal doubles: the correctly rounded product)."""
    items = np.random.default_rng(5).zipf(1.3, size=300) % 40
    h = 8
    unit = belady(PagingTrace.unit(items), h)
    res = run_rm(PagingTrace(items, np.full(items.size, scale), None), h, backend)
    assert res.misses == unit.misses and res.cost == scale * unit.cost
    check_backend(res, backend, "tiny" if scale < 1 else "huge")


# -- medium instances: the backends against each other -------------------------------------------------------------

def medium_paging(regime: str, seed: int) -> PagingTrace:
    rng = np.random.default_rng(seed)
    steps = [rng.choice(30, size=rng.integers(1, 4), replace=False).tolist() for _ in range(300)]
    low, high = {"tiny": (-SCALE_BITS, -SCALE_BITS), "huge": (SCALE_BITS, SCALE_BITS),
                 "mixed": (-MIXED_BITS // 2, MIXED_BITS // 2)}[regime]
    costs = [(rng.integers(1, 17, size=len(q)) * np.exp2(rng.integers(low, high + 1, size=len(q)))).tolist()
             for q in steps]
    return PagingTrace.from_steps(steps, costs)


@pytest.mark.parametrize("regime", list(REGIMES))
def test_rm_backends_agree_beyond_brute_force(regime):
    trace = medium_paging(regime, seed=7)
    results = {b: run_rm(trace, 8, b) for b in BACKENDS}
    assert len({r.cost for r in results.values()}) == 1, {b: r.cost for b, r in results.items()}
    for backend, res in results.items():
        check_backend(res, backend, regime)


def medium_attention(regime: str, seed: int) -> AttentionTrace:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(120):
        tokens = rng.choice(t + 1, size=min(t + 1, 3), replace=False)
        exponent = rng.integers(-6 - MIXED_BITS, -5, size=tokens.size) if regime == "mixed" else \
            np.full(tokens.size, -6 - SCALE_BITS)
        rows.append(dict(zip(tokens.tolist(), (rng.integers(1, 17, size=tokens.size) * np.exp2(exponent)).tolist())))
    return with_residual(rows)


@pytest.mark.parametrize("regime", ["tiny", "mixed"])
def test_nm_backends_agree_beyond_brute_force(regime):
    trace = medium_attention(regime, seed=11)
    results = {b: run_nm(trace, 6, b) for b in BACKENDS}
    assert len({r.cost for r in results.values()}) == 1, {b: r.cost for b, r in results.items()}
    assert next(iter(results.values())).cost > 0  # capacity binds: the instance has something to decide
    for backend, res in results.items():
        check_backend(res, backend, regime)
