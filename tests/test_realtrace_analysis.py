"""Analyses of realtrace on the committed real trace set (no torch needed), each against a plain brute-force
recomputation from the dense matrix of a prefix, plus hand-worked traces with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvcore.errors import ParameterError, TraceError
from kvcore.trace_files import load_trace
from kvcore.traces import ROW_SUM_TOL, AttentionTrace
from realtrace import COMMITTED, load_default_traces, load_traceset
from realtrace import analysis as an
from realtrace.experiments import block_requests, block_trace, section11_windows

PREFIX = 160


@pytest.fixture(scope="module")
def traceset():
    return load_traceset(COMMITTED)


@pytest.fixture(scope="module")
def dense_prefixes(traceset):
    """Two traces of different character (diffuse layer 0, sink-heavy layer 19) as dense prefix matrices."""
    return {n: traceset.traces[n].prefix(PREFIX) for n in ("L00_kv1", "L19_kv2")}


# -- the committed data --------------------------------------------------------------------------------------------


def test_committed_set_is_real_and_complete(traceset):
    assert len(traceset.traces) == 12 and traceset.T == 617
    assert sorted(set(traceset.layers.values())) == [0, 9, 19, 29]
    assert traceset.meta["model"]["kv_heads"] == 3
    # segments tile the token range in prompt order
    spans = sorted(traceset.segments.values())
    assert spans[0][0] == 0 and spans[-1][1] == traceset.T
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert len(traceset.meta["tokens"]) == traceset.T


def test_rows_sum_to_one_including_residual(traceset):
    for name, tr in traceset.traces.items():
        sums = np.bincount(np.repeat(np.arange(tr.T), np.diff(tr.indptr)), weights=tr.weights, minlength=tr.T)
        assert np.abs(sums + tr.residual - 1.0).max() <= ROW_SUM_TOL, name
        assert (np.diff(tr.indptr) <= traceset.meta["capture"]["top"]).all()
        # a row keeps its largest entries: nothing unstored can exceed the smallest stored weight, so the residual
        # is at most (row length - stored) * min stored weight
        for t in (5, 100, tr.T - 1):
            idx, w = tr.row(t)
            assert tr.residual[t] <= (t + 1 - idx.size) * w.min() + 1e-12


def test_each_file_loads_with_the_toolkit_loader(traceset):
    for name in traceset.names():
        tr = load_trace(COMMITTED / f"{name}.npz")
        assert isinstance(tr, AttentionTrace) and np.array_equal(tr.weights, traceset.traces[name].weights)


def test_default_traces_say_when_they_fall_back():
    ts, note = load_default_traces()
    assert ts.T == 617 and note.startswith("FALLBACK: committed trace set")


def test_broken_manifest_is_one_line_error(tmp_path, traceset):
    (tmp_path / "manifest.json").write_text('{"format": "kvtrace-set/1", "T": 617, "traces": {"x": '
                                            '{"file": "missing.npz", "layer": 0, "head": "kv0"}}}')
    with pytest.raises(TraceError, match="missing.npz: no such file"):
        load_traceset(tmp_path)
    with pytest.raises(TraceError, match="not a trace set"):
        load_traceset(tmp_path / "nothing")


# -- brute force on prefixes ----------------------------------------------------------------------------------------


def _brute_lookback(a: np.ndarray, tau: float, rho: float) -> list[float]:
    out = []
    T = a.shape[0]
    for t in range(T):
        for i in range(t):
            if a[t, i] >= tau:
                prev = [s for s in range(i, t) if a[s, i] >= rho * tau]
                out.append(t - max(prev) if prev else math.inf)
    return out


@pytest.mark.parametrize("name", ["L00_kv1", "L19_kv2"])
def test_sink_heavy_tail_match_brute_force(dense_prefixes, name):
    tr = dense_prefixes[name]
    a = tr.to_dense()
    assert np.allclose(an.sink_mass(tr, 4), a[:, :4].sum(axis=1))
    for tau in (0.01, 0.05, 0.2):
        assert np.array_equal(an.heavy_set_sizes(tr, tau), (a >= tau).sum(axis=1))
        assert np.allclose(an.tail_mass(tr, tau), np.where(a < tau, a, 0).sum(axis=1))


@pytest.mark.parametrize("name", ["L00_kv1", "L19_kv2"])
def test_persistence_matches_brute_force(dense_prefixes, name):
    tr = dense_prefixes[name]
    a = tr.to_dense()
    tau, rho = 0.05, 0.5
    back = np.array(_brute_lookback(a, tau, rho))
    _, _, got = an.heavy_lookback(tr, tau, rho)
    assert np.array_equal(np.sort(got), np.sort(back))
    for W in (1, 4, 32):
        frac, n = an.persistence_fraction(tr, tau, rho, W)
        assert n == back.size and frac == pytest.approx(np.mean(back <= W))
    # smallest window reaching a fraction q: check minimality directly
    for q in (0.5, 0.9):
        W = an.persistence_window(tr, tau, rho, q)
        assert np.mean(back <= W) >= q and (W == 1 or np.mean(back <= W - 1) < q)
    # rho at a window: brute-force max over the window of earlier weights, then the quantile
    W = 8
    m = []
    for t in range(a.shape[0]):
        for i in range(t):
            if a[t, i] >= tau:
                m.append(max([a[s, i] for s in range(max(i, t - W), t)], default=0.0) / tau)
    m = np.sort(m)[::-1]
    for q in (0.5, 1.0):
        assert an.persistence_rho(tr, tau, W, q) == pytest.approx(m[math.ceil(q * m.size) - 1])
        rho_q = an.persistence_rho(tr, tau, W, q)
        if 0 < rho_q <= 1:  # at that rho the window holds for the fraction q
            assert an.persistence_fraction(tr, tau, rho_q, W)[0] >= q - 1e-12


@pytest.mark.parametrize("name", ["L00_kv1", "L19_kv2"])
def test_union_and_threshold_recipe_match_brute_force(dense_prefixes, name):
    tr = dense_prefixes[name]
    a = tr.to_dense()
    rho, W, k = 0.5, 16, 24
    level = 0.02
    brute = [len({i for s in range(max(0, t - W), t) for i in np.flatnonzero(a[s] >= level)}) for t in range(tr.T)]
    assert np.array_equal(an.heavy_union_sizes(tr, level, W), brute)
    rec = an.best_threshold(tr, k, rho, W)

    def max_union(tau):
        return max(len({i for s in range(max(0, t - W), t) for i in np.flatnonzero(a[s] >= rho * tau)})
                   for t in range(tr.T))

    assert rec.max_union == max_union(rec.tau_star) <= k - 1
    # minimality: every stored weight below x* gives a union that does not fit
    smaller = np.unique(a[(a > 0) & (a < rho * rec.tau_star * (1 - 1e-12))])
    if smaller.size:
        assert max_union(smaller[-1] / rho) > k - 1
    assert rec.tail_stored == pytest.approx(a[a < rec.tau_star].sum())


def test_schedule_regret_matches_engine(dense_prefixes):
    from kvcore.engine import run_nm
    from policies import make

    tr = dense_prefixes["L19_kv2"]
    res = run_nm(make("LRU"), tr, 20, record=True)
    assert np.allclose(an.regret_per_step_of_schedule(tr, res.evictions), res.per_step)


def test_block_trace_and_requests(dense_prefixes):
    tr = dense_prefixes["L00_kv1"]
    a = tr.to_dense()
    btr = block_trace(tr, 16)
    blocks = np.add.reduceat(a, np.arange(0, tr.T, 16), axis=1)
    assert np.allclose(btr.to_dense()[:, :blocks.shape[1]], blocks)
    req = block_requests(btr, 0.05, 16)
    for t in (0, 17, 100, tr.T - 1):
        items, costs = req.step(t)
        assert items[0] == t // 16 and costs[0] == 0.0
        want = {b for b in np.flatnonzero(blocks[t] >= 0.05) if b != t // 16}
        assert set(items[1:].tolist()) == want and (costs[1:] == 1.0).all()


def test_section11_windows_follow_segments(traceset):
    benign, suffix, sleeper = section11_windows(traceset)
    seg = traceset.segments
    assert suffix == range(seg["question"][0], seg["continuation"][1])
    assert benign.stop == seg["passage"][1] and len(benign) == len(suffix)
    assert sleeper == range(*seg["code"])


# -- hand-worked traces ----------------------------------------------------------------------------------------------


def test_parameters_are_checked():
    tr = AttentionTrace.from_rows([{0: 1.0}, {0: 0.5, 1: 0.5}])
    with pytest.raises(ParameterError, match="rho"):
        an.heavy_lookback(tr, 0.1, 0.0)
    with pytest.raises(ParameterError, match="W = 0"):
        an.persistence_fraction(tr, 0.1, 0.5, 0)
    with pytest.raises(ParameterError, match="k = 1"):
        an.best_threshold(tr, 1, 0.5, 2)


def test_theorem4_counterexample_in_nm():
    """Persistence holds at every heavy earlier-token entry and the union fits in k - 1 = 2, yet R-LRU-H loses 0.9
    while the tail mass below tau = 0.5 is 0.4: token 0 was dropped at step 3 (outside the union, least recent),
    then became persistent through a sub-threshold entry (0.4 >= rho*tau at step 4) that no policy can undo in NM.
    The optimum keeps token 0 and loses nothing."""
    tr = AttentionTrace.from_rows([{0: 1.0}, {1: 1.0}, {2: 1.0}, {3: 1.0}, {0: 0.4, 4: 0.6}, {0: 0.5, 5: 0.5}])
    from adversary.persistence import heavy_union_size, persistence_holds

    check = an.theorem4_check(tr, 3, 0.5, 1, tau=0.5)
    assert check.premise_holds
    # the premise also holds in the paper's own convention (union over [t-W, t] fitting k)
    assert persistence_holds(tr, 0.5, 1, 0.5) and heavy_union_size(tr, 0.5, 1, 0.5) <= 3
    assert check.recipe.tail_stored == pytest.approx(0.4)
    assert check.rlruh_regret == pytest.approx(0.9)
    assert not check.bound_holds
    assert check.opt_regret == pytest.approx(0.0)


# -- replay against the exact optimum (kvcore.optima.nm_opt) ---------------------------------------------------------


def test_replay_gaps_are_nonnegative_and_opt_schedule_reproduces_its_cost(dense_prefixes):
    tr = dense_prefixes["L19_kv2"]
    rows, opt_steps, opt = an.replay_all(tr, 16, seeds=2)
    assert {r.policy for r in rows} >= {"LRU", "R-LRU-H"}
    assert opt_steps.sum() == pytest.approx(opt, abs=1e-9)
    for r in rows:
        assert r.tracking_gap >= -1e-7, r.policy  # nothing beats the exact optimum
        assert r.per_step.sum() == pytest.approx(r.regret)


def test_section11_window_regret_matches_engine(traceset):
    from kvcore.engine import run_nm
    from policies import make
    from realtrace.experiments import resolve_policy, section11

    tr = traceset.traces["L09_kv1"]
    benign, suffix, sleeper = section11_windows(traceset)
    res = section11(tr, [48], benign, suffix, sleeper, policies=(("LRU",),))
    per_step = run_nm(make("LRU"), tr, 48, record=True).per_step
    got = {(r.policy, r.window): r for r in res}
    assert got["LRU", "benign"].regret_per_step == pytest.approx(per_step[benign.start:benign.stop].mean())
    assert got["LRU", "suffix"].regret_per_step == pytest.approx(per_step[suffix.start:suffix.stop].mean())
    assert got["OPT", "suffix"].gap_per_step == 0.0
    assert 0.0 <= got["LRU", "suffix"].sleeper_kept <= 1.0
    assert resolve_policy(("no-such-policy",)) is None


def test_report_runs_on_a_small_set_and_reports_its_source(traceset):
    from realtrace.report import format_report, real_trace_report
    from realtrace.traceset import TraceSet

    T = 260
    names = ["L09_kv1", "L29_kv0"]
    small = TraceSet({n: traceset.traces[n].prefix(T) for n in names}, {n: traceset.layers[n] for n in names},
                     {n: traceset.heads[n] for n in names},
                     {"key": (0, 8), "code": (8, 20), "passage": (20, 230), "question": (230, 245),
                      "continuation": (245, T)}, {}, "<prefix>")
    rep = real_trace_report(small, "FALLBACK: test", budgets=(24,), seeds=2)
    text = format_report(rep)
    assert text.startswith("Real attention traces: FALLBACK: test")
    for n in names:
        thm = rep["traces"][n]["budgets"][24]["theorem4"]
        rec = an.best_threshold(small.traces[n], 24, 0.5, 32)
        assert thm["tau_star"] == rec.tau_star and thm["tail_stored"] == pytest.approx(rec.tail_stored)
        assert f"{n:8s} k=24" in text


def test_persistence_agrees_with_adversary_module(dense_prefixes):
    from adversary.persistence import persistence_violations

    for tr in dense_prefixes.values():
        for W in (1, 8):
            frac, n = an.persistence_fraction(tr, 0.05, 0.5, W)
            assert round((1 - frac) * n) == len(persistence_violations(tr, 0.5, W, 0.05))
