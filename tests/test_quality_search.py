"""The output-driven search (issue 52 item 5, :mod:`realtrace.quality.search`): an exchange keeps every step's
resident count (so the budget and laziness) and the schedule valid, every lazy schedule is reachable, a proposal's
score is its brute-force answer-row gain, the search never returns a schedule measured worse than its start, a
budget of 0 passes returns the start, and a move that breaks the budget is caught before a pass is spent on it.
The model tests use a tiny randomly initialised Llama (:mod:`tests.tiny_models`): the search's measured KL is
``quality``'s for the saved schedule, through the real command lines."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from realtrace.quality import search
from realtrace.quality.schedule import ScheduleError, check_drop, lazy_drop, resident_counts
from realtrace.quality.search import check_counts, exchange, output_search, trace_candidates
from tests.command_line import is_one_line_error, run_module


def random_drop(T: int, k: int, rng: np.random.Generator, lazy: bool) -> np.ndarray:
    """A valid NM schedule of at most ``k`` positions: token ``t`` joins, then (unless ``lazy``) each resident leaves
    with probability 1/4, then random residents leave until ``k`` remain; lazy: only the last."""
    drop = np.full(T, T, dtype=np.int64)
    resident: list[int] = []
    for t in range(T):
        resident.append(t)
        if not lazy:
            for i in [i for i in resident if rng.random() < 0.25]:
                resident.remove(i)
                drop[i] = t
        while len(resident) > k:
            i = resident.pop(int(rng.integers(len(resident))))
            drop[i] = t
    return drop


def moves(drop: np.ndarray) -> list[tuple[int, int]]:
    """Every exchange ``(dropped, kept)`` the module docstring allows on ``drop``."""
    T = drop.size
    return [(i, j) for i in range(T) if drop[i] < T for j in range(drop[i] + 1) if drop[j] > drop[i]]


schedules = st.tuples(st.integers(2, 30), st.integers(1, 29), st.integers(0, 2 ** 32 - 1), st.booleans())


def drawn(case: tuple) -> tuple:
    """``(T, k, lazy, rng, drop)`` of a drawn ``schedules`` case: a budget below ``T``, the case's generator, and a
    random schedule of that budget (lazy when asked)."""
    T, k, seed, lazy = case
    k = min(k, T - 1)
    rng = np.random.default_rng(seed)
    return T, k, lazy, rng, random_drop(T, k, rng, lazy)


@settings(max_examples=200, deadline=None)
@given(schedules)
def test_an_exchange_keeps_every_count_the_budget_and_laziness(case):
    T, k, lazy, rng, drop = drawn(case)
    options = moves(drop)
    if not options:
        return
    i, j = options[int(rng.integers(len(options)))]
    moved = exchange(drop, i, j)
    check_drop(moved)  # every position dropped at or after its arrival, at most T
    assert moved[i] == drop[j] and moved[j] == drop[i] and moved[i] > drop[i] and moved[j] < drop[j]
    assert np.array_equal(resident_counts(moved), resident_counts(drop))
    assert resident_counts(moved).max() <= k
    if lazy:
        assert np.array_equal(resident_counts(moved), np.minimum(np.arange(T) + 1, k))
        assert np.array_equal(lazy_drop(moved, k), moved)
    check_counts(moved[None, None], resident_counts(drop)[None, None])


@settings(max_examples=100, deadline=None)
@given(schedules)
def test_an_exchange_that_is_not_one_is_refused(case):
    """A partner not resident when the other leaves (arrived later, or gone by then) is refused, not swapped."""
    T, k, lazy, rng, drop = drawn(case)
    allowed = set(moves(drop))
    for i in np.flatnonzero(drop < T):
        for j in range(T):
            if (i, j) not in allowed:
                with pytest.raises(ScheduleError):
                    exchange(drop, int(i), j)


@settings(max_examples=100, deadline=None)
@given(schedules)
def test_every_lazy_schedule_is_reached_in_at_most_t_minus_k_exchanges(case):
    """The module docstring's reach argument, run: match the target's drop at each step in turn."""
    T, k, seed, _ = case
    k = min(k, T - 1)
    rng = np.random.default_rng(seed)
    drop, target = random_drop(T, k, rng, True), random_drop(T, k, rng, True)
    used = 0
    for s in range(k, T):
        want = int(np.flatnonzero(target == s)[0])
        have = int(np.flatnonzero(drop == s)[0])
        if want != have:
            drop = exchange(drop, have, want)
            used += 1
    assert np.array_equal(drop, target) and used <= T - k


@settings(max_examples=100, deadline=None)
@given(schedules, st.integers(1, 5))
def test_a_proposal_is_the_best_partner_by_its_brute_force_gain(case, rows):
    T, k, lazy, rng, drop = drawn(case)
    first = max(T - 1 - rows, 0)
    weights = np.tril(rng.random((T, T)))[first:T - 1]

    def gain(i, j):
        s, u = drop[i], drop[j]
        return sum(weights[t - first, i] - weights[t - first, j] for t in range(first, T - 1) if s <= t < u)

    got = {c.dropped: c for c in trace_candidates(drop, weights, first)}
    for i in np.flatnonzero(drop < T - 1):
        partners = [j for i2, j in moves(drop) if i2 == i]
        best = max((gain(i, j) for j in partners), default=0.0)
        if best > 1e-12:
            c = got[int(i)]
            assert (c.step, c.until) == (drop[i], drop[c.kept]) and c.score == pytest.approx(best, abs=1e-12)
            assert c.score == pytest.approx(gain(i, c.kept), abs=1e-12)
        else:
            assert int(i) not in got or got[int(i)].score <= 1e-12


def start_and_weights(L=2, H=2, T=24, k=6, seed=1):
    rng = np.random.default_rng(seed)
    start = np.stack([[random_drop(T, k, rng, True) for _ in range(H)] for _ in range(L)])
    first = T - 5
    weights = [[np.tril(rng.random((T, T)))[first:T - 1] for _ in range(H)] for _ in range(L)]
    return start, weights, first


class Noise:
    """A stand-in measurement: a fixed pseudo-random number per schedule (from its digest), counting its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, drops):
        from realtrace.quality.search_run import digest

        self.calls += 1
        return float(np.random.default_rng(int(digest(drops)[:15], 16)).random())


def test_a_budget_of_no_passes_returns_the_start():
    start, weights, first = start_and_weights()
    noise = Noise()
    res = output_search(start, noise, weights, first, 0, seed=0)
    assert np.array_equal(res.drops, start) and res.passes == 0 and noise.calls == 0
    assert res.kl is None and res.gap is None and not res.exchanges


@pytest.mark.parametrize("seed", range(5))
def test_the_search_never_returns_a_schedule_measured_worse_than_its_start(seed):
    start, weights, first = start_and_weights(seed=seed)
    noise = Noise()
    res = output_search(start, noise, weights, first, 12, seed=seed, batch=4)
    assert noise.calls == res.passes <= 12
    assert res.kl == noise(res.drops) <= res.start_kl == noise(start)
    assert res.kl == min([res.start_kl] + [kl for kl, _, _ in res.history])
    check_counts(res.drops, np.stack([[resident_counts(d) for d in row] for row in start]))
    # the exchanges kept, replayed on the start, give the result
    replayed = start.copy()
    for c in res.exchanges:
        replayed[c.layer, c.head] = exchange(replayed[c.layer, c.head], c.dropped, c.kept)
    assert np.array_equal(replayed, res.drops)


def test_a_move_that_breaks_the_budget_is_caught_before_its_pass(monkeypatch):
    """A broken exchange keeps the dropped position longer but forgets to drop the other one earlier: one position
    too many from the step of the exchange on; refused before the pass (only the start was measured)."""
    def kept_longer_only(drop, dropped, kept):
        out = np.array(drop, dtype=np.int64)
        out[dropped] = drop[kept]
        return out

    start, weights, first = start_and_weights()
    monkeypatch.setattr(search, "exchange", kept_longer_only)
    noise = Noise()
    with pytest.raises(ScheduleError, match="positions at step"):
        output_search(start, noise, weights, first, 5, seed=0, batch=1)
    assert noise.calls == 1



# ---- on a tiny randomly initialised model (the [real] extra; no download) ------------------------------------------

T_TINY, N_PROMPT, K_TINY = 40, 34, 8


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("torch", reason="the tiny model needs the [real] extra")
    pytest.importorskip("transformers", reason="the tiny model needs the [real] extra")
    from realtrace.model import load_model
    from tests.tiny_models import save_tiny_model

    directory = save_tiny_model(tmp_path_factory.mktemp("llama") / "model", "llama", seed=11)
    lm = load_model(install=False, threads=1, model=str(directory))
    ids = tuple(int(x) for x in np.random.default_rng(5).integers(0, 95, T_TINY))
    return lm, ids


def decoded_answer_kl(lm, ids, drops) -> float:
    """The answer KL of ``drops`` by the independent decoder of ``tests/test_quality_replay.py`` (token by token,
    positions physically deleted), against the model's own full-cache forward: mean over the answer rows of
    ``KL(full || evicted)``."""
    from tests.test_quality_replay import DropDecoder, scheduled

    torch = lm.torch
    geo = lm.geometry
    evicted = DropDecoder(torch, geo.kv_heads, geo.group, scheduled(drops)).run(lm, list(ids))
    with torch.no_grad():
        full = lm.model(torch.tensor([list(ids)])).logits[0]
        p = torch.log_softmax(full.double(), dim=-1)[N_PROMPT - 1:T_TINY - 1]
        q = torch.log_softmax(torch.as_tensor(evicted).double(), dim=-1)[N_PROMPT - 1:T_TINY - 1]
    return float((p.exp() * (p - q)).sum(dim=1).mean())


def test_the_search_on_a_tiny_model_measures_what_an_independent_decoder_does(tiny):
    """The start (the exact optimum) and the best schedule: their answer KLs as the search measured them equal the
    independent decoder's; the best is not worse than the start and holds exactly the optimum's counts."""
    from realtrace.quality.cache import Store
    from realtrace.quality.run import PromptIds, _Reference
    from realtrace.quality.search_run import search_prompt

    lm, ids = tiny
    ref = _Reference(lm, PromptIds("tiny", "test", ids, N_PROMPT, ""), (K_TINY,), [], Store(None))
    [(row, best)] = search_prompt(lm, ref, "OPT", 8, seed=3, batch=4)
    start = search_prompt(lm, ref, "OPT", 0, seed=3, batch=4)[0][1]
    assert row["passes"] <= 8 and row["best_kl"] <= row["start_kl"] and row["best_regret_sum"] >= \
        row["start_regret_sum"] - 1e-9  # the start is the optimum of the regret: no exchange lowers it
    want = np.minimum(np.arange(T_TINY) + 1, K_TINY)
    assert all(np.array_equal(resident_counts(d), want) for d in best.reshape(-1, T_TINY))
    assert row["start_kl"] == pytest.approx(decoded_answer_kl(lm, ids, start), rel=1e-3, abs=1e-6)
    assert row["best_kl"] == pytest.approx(decoded_answer_kl(lm, ids, best), rel=1e-3, abs=1e-6)
    assert row["exchanges"] > 0 and not np.array_equal(best, start)  # something was found on this model


def prompts_file(path, ids) -> str:
    words = " ".join(f"w{i}" for i in ids[:N_PROMPT])
    answer = "".join(f" w{i}" for i in ids[N_PROMPT:])
    path.write_text(json.dumps({"name": "p", "text": words, "answer": answer}) + "\n")
    return str(path)


def test_the_command_writes_a_schedule_quality_replays_to_the_same_kl(tiny, tmp_path):
    """``paper_check quality-search`` through the real command line: its best schedule, saved, replayed by
    ``paper_check quality file:PATH`` has the answer KL the search reported; with ``--passes 0`` the saved schedule
    is the optimum's and nothing is measured."""
    lm, ids = tiny
    model, prompts = str(lm.source.path), prompts_file(tmp_path / "p.jsonl", ids)
    common = ("--model", model, "--prompts-file", prompts, "--budget", K_TINY, "--no-cache")
    code, out, err = run_module("paper_check", "quality-search", *common, "--passes", 6, "--seed", 1,
                                "--out", tmp_path / "found", "--json", timeout=300)
    assert code == 0, err
    [row] = json.loads(out)["results"]
    assert row["best_kl"] <= row["start_kl"] and row["passes"] <= 6
    code, out, err = run_module("paper_check", "quality", f"file:{tmp_path / 'found' / f'search_K{K_TINY}.npz'}",
                                *common, "--no-opt", "--workers", 0, "--json", timeout=300)
    assert code == 0, err
    replayed = next(r for r in json.loads(out)["runs"] if r["config"].startswith("file:"))
    assert replayed["total"]["kl_answer"] == pytest.approx(row["best_kl"], rel=1e-12)
    code, out, err = run_module("paper_check", "quality-search", *common, "--passes", 0, "--out", tmp_path / "start",
                                "--json", timeout=300)
    assert code == 0, err
    [row] = json.loads(out)["results"]
    assert row["passes"] == 0 and row["start_kl"] is None and row["exchanges"] == 0
    code, out, err = run_module("paper_check", "quality", f"file:{tmp_path / 'start' / f'search_K{K_TINY}.npz'}",
                                *common, "--workers", 0, "--json", timeout=300)
    assert code == 0, err
    runs = {r["config"].split(":")[0]: r for r in json.loads(out)["runs"]}
    assert runs["file"]["total"]["kl_answer"] == runs["OPT"]["total"]["kl_answer"]  # the start is OPT's schedule
    assert runs["file"]["total"]["regret_sum"] == runs["OPT"]["total"]["regret_sum"]


@pytest.mark.parametrize("args, needle", [
    (("--budget", 8, "--start", "OPT:nothing"), "--start OPT:nothing"),
    (("--budget", 8, "--budgets", "8,9"), "not both"),
    (("--prompts", "needle-400-d10"), "give --budget"),
    (("--budget", 8, "--prompts", "needle-7"), "needle-7"),
    (("--budget", 8, "--passes", -1), "--passes"),
    (("--budget", 8, "--prompts", "kv-24-12,kv-24-12"), "named twice"),
])
def test_bad_input_is_one_line_before_the_model(args, needle):
    code, _, err = run_module("paper_check", "quality-search", *args, timeout=120)
    assert is_one_line_error(code, err, needle), err


def test_a_budget_beyond_the_prompt_is_one_line_before_the_model_runs(tiny, tmp_path):
    lm, ids = tiny
    code, _, err = run_module("paper_check", "quality-search", "--model", str(lm.source.path), "--prompts-file",
                              prompts_file(tmp_path / "p.jsonl", ids), "--budget", T_TINY, "--no-cache",
                              timeout=300)
    assert is_one_line_error(code, err, f"--budget {T_TINY}"), err


@pytest.mark.slow
def test_the_search_starts_from_quality_s_optimum_on_smollm2():
    """SmolLM2 (the wheel) on needle-400-d10 at K = 64, 4 passes: the start's answer KL is ``quality OPT``'s
    ``kl_answer`` exactly (a separate command, no cache shared), and the best is not above it."""
    common = ("--budget", 64, "--prompts", "needle-400-d10", "--no-cache", "--threads", 1, "--json")
    code, out, err = run_module("paper_check", "quality-search", *common, "--passes", 4, timeout=1800)
    assert code == 0, err
    [row] = json.loads(out)["results"]
    code, out, err = run_module("paper_check", "quality", "OPT", *common, "--workers", 1, timeout=1800)
    assert code == 0, err
    opt = next(r for r in json.loads(out)["runs"] if r["config"] == "OPT")
    assert row["start_kl"] == opt["total"]["kl_answer"] and row["start_right"] == (opt["total"]["right"] == 1)
    assert row["start_regret_sum"] == pytest.approx(opt["total"]["regret_sum"], rel=1e-9)
    assert row["passes"] == 4 and row["best_kl"] <= row["start_kl"]
