"""The Lagrangian dual of the NM optima and its maximisation (:mod:`kvcore.optima.lagrangian`), against the exact
solvers on small random row sets.

* any slot prices -- random ones, negative ones, a truncated solve's, every point the ascent visits -- give a value
  at most the exact optimum: the coupled flow on every exit (:func:`kvcore.optima.coupled.coupled_curve`), the best
  static split of the exact regret curves (:func:`kvcore.optima.allocation.dp_allocation`), the per-head ``nm_opt``;
* the climbed bound is at least the bound at the prices it starts from, and at most the optimum; from a truncated
  solve's prices it closes part of the gap the start leaves (instances where it must) -- per head, coupled, and the
  static split's bound built from per-head duals (:func:`static_bound`);
* a dual with a sign error in the tokens' terms is caught by the same check;
* ``quality OPT --opt-top`` reports the climbed bound: on random complete rows between the truncated solve's own
  bound and the exact optimum.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.optima import lagrangian, nm_opt
from kvcore.optima.allocation import RegretCurve, dp_allocation
from kvcore.optima.capacity_curve import entries_of, optimum_curve
from kvcore.optima.coupled import coupled_curve
from kvcore.optima.lagrangian import dual_value, lagrangian_bound, maximise_dual, static_bound
from kvcore.optima.priced import priced_optimum
from kvcore.optima.pricing import BestExits
from tests.test_priced import as_trace, instance, truncated_head, truncated_trace

SLACK = 1e-12  # the exact optima are Fractions, the duals doubles with their own rounding allowance subtracted


def exact_optimum(rows: list[np.ndarray], B: int, kind: str) -> float:
    """The ``kind`` optimum by an independent exact solver (module docstring)."""
    traces = [as_trace(a) for a in rows]
    if kind == "coupled":
        return float(coupled_curve(traces, [B])[0].exact_regret)
    T = rows[0].shape[0]
    curves = [RegretCurve(tr) for tr in traces]
    return float(dp_allocation([lambda k, c=c: c(min(k, T)) for c in curves], B)[0])


def random_potentials(rng: np.random.Generator, lines: int, T: int, signed: bool) -> np.ndarray:
    """Line potentials whose slot prices are random (some negative with ``signed``), at the scale of the rows."""
    lam = rng.random((lines, T)) * 0.5 * rng.random()
    if signed:
        lam -= 0.1 * rng.random((lines, T))
    return np.concatenate([np.zeros((lines, 1)), -np.cumsum(lam, axis=1)], axis=1)


@given(st.integers(0, 2**32 - 1), st.sampled_from(["coupled", "static"]), st.booleans())
def test_any_prices_bound_the_exact_optimum(seed, kind, signed):
    rows, H, T, B = instance(seed)
    if kind == "static":
        B = min(B, H * T)
    rng = np.random.default_rng(seed)
    pot = random_potentials(rng, 1 if kind == "coupled" else H, T, signed)
    exact = exact_optimum(rows, B, kind)
    value, _ = dual_value(lambda h: rows[h], H, pot, B, kind)
    assert value <= exact + SLACK


@given(st.integers(0, 2**32 - 1), st.sampled_from(["coupled", "static"]))
def test_every_point_the_ascent_visits_is_a_lower_bound_and_the_best_is_kept(seed, kind):
    rows, H, T, B = instance(seed)
    if kind == "static":
        B = min(B, H * T)
    rng = np.random.default_rng(seed)
    pot = random_potentials(rng, 1 if kind == "coupled" else H, T, signed=True)
    exact = exact_optimum(rows, B, kind)
    seen = []
    plain = lagrangian.dual_value

    def recording(*args):
        value, d = plain(*args)
        seen.append(value)
        return value, d

    with pytest.MonkeyPatch.context() as m:
        m.setattr(lagrangian, "dual_value", recording)
        got = maximise_dual(lambda h: rows[h], H, pot, B, kind, upper=exact + 0.5, evaluations=20)
    assert len(seen) == got.evaluations and got.start == seen[0]
    assert max(seen) <= exact + SLACK
    assert got.bound == max(seen) >= got.start == dual_value(lambda h: rows[h], H, pot, B, kind)[0]
    assert dual_value(lambda h: rows[h], H, got.line_potentials, B, kind)[0] == got.bound


@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_the_climbed_bound_from_a_truncated_solve_lies_between_its_start_and_the_optimum(seed, top):
    """One head (``OPT``): from the line potentials of the optimum on the truncated rows, the climbed bound is at
    least the bound there (the old report) and at most the complete rows' optimum."""
    a, k, exact, cut = truncated_head(seed, top, 14)
    old = lagrangian_bound([a], cut.line_potentials, k)
    got = maximise_dual(lambda h: a, 1, cut.line_potentials, k, "coupled", upper=exact + 1.0)
    assert old <= got.bound <= exact + SLACK


def test_the_ascent_closes_most_of_a_gap_it_must_close():
    """Rows on which the top-1 solve's prices are far from optimal (tokens keep long tails of small entries, which
    the truncated rows do not see): the climbed bound closes at least half of the gap the starting prices leave."""
    rng = np.random.default_rng(3)
    T, k = 40, 4
    a = np.tril(rng.random((T, T)) ** 8 + 0.02)
    a /= a.sum(axis=1, keepdims=True)
    exact = nm_opt(as_trace(a), k).cost
    (cut,) = optimum_curve(entries_of([truncated_trace(a, 1)]), [k])
    got = maximise_dual(lambda h: a, 1, cut.line_potentials, k, "coupled", upper=exact * 1.05)
    assert got.start < exact - 0.5  # a real gap to close
    assert exact - got.bound <= 0.5 * (exact - got.start)
    assert got.bound <= exact + SLACK


def skewed_heads(seed: int, H: int = 3, T: int = 30) -> list[np.ndarray]:
    """Heads whose rows are ever flatter (long tails of small entries the top-1 rows do not see)."""
    rng = np.random.default_rng(seed)
    rows = []
    for h in range(H):
        a = np.tril(rng.random((T, T)) ** (4 + 4 * h) + 0.02 * (h + 1))
        rows.append(a / a.sum(axis=1, keepdims=True))
    return rows


@given(st.integers(0, 2**32 - 1), st.integers(1, 2))
def test_the_static_bound_lies_below_the_optimum(seed, top):
    """:func:`static_bound` from a truncated static solve (its split, per-head regrets and prices) is at most the
    best static split of the exact regret curves; the priced solve reports at least its unclimbed bound."""
    rows, H, T, B = instance(seed)
    B = min(B, H * T)
    one = priced_optimum(lambda h: rows[h], H, T, B, "static", top=top, max_rounds=1, dual_evaluations=1, start="top")
    pot = np.array([[float(x) for x in line] for line in one.line_potentials])
    exact = exact_optimum(rows, B, "static")
    bound, n = static_bound(lambda h: rows[h], pot, B, one.slots, one.per_head, 10)
    assert bound <= exact + SLACK and n >= H
    got = priced_optimum(lambda h: rows[h], H, T, B, "static", top=top, max_rounds=1, start="top")
    assert one.certificate.lower_bound <= got.certificate.lower_bound <= exact + SLACK


@pytest.mark.parametrize("kind", ["coupled", "static"])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_truncated_priced_solve_reports_the_climbed_bound(kind, seed):
    """Three heads of 30 steps, 4 slots each, solved once on the top-1 exits: the bound reported after the climb
    is at most the exact optimum and closes at least half of the gap the solve's own prices leave."""
    rows = skewed_heads(seed)
    H, T, B = len(rows), rows[0].shape[0], 12
    one = priced_optimum(lambda h: rows[h], H, T, B, kind, top=1, max_rounds=1, dual_evaluations=1, start="top")
    got = priced_optimum(lambda h: rows[h], H, T, B, kind, top=1, max_rounds=1, start="top")
    exact = exact_optimum(rows, B, kind)
    start, climbed = one.certificate.lower_bound, got.certificate.lower_bound
    assert start < exact - 1.0 and not got.certificate.certified and got.certificate.dual_evaluations > 1
    assert climbed <= exact + SLACK
    assert exact - climbed <= 0.5 * (exact - start)


def test_a_dual_with_a_sign_error_is_caught(monkeypatch):
    """The tokens' terms added with the wrong sign (``+ max(0, ...)``, each token credited its best interval
    instead of charged): the same check as :func:`test_any_prices_bound_the_exact_optimum` finds values above
    the optimum."""
    plain = lagrangian.best_exits

    def wrong_sign(a, line_pot):
        got = plain(a, line_pot)
        return BestExits(-got.term, got.step, got.total, got.slack)

    monkeypatch.setattr(lagrangian, "best_exits", wrong_sign)
    above = 0
    for seed in range(20):
        rows, H, T, B = instance(seed)
        pot = random_potentials(np.random.default_rng(seed), 1, T, signed=False)
        above += dual_value(lambda h: rows[h], H, pot, B, "coupled")[0] > exact_optimum(rows, B, "coupled") + SLACK
    assert above > 0


def test_quality_opt_top_reports_the_climbed_bound():
    """:func:`realtrace.quality.exact.lazy_optima` with ``top``: its lower bound is at least the truncated solve's
    own Lagrangian bound, at most the complete rows' optimum, and the schedule's complete cost is at least it."""
    torch = pytest.importorskip("torch")
    from realtrace.quality.exact import lazy_optima

    rng = np.random.default_rng(11)
    T = 30
    a = np.tril(rng.random((T, T)) ** 6 + 0.01)
    a /= a.sum(axis=1, keepdims=True)
    rows = torch.from_numpy(a)
    for (drop, lower, cost), k in zip(lazy_optima(rows, (3, 8), top=2), (3, 8)):
        exact = nm_opt(as_trace(a), k).cost
        (cut,) = optimum_curve(entries_of([truncated_trace(a, 2)]), [k])
        assert lagrangian_bound([a], cut.line_potentials, k) < lower <= exact + SLACK <= cost + 2 * SLACK
