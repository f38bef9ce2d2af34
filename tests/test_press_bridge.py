"""The press bridge end to end: options without the extras; with the real model (slow; skipped with the reason when
the [real,kvpress] extras or the model wheel are missing) the acceptance command, the optimum bound, and what each
press keeps compared with its paper's rule and the toolkit policy of the same name."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from kvcore.errors import ParameterError
from realtrace import COMMITTED, load_traceset
from realtrace.model import MODEL_INSTALL, MODEL_PACKAGE
from realtrace.press.registry import press_spec, ratio_for_budget
from tests.command_line import is_one_line_error, run_realtrace_without

def run_without_extras(*args):
    return run_realtrace_without(("torch", "transformers", "kvpress"), *args)


def test_press_help_and_bad_input_without_extras():
    code, out, _ = run_without_extras("press", "--help")
    assert code == 0 and "--ratio" in out and "--decoding" in out
    words = " ".join(out.split())  # argparse wraps the help text
    assert "--rows {complete,stored}" in words and "complete attention rows of the full cache" in words
    code, _, err = run_without_extras("press", "TOVA", "--ratio", "0.5", "--traces", COMMITTED, "--json")
    assert is_one_line_error(code, err, "[real,kvpress] extras"), err
    code, _, err = run_without_extras("press", "Nope", "--ratio", "0.5")
    assert code == 2 and "press Nope: unknown" in err
    code, _, err = run_without_extras("press", "DuoAttention", "--ratio", "0.5")
    assert code == 2 and "not bridged" in err and "hub" in err
    code, _, err = run_without_extras("press", "TOVA")
    assert code == 2 and "exactly one of --ratio R and --budget K" in err


def test_ratio_for_budget_keeps_exactly_the_budget():
    for n in (7, 100, 588, 8000):
        for k in (1, n // 3, n - 1, n):
            r = ratio_for_budget(n, k)
            assert int(n * (1 - r)) == k and 0 <= r < 1
    with pytest.raises(ParameterError, match="--budget 0"):
        ratio_for_budget(10, 0)
    assert press_spec("tovapress").name == "TOVA"


# ---------------------------------------------------------------------------------------------------------------------
# with the real model


def needs_extras():
    for mod in ("torch", "transformers", "gguf", "kvpress"):
        pytest.importorskip(mod, reason="the press bridge needs the [real,kvpress] extras")
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip(f"model wheel not installed: {MODEL_INSTALL}")


@pytest.fixture(scope="module")
def model():
    needs_extras()
    from realtrace.press.run import get_model

    return get_model("eager")


@pytest.fixture(scope="module")
def traces():
    return load_traceset(COMMITTED)


def run_record(lm, press, ts, prefill):
    from realtrace.press.recorder import run_press

    return run_press(lm, press, ts.meta["tokens"], prefill)[0]


def kept_at(record, layer, head, i=0):
    from realtrace.press.schedule import replay

    return replay(record, layer, head).kept[i]


@pytest.mark.slow
def test_acceptance_command_prints_the_optimum_beside_each_trace():
    needs_extras()
    r = subprocess.run([sys.executable, "-m", "realtrace", "press", "TOVA", "--ratio", "0.5", "--traces",
                        str(COMMITTED), "--json"], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert len(res["traces"]) == 12 and res["rows"] == "complete" and "complete attention rows" in res["charged"]
    assert res["total"]["unattributed"] == 0.0 and res["total"]["charged_mass"] == pytest.approx(12 * 29)
    for row in res["traces"]:
        assert row["press"] >= row["opt"] - row["opt_gap_bound"] - 1e-9  # never below the exact optimum
        assert row["opt"] <= row["one_shot"] + 1e-9 <= row["press"] + 2e-9
        assert row["budget"] == 294 + 29 and row["n_kept"] == 294
    assert res["answer"]["expected"] == "4 7 1 9 3"


@pytest.mark.slow
def test_streamingllm_prefill_keeps_sinks_and_window_as_the_toolkit_policy(model, traces):
    """StreamingLLMPress keeps positions 0-3 and the newest ones (Xiao et al.); the toolkit's StreamingLLM at a
    cache of n_kept holds exactly the same positions at the prefill boundary."""
    import kvpress

    from kvcore.engine import run_nm
    from policies import make

    P = traces.segments["continuation"][0]
    rec = run_record(model, kvpress.StreamingLLMPress(compression_ratio=0.9), traces, P)
    n_kept = int(P * 0.1)
    want = set(range(4)) | set(range(P - (n_kept - 4), P))
    for name in traces.names():
        layer, head = traces.layers[name], int(traces.heads[name][2:])
        step, kept = kept_at(rec, layer, head)
        assert step == P and set(kept.tolist()) == want
        res = run_nm(make("StreamingLLM", n_sinks=4), traces.traces[name], n_kept, record=True)
        gone = {i for s, i in res.evictions if s <= P - 1}
        assert set(range(P)) - gone == want


@pytest.mark.slow
def test_streamingllm_decoding_loses_the_sinks_after_its_first_compression(model, traces):
    """A kvpress defect (0.5.5), stated exactly.  StreamingLLMPress scores cache *slots*: slots 0-3 are the sinks and
    the last slots the window.  ScorerPress.compress stores the kept rows in ``scores.topk`` order, and every kept
    row ties at score 1, so after the first compression slot order is no longer position order.  Under DecodingPress
    the first compression keeps sinks + window (the paper's rule, Xiao et al.); every later one keeps exactly the
    slots rule applied to the re-ordered cache, which drops sink positions and keeps stale ones."""
    import kvpress

    from realtrace.press.schedule import replay

    budget, interval = 64, 16
    press = kvpress.DecodingPress(base_press=kvpress.StreamingLLMPress(), compression_interval=interval,
                                  target_size=budget)
    rec = run_record(model, press, traces, budget)
    for layer, head in ((0, 0), (29, 2)):
        sched = replay(rec, layer, head)
        assert len(sched.kept) == (traces.T - budget) // interval
        cache, prev = list(range(budget)), budget
        for i, (step, kept) in enumerate(sched.kept):
            cache = cache + list(range(prev, step))  # the rows appended since the last compression
            slot_rule = set(cache[:4]) | set(cache[len(cache) - (budget - 4):])
            paper_rule = set(range(4)) | set(range(step - (budget - 4), step))
            assert set(kept.tolist()) == slot_rule
            assert (set(kept.tolist()) == paper_rule) == (i == 0), (i, step)
            cache, prev = kept.tolist(), step
        assert not set(range(4)) <= set(sched.kept[-1][1].tolist())  # sinks lost by the end


@pytest.mark.slow
def test_tova_and_observed_attention_keep_their_rule_and_differ_from_the_toolkit_policies(model, traces):
    """TOVAPress: the top positions of the last prompt query's attention averaged over all 9 query heads (so every KV
    head keeps the same set), plus that query.  ObservedAttentionPress: per KV head, the top positions by attention
    received summed over queries and divided by how many queries see the position, averaged over the KV head's
    query heads.  Both are recomputed here from the model's own output_attentions.  The toolkit's TOVA and H2O
    decide online, one eviction per step, so at the boundary they hold other sets (measured overlap reported)."""
    import kvpress
    import torch

    P = traces.segments["continuation"][0]
    ids = traces.meta["tokens"][:P]
    with torch.no_grad():
        att = model.model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False).attentions
    n_kept = int(P * 0.5)
    tova = run_record(model, kvpress.TOVAPress(compression_ratio=0.5), traces, P)
    obs = run_record(model, kvpress.ObservedAttentionPress(compression_ratio=0.5), traces, P)
    for layer in (0, 9, 19, 29):
        a = att[layer][0].double()  # (9, P, P)
        last = a[:, -1, :-1].mean(0)
        want_tova = set(torch.topk(last, n_kept - 1).indices.tolist()) | {P - 1}
        received = a.sum(1) / torch.arange(P, 0, -1, dtype=torch.float64)
        for g in range(3):
            assert set(kept_at(tova, layer, g)[1].tolist()) == want_tova
            score = received[3 * g:3 * g + 3].mean(0)
            got = set(kept_at(obs, layer, g)[1].tolist())
            want = set(torch.topk(score, n_kept).indices.tolist())
            # the model's float32 scores may order near-ties differently from this float64 recomputation
            assert len(got ^ want) <= 4, (layer, g, sorted(got ^ want))


@pytest.mark.slow
def test_leaderboard_command_writes_figure_table_and_json(tmp_path):
    needs_extras()
    out = tmp_path / "board"
    r = subprocess.run([sys.executable, "-m", "realtrace", "press", "--all", "--presses", "TOVA,Knorm", "--ratios",
                        "0.9", "--decoding-budgets", "128", "--out", str(out), "--json"], capture_output=True,
                       text=True, timeout=3000)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)
    assert [s["press"] for s in summary] and {s["press"] for s in summary} == {"TOVA", "Knorm", "TOVA (decoding)"}
    assert sorted(p.name for p in out.iterdir()) == ["press_leaderboard.json", "press_leaderboard.md",
                                                      "press_regret_vs_budget.png", "press_regret_vs_budget.svg"]
    md = (out / "press_leaderboard.md").read_text()
    assert "| 1 |" in md and "complete attention rows" in md
    runs = json.loads((out / "press_leaderboard.json").read_text())["runs"]
    for res in runs:
        for row in res["traces"]:
            assert row["press"] >= row["opt"] - row["opt_gap_bound"] - 1e-9


@pytest.mark.slow
def test_knorm_keeps_the_smallest_key_norms_and_snapkv_its_window(model, traces):
    """KnormPress keeps, per KV head, the positions whose cached (post-RoPE) key has the smallest L2 norm (Devoto
    et al.); recomputed from a plain prefill's cache.  SnapKVPress keeps its whole 64-query observation window when
    the budget allows (ratio 0.5) and, when it does not (ratio 0.9 keeps 58 of 588), nothing but positions of that
    window: every window score is padded to the same maximum, so no sink or older position survives."""
    import kvpress

    P = traces.segments["continuation"][0]
    ids = traces.meta["tokens"][:P]
    cache = model.new_cache()
    model.forward(ids, cache)
    knorm = run_record(model, kvpress.KnormPress(compression_ratio=0.5), traces, P)
    snap_half = run_record(model, kvpress.SnapKVPress(compression_ratio=0.5), traces, P)
    snap_tight = run_record(model, kvpress.SnapKVPress(compression_ratio=0.9), traces, P)
    window = set(range(P - 64, P))
    for layer in (0, 9, 19, 29):
        norms = cache.layers[layer].keys[0].double().norm(dim=-1)  # (KV heads, P)
        for g in range(3):
            kept = kept_at(knorm, layer, g)[1]
            dropped = np.setdiff1d(np.arange(P), kept)
            assert kept.size == int(P * 0.5)
            # every kept key is at most as long as every dropped one (up to float32 rounding of the press's norms)
            assert norms[g, kept].max() <= norms[g, dropped].min() * (1 + 1e-6)
            assert window <= set(kept_at(snap_half, layer, g)[1].tolist())
            tight = set(kept_at(snap_tight, layer, g)[1].tolist())
            assert len(tight) == int(P * 0.1) and tight <= window
