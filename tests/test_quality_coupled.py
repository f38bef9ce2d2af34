"""The coupled side of the quality command (issue 31): the coupled lazy schedule, the coupled optimum's schedule,
the threshold allocation, and ``OPT:static`` / ``OPT:coupled`` on a reference of random rows (no model).

Every property is checked against an independent reference: :func:`lazy_drop` for one cache, the flow's own cost
and :func:`kvcore.optima.coupled.brute_coupled` for the coupled schedule, :func:`greedy_allocation` for the
threshold allocation, the per-head optimum (``OPT``) for the static one."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.measure import schedule_regret
from kvcore.optima import nm_opt
from kvcore.optima.allocation import (RegretCurve, allocation_regret, greedy_allocation, threshold_allocation,
                                      uniform_allocation)
from kvcore.optima.coupled import brute_coupled, coupled_nm_opt, coupled_schedule
from kvcore.traces import AttentionTrace
from realtrace.quality.schedule import (ScheduleError, coupled_lazy_drop, evictions_from_drop, lazy_drop,
                                        resident_counts, resident_mask)


def random_rows(rng: np.random.Generator, T: int) -> np.ndarray:
    """``(T, T)`` causal rows, each a softmax of random scores (sparse-ish: Dirichlet 0.3)."""
    a = np.zeros((T, T))
    for t in range(T):
        a[t, :t + 1] = rng.dirichlet(np.full(t + 1, 0.3))
    return a


def as_trace(a: np.ndarray, source: str = "rows") -> AttentionTrace:
    T = a.shape[0]
    idx = [np.arange(t + 1) for t in range(T)]
    return AttentionTrace(np.concatenate([[0], np.cumsum([t + 1 for t in range(T)])]), np.concatenate(idx),
                          np.concatenate([a[t, :t + 1] for t in range(T)]), np.zeros(T), source)


def cost(a: np.ndarray, drop: np.ndarray) -> float:
    """Eq. 4 on dense rows: the mass of every position outside the resident set, summed over steps."""
    T = a.shape[0]
    return float(np.where(~resident_mask(drop) & np.tri(T, dtype=bool), a, 0.0).sum())


@st.composite
def coupled_schedules(draw):
    """``(drops (N, T), budget)``: any N valid drop vectors and a shared budget at least their peak total."""
    n, T = draw(st.integers(1, 4)), draw(st.integers(1, 9))
    drops = np.array([[draw(st.integers(i, T)) for i in range(T)] for _ in range(n)], dtype=np.int64)
    peak = int(sum(resident_counts(d) for d in drops).max())
    return drops, draw(st.integers(max(peak, 1), max(peak, 1) + 2 * n))


@given(coupled_schedules(), st.integers(0, 2**32 - 1))
def test_coupled_lazy_fills_the_shared_budget_and_keeps_a_superset(case, seed):
    """The lazy sets hold min(N (t + 1), B) positions in total at every step (so never more than B), contain every
    given set (the docstring's induction), drop nothing earlier, and so cost at most the given schedule on any rows,
    cache by cache."""
    drops, budget = case
    n, T = drops.shape
    lazy = coupled_lazy_drop(drops, budget)
    total = sum(resident_counts(d) for d in lazy)
    assert np.array_equal(total, np.minimum(n * (np.arange(T) + 1), budget))
    rng = np.random.default_rng(seed)
    for given_drop, lazy_drop_h in zip(drops, lazy):
        assert not (resident_mask(given_drop) & ~resident_mask(lazy_drop_h)).any()
        assert (lazy_drop_h >= given_drop).all()
        a = random_rows(rng, T)
        assert cost(a, lazy_drop_h) <= cost(a, given_drop) + 1e-12


@given(st.integers(1, 10).flatmap(lambda T: st.lists(st.integers(0, T), min_size=T, max_size=T)), st.integers(0, 2))
def test_one_cache_is_lazy_drop(raw, extra):
    """For one cache the shared budget is that cache's: the coupled lazy form is :func:`lazy_drop`, tie rule
    included."""
    drop = np.maximum(np.array(raw, dtype=np.int64), np.arange(len(raw)))
    k = int(resident_counts(drop).max(initial=0)) + extra
    if k >= 1:
        assert np.array_equal(coupled_lazy_drop(drop[None], k)[0], lazy_drop(drop, k))


def test_coupled_lazy_refuses_a_schedule_over_the_shared_budget():
    drops = np.array([[3, 3, 3], [3, 3, 3]])  # 2, 4, 6 resident in total
    with pytest.raises(ScheduleError, match="6 positions resident in total at step 2, more than the shared budget 5"):
        coupled_lazy_drop(drops, 5)


@pytest.mark.parametrize("seed", range(6))
def test_the_coupled_schedule_is_the_flow_optimum_and_its_lazy_form_too(seed):
    """The coupled flow's schedule holds at most B in total, costs exactly the certified optimum (which equals the
    brute-force optimum over joint resident sets on 5 steps), and its coupled lazy form costs the same."""
    rng = np.random.default_rng(seed)
    T, budget = 5, int(rng.integers(1, 6))
    rows = [random_rows(rng, T) for _ in range(2)]
    traces = [as_trace(a, f"h{h}") for h, a in enumerate(rows)]
    drops, res = coupled_schedule(traces, budget)
    assert res.regret == pytest.approx(coupled_nm_opt(traces, budget).regret, abs=1e-12)
    assert res.regret == pytest.approx(brute_coupled(traces, budget), abs=1e-12)
    assert sum(resident_counts(d) for d in drops).max() <= budget
    assert sum(cost(a, d) for a, d in zip(rows, drops)) == pytest.approx(res.regret, abs=1e-12)
    lazy = coupled_lazy_drop(drops, budget)
    assert sum(cost(a, d) for a, d in zip(rows, lazy)) == pytest.approx(res.regret, abs=1e-12)


@st.composite
def convex_curves(draw):
    """Curves OPT(0..L) with non-increasing integer decreases (ties likely), a budget and the slot limit L."""
    n, L = draw(st.integers(1, 6)), draw(st.integers(1, 12))
    curves = []
    for _ in range(n):
        d = sorted(draw(st.lists(st.integers(0, 4), min_size=L, max_size=L)), reverse=True)
        vals = [Fraction(sum(d))]
        for x in d:
            vals.append(vals[-1] - x)
        curves.append(lambda k, v=vals: v[min(k, len(v) - 1)])
    return curves, draw(st.integers(0, n * L)), L, draw(st.integers(0, 8))


@given(convex_curves())
def test_threshold_allocation_collects_what_greedy_collects(case):
    """On convex curves the threshold allocation spends exactly the budget within the limit and reaches greedy's
    (exact) summed regret, whatever the number of bisection rounds."""
    curves, total, limit, rounds = case
    k = threshold_allocation(curves, total, limit, rounds)
    assert sum(k) == total and max(k) <= limit and min(k) >= 0
    assert allocation_regret(curves, k) == allocation_regret(curves, greedy_allocation(curves, total, limit))


class RowsReference:
    """A stand-in for :class:`realtrace.quality.run._Reference` with random complete rows (torch tensors, as the
    model's), enough for the optima of :mod:`realtrace.quality.optima`."""

    def __init__(self, torch, L: int, H: int, T: int, seed: int):
        rng = np.random.default_rng(seed)
        self.L, self.H, self.T = L, H, T
        # skewed heads: some concentrate on few positions, others spread (the allocation has something to move)
        self._rows = [[torch.from_numpy(random_rows(rng, T)) for _ in range(H)] for _ in range(L)]

    def rows(self, layer: int, g: int):
        return self._rows[layer][g]

    def trace(self, layer: int, g: int, top: int | None):
        from realtrace.quality.exact import rows_trace

        return rows_trace(self.rows(layer, g), top, f"L{layer} kv{g}")


@pytest.mark.parametrize("seed", range(3))
def test_static_and_coupled_optima_at_equal_total_memory(seed):
    """``OPT``, ``OPT:static`` and ``OPT:coupled`` on complete rows: each is exact (gap 0 up to rounding), the static
    one spends B = K L H slots as the greedy allocation does and never exceeds a trace's slots, the coupled one holds
    min(L H (t + 1), B) in total; and dynamic <= static <= uniform, each strict here for some seed."""
    torch = pytest.importorskip("torch")
    from realtrace.quality.exact import charge
    from realtrace.quality.optima import opt_schedule

    L, H, T, K = 2, 2, 10, 3
    ref = RowsReference(torch, L, H, T, seed)
    B = K * L * H
    out = {name: opt_schedule(ref, name, K, None) for name in ("OPT", "OPT:static", "OPT:coupled")}
    regret = {name: sum(float(charge(ref.rows(l, g), d[l, g]).sum()) for l in range(L) for g in range(H))
              for name, (d, _) in out.items()}
    for name, (_, gap) in out.items():
        assert abs(gap.sum()) < 1e-9, name
    curves = [RegretCurve(ref.trace(l, g, None)) for l in range(L) for g in range(H)]
    greedy = greedy_allocation(curves, B, limit=T)
    assert regret["OPT:static"] == pytest.approx(float(allocation_regret(curves, greedy)), abs=1e-9)
    assert regret["OPT"] == pytest.approx(float(allocation_regret(curves, uniform_allocation(L * H, B))), abs=1e-9)
    static = out["OPT:static"][0].reshape(L * H, T)
    assert sum(resident_counts(d) for d in static).max() <= B
    coupled = out["OPT:coupled"][0].reshape(L * H, T)
    assert np.array_equal(sum(resident_counts(d) for d in coupled), np.minimum(L * H * (np.arange(T) + 1), B))
    exact = coupled_nm_opt([ref.trace(l, g, None) for l in range(L) for g in range(H)], B).regret
    assert regret["OPT:coupled"] == pytest.approx(exact, abs=1e-9)
    assert regret["OPT:coupled"] <= regret["OPT:static"] + 1e-9 <= regret["OPT"] + 2e-9


def test_static_and_coupled_optima_on_truncated_rows_report_a_valid_bound():
    """With ``opt_top`` the summed gap is the complete-row cost minus the optimum of the truncated rows: >= 0, and
    cost - gap (the truncated optimum) is at most the exact optimum of the complete rows."""
    torch = pytest.importorskip("torch")
    from realtrace.quality.exact import charge
    from realtrace.quality.optima import opt_schedule

    L, H, T, K = 2, 2, 10, 3
    ref = RowsReference(torch, L, H, T, 7)
    exact = {"OPT:static": float(allocation_regret([RegretCurve(ref.trace(l, g, None)) for l in range(L)
                                                    for g in range(H)],
                                                   greedy_allocation([RegretCurve(ref.trace(l, g, None))
                                                                      for l in range(L) for g in range(H)],
                                                                     K * L * H, limit=T))),
             "OPT:coupled": coupled_nm_opt([ref.trace(l, g, None) for l in range(L) for g in range(H)],
                                           K * L * H).regret}
    for name, best in exact.items():
        drops, gap = opt_schedule(ref, name, K, 2)
        total = sum(float(charge(ref.rows(l, g), drops[l, g]).sum()) for l in range(L) for g in range(H))
        assert gap.sum() >= -1e-12, name
        assert total - gap.sum() <= best + 1e-9 <= total + 2e-9, name
        counts = np.stack([resident_counts(d) for d in drops.reshape(L * H, T)])
        if name == "OPT:coupled":  # lazy: the truncated optimum drops unstored positions early, its lazy form not
            assert np.array_equal(counts.sum(axis=0), np.minimum(L * H * (np.arange(T) + 1), K * L * H))
        else:  # each trace lazy at its own share; the shares spend B
            assert counts[:, -1].sum() == K * L * H
            assert all(np.array_equal(c, np.minimum(np.arange(T) + 1, c[-1])) for c in counts)


def test_a_trace_given_no_slot_drops_everything_on_arrival():
    """Two traces of 8 steps, B = 2 (K = 1): trace 0 puts half of each row on position 0 and half on the newest, so
    its second slot removes 3.5; trace 1 spreads each row evenly, so its first slot removes only H_8 = 2.72.  The
    exact static split gives trace 0 both slots and trace 1 none: trace 1 drops every position on arrival and loses
    all its mass (8), trace 0 nothing."""
    torch = pytest.importorskip("torch")
    from realtrace.quality.exact import charge
    from realtrace.quality.optima import static_optimum

    class Two(RowsReference):
        def __init__(self):
            self.L, self.H, self.T = 1, 2, 8
            sink_self = 0.5 * (np.eye(8) + np.eye(8)[[0] * 8])
            sink_self[0, 0] = 1.0
            spread = np.tril(np.ones((8, 8))) / np.arange(1, 9)[:, None]
            self._rows = [[torch.from_numpy(sink_self), torch.from_numpy(spread)]]

    ref = Two()
    assert np.allclose(ref.rows(0, 0).numpy().sum(axis=1), 1.0)
    drops, gap = static_optimum(ref, 1, None)
    assert np.array_equal(drops[0, 1], np.arange(8))
    assert float(charge(ref.rows(0, 1), drops[0, 1]).sum()) == pytest.approx(8.0)
    assert float(charge(ref.rows(0, 0), drops[0, 0]).sum()) == pytest.approx(0.0, abs=1e-12)
    assert math.isclose(gap.sum(), 0.0, abs_tol=1e-12)


def test_evictions_of_the_coupled_schedule_charge_what_the_flow_says():
    """The drop vectors of :func:`coupled_schedule` as eviction lists, charged by the engine's measure, give the
    flow's per-head regret."""
    rng = np.random.default_rng(3)
    rows = [random_rows(rng, 8) for _ in range(3)]
    traces = [as_trace(a, f"h{h}") for h, a in enumerate(rows)]
    drops, res = coupled_schedule(traces, 7)
    for tr, d, want in zip(traces, drops, res.per_head):
        assert schedule_regret(tr, evictions_from_drop(d)).sum() == pytest.approx(want, abs=1e-12)
    assert res.regret <= sum(nm_opt(tr, k).cost for tr, k in zip(traces, uniform_allocation(3, 7))) + 1e-12


def test_the_coupled_bench_command_line():
    """``python -m realtrace.quality.bench_coupled``: --help lists every option; a bad prompt or budget is one line, exit 2, before
    the model loads."""
    from tests.command_line import run_module

    code, out, _ = run_module("realtrace.quality.bench_coupled", "--help", timeout=120)
    assert code == 0
    for opt in ("--prompt", "--budget", "--opt-top", "--static", "--threads", "--json"):
        assert opt in out
    for args, needle in ((("--prompt", "nope"), "prompt 'nope': not a built-in quality prompt"),
                         (("--budget", "0"), "--budget: 0 is below 1")):
        code, out, err = run_module("realtrace.quality.bench_coupled", *args, timeout=120)
        assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_the_coupled_bench_runs_on_a_short_prompt():
    """The measurement itself on needle-400-d10 at K = 16, on complete rows: the coupled and the static optimum are
    certified, and their regrets keep the exact order coupled <= static <= the 90 per-head optima at K (any static
    split is a coupled schedule, the uniform split a static one); each certified optimum meets its Lagrangian lower
    bound (tight at the optimal prices)."""
    pytest.importorskip("torch")
    import json

    from tests.command_line import run_module

    code, out, err = run_module("realtrace.quality.bench_coupled", "--prompt", "needle-400-d10", "--budget", "16",
                                "--static", "--json", timeout=1800)
    assert code == 0, err[-2000:]
    res = json.loads(out)
    assert res["traces"] == 90 and res["total_budget"] == 16 * 90 and res["opt_top"] is None
    assert res["coupled"]["certified"] and res["static"]["certified"]
    assert res["coupled"]["regret"] <= res["static"]["regret"] + 1e-9
    assert res["static"]["regret"] <= res["per_head_opt"]["regret"] + 1e-9
    for kind in ("coupled", "static"):
        assert res[kind]["certificate"]["lower_bound"] == pytest.approx(res[kind]["regret"], rel=1e-9)


def test_an_empty_resident_set_displaces_everything():
    """The masked pass on a step whose resident set is empty (the coupled optimum may starve a trace): the output
    is 0, so the relative error is 1, and the displaced mass is 1 -- not ``1 - exp(-L)`` from the kernel's log-sum-exp
    0 on a fully masked row.  A step with a resident set keeps its exact displaced mass."""
    torch = pytest.importorskip("torch")
    from realtrace.quality.replay import MaskedPass, OpenLoop

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, 4, 8, generator=gen) * 3 for n in (3, 1, 1))
    drops = np.array([[[1, 2, 2, 4]]])  # step 2: positions 0..2 gone; step 3: position 3 alone resident
    pass_ = MaskedPass(torch, OpenLoop(drops), 1, 1, 4)
    pass_.attend(0, q, k, v, 0.35)
    assert pass_.record.error[0, 0, 2] == pytest.approx(1.0, abs=1e-6)
    assert pass_.record.displaced[0, 0, 2] == pytest.approx(1.0, abs=1e-6)
    a = torch.softmax(q[0, :, 3] @ k[0, 0].T * 0.35, dim=-1)  # (3 query heads, 4 keys): step 3 keeps key 3 only
    assert pass_.record.displaced[0, 0, 3] == pytest.approx(float(a[:, :3].sum(dim=1).mean()), abs=1e-5)


def test_quality_runs_the_static_and_coupled_optima_in_the_model(tmp_path, capsys):
    """``paper_check quality OPT:coupled`` (the command line, in this process so the model loads once) on one short
    prompt at K = 6, complete rows, runs ``OPT:static`` and ``OPT`` beside it: all are exact (gap 0), hold at most B
    = 6 x (layers x KV heads) positions in total (the coupled one exactly B at its peak), may hold more than K in one
    trace, and order as dynamic <= static <= uniform in summed regret; with ``--no-opt`` the coupled one runs alone.
    The model's shape is the one its result records."""
    import json

    from paper_check.cli import main
    from tests.model_fixture import shared_model

    shared_model()
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "p", "text": "The secret word is apple. Repeat the secret word.\nThe secret "
                                                     "word is", "answer": " apple"}) + "\n")
    command = ["quality", "OPT:coupled", "--budget", "6", "--prompts-file", str(path), "--workers", "0", "--json"]
    assert main(command + ["--no-opt"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert [r["config"] for r in alone["runs"] if r["kind"] == "opt"] == ["OPT:coupled"]
    assert main(command) == 0
    res = json.loads(capsys.readouterr().out)
    runs = {r["config"]: r for r in res["runs"] if r["kind"] == "opt"}
    assert set(runs) == {"OPT", "OPT:static", "OPT:coupled"}
    assert (res["model"]["layers"], res["model"]["kv_heads"]) == (30, 3)  # SmolLM2-135M's configuration
    B = 6 * res["model"]["layers"] * res["model"]["kv_heads"]
    for name, r in runs.items():
        assert r["max_resident_total"] <= B and abs(r["total"]["opt_gap"]) < 1e-9, name
    assert runs["OPT"]["max_resident"] == 6 and runs["OPT:coupled"]["max_resident_total"] == B
    s = {n: r["total"]["regret_sum"] for n, r in runs.items()}
    assert s["OPT:coupled"] <= s["OPT:static"] + 1e-9 <= s["OPT"] + 2e-9


@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.sampled_from([0.125, 0.35, 1.0]))
def test_head_rows_in_place_are_the_plain_rows_bit_for_bit(T, seed, scaling):
    """The rows every optimum and charge is computed on: the in-place operations give exactly the plain ones' bits
    for every KV head, at lengths that change from call to call (the future mask is remade per length)."""
    torch = pytest.importorskip("torch")
    from realtrace.quality.exact import head_rows, head_rows_plain

    gen = torch.Generator().manual_seed(seed)
    query, key = torch.randn(1, 6, T, 8, generator=gen) * 4, torch.randn(1, 2, T, 8, generator=gen) * 4
    for g in range(2):
        assert torch.equal(head_rows(torch, query, key, g, scaling), head_rows_plain(torch, query, key, g, scaling))
