"""The model interface on tiny randomly initialised models of four architectures (issue 49 item 3, SPEC section 8;
needs the [real] extra, no download): Llama (grouped-query), Qwen3 (QK-norm), Mistral (every layer a sliding window)
and Gemma 3 (multi-query, QK-norm, sliding-window and full layers), each saved with ``save_pretrained`` and loaded
through ``--model DIR`` (:mod:`tests.tiny_models`).  On each: the geometry is the configuration's; a masked replay
equals decoding with the keys physically dropped (and nothing dropped equals the model's own forward, its own
masks); a closed-loop TOVA and H2O equal a decode applying their rules; the optimum is lazy and exact; on a
sliding-window layer a key outside the window is invisible to the full cache too (the optimum drops it for free,
nothing is charged for it, a budget K stores min(K, W) entries).  Each check is also run on a deliberately broken
mask (the model's windows ignored, or one key dropped early) and seen to fail.  Refusals (a missing path, a text
file, an encoder-only configuration): one line, exit 2, before any weight is read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.command_line import is_one_line_error, run_module
from tests.test_quality_replay import DropDecoder, RuleInside, random_schedule, scheduled
from tests.tiny_models import ARCHITECTURES, GEMMA_WINDOW, MISTRAL_WINDOW, save_tiny_model

pytest.importorskip("torch", reason="the tiny models need the [real] extra")
pytest.importorskip("transformers", reason="the tiny models need the [real] extra")

T = 40
# The replay (one fused kernel per mask) and the decoder (per-step matmuls) differ in summation order only: a few
# float32 ulps carried through 3 layers, measured below 2e-6 on these models' logits (up to ~10); a key dropped one
# step early, or a window ignored, moves them by more than 1e-2.
TOL = 1e-4
WINDOWS = {"llama": (None,) * 3, "qwen3": (None,) * 3, "mistral": (MISTRAL_WINDOW,) * 3,
           "gemma3": (GEMMA_WINDOW, None, GEMMA_WINDOW)}
KV_HEADS = {"llama": 2, "qwen3": 2, "mistral": 2, "gemma3": 1}


@pytest.fixture(scope="module", params=ARCHITECTURES)
def tiny(request, tmp_path_factory):
    from realtrace.model import load_model

    arch = request.param
    directory = save_tiny_model(tmp_path_factory.mktemp(arch) / "model", arch, seed=11)
    lm = load_model(install=False, threads=1, model=str(directory))
    ids = [int(x) for x in np.random.default_rng(5).integers(0, 95, T)]
    return arch, lm, ids


def logits(lm, hidden):
    with lm.torch.no_grad():
        return lm.model.lm_head(hidden).numpy()


def replayed(lm, ids, plan, windows=None):
    from realtrace.quality.replay import replay

    geo = lm.geometry
    pass_, hidden = replay(lm, ids, plan, geo.layers, geo.kv_heads, windows=windows)
    return pass_, logits(lm, hidden)


def test_the_geometry_is_the_configuration(tiny):
    arch, lm, _ = tiny
    geo = lm.geometry
    assert (geo.layers, geo.query_heads, geo.kv_heads, geo.head_dim) == (3, 4, KV_HEADS[arch], 8)
    assert geo.windows == WINDOWS[arch] and geo.vocab == 96 and geo.context == 256
    # a budget on a sliding-window layer stores min(K, W) entries per KV head
    w = [x or 10 ** 6 for x in WINDOWS[arch]]
    assert geo.stored_entries(10) == KV_HEADS[arch] * sum(min(10, x) for x in w)


def test_masked_replay_equals_dropping_the_keys(tiny):
    from realtrace.quality.replay import OpenLoop
    from realtrace.quality.schedule import full_cache

    arch, lm, ids = tiny
    geo = lm.geometry
    # nothing dropped: the model's own forward (its own causal and sliding-window masks, eager attention)
    with lm.torch.no_grad():
        own = lm.model(lm.torch.tensor([ids])).logits[0].numpy()
    nothing = OpenLoop(full_cache(geo.layers, geo.kv_heads, T))
    assert np.abs(replayed(lm, ids, nothing)[1] - own).max() < TOL
    drops = random_schedule(geo.layers, geo.kv_heads, T, np.random.default_rng(3), first=8)
    ref = DropDecoder(lm.torch, geo.kv_heads, geo.group, scheduled(drops))
    want = ref.run(lm, ids)
    pass_, got = replayed(lm, ids, OpenLoop(drops))
    assert np.abs(got - want).max() < TOL
    disp = np.array([[[ref.displaced[(layer, g, t)] for t in range(T)] for g in range(geo.kv_heads)]
                     for layer in range(geo.layers)])
    assert disp.max() > 0.05
    np.testing.assert_allclose(pass_.record.displaced, disp, atol=2e-5)
    # deliberately broken masks: the model's windows ignored (where it has any), one key dropped early
    if any(WINDOWS[arch]):
        for plan in (nothing, OpenLoop(drops)):
            wrong = replayed(lm, ids, plan, windows=(None,) * geo.layers)[1]
            assert np.abs(wrong - (own if plan is nothing else want)).max() > 100 * TOL
    early = drops.copy()  # at step 20, a key of layer 1 the model still sees (within its window) and keeps later
    window = geo.windows[1] or T
    early[1, 0, max(i for i in range(21) if drops[1, 0, i] > 21 and i > 20 - window)] = 20
    assert np.abs(replayed(lm, ids, OpenLoop(early))[1] - want).max() > 100 * TOL


@pytest.mark.parametrize("rule", ["TOVA", "H2O"])
def test_closed_loop_tova_and_h2o_equal_a_decode_of_their_rule(tiny, rule):
    import policies
    from realtrace.quality.replay import ClosedLoop
    from realtrace.quality.schedule import drop_from_evictions

    arch, lm, ids = tiny
    geo = lm.geometry
    k = 9
    inside = RuleInside(rule, k)
    want_logits = DropDecoder(lm.torch, geo.kv_heads, geo.group, inside.decide, inside.observe).run(lm, ids)
    want = {key: drop_from_evictions(ev, T) for key, ev in inside.evictions.items()}
    assert len(want) == geo.traces
    plan = ClosedLoop(policies.resolve(rule), k)
    _, got = replayed(lm, ids, plan)
    assert plan.compiled_layers == geo.layers
    assert all(np.array_equal(plan.drops[layer][g], want[(layer, g)]) for layer in range(geo.layers)
               for g in range(geo.kv_heads))
    assert np.abs(got - want_logits).max() < TOL
    if any(WINDOWS[arch]):  # the windows ignored: the rule sees other weights and evicts otherwise
        broken = ClosedLoop(policies.resolve(rule), k)
        replayed(lm, ids, broken, windows=(None,) * geo.layers)
        assert any(not np.array_equal(broken.drops[layer][g], want[(layer, g)]) for layer in range(geo.layers)
                   for g in range(geo.kv_heads))


def test_the_optimum_is_lazy_and_free_outside_the_window(tiny):
    """The lazy optimum holds min(t + 1, K) positions on every head and is exact on complete rows (gap 0).  On a
    sliding-window layer the rows give no weight outside the window, so at K >= W the optimum is charged nothing
    there and displaces nothing in the model; ignoring the window (the rows of full attention) it would be."""
    from realtrace.quality.exact import head_rows
    from realtrace.quality.replay import OpenLoop
    from realtrace.quality.run import Config, PromptIds, _Reference, _schedule
    from realtrace.quality.schedule import resident_counts, resident_mask

    arch, lm, ids = tiny
    geo = lm.geometry
    ref = _Reference(lm, PromptIds("tiny", "test", tuple(ids), T - 4, ""), (4, 9), [])
    cfg = Config("opt", "OPT", "open", "OPT")
    for k in (4, 9):
        drops, _, gap = _schedule(ref, cfg, k, 0, None, None, {})
        want = np.minimum(np.arange(T) + 1, k)
        assert all(np.array_equal(resident_counts(d), want) for d in drops.reshape(-1, T))
        assert np.abs(gap).max() < 1e-9
        pass_ = replayed(lm, ids, OpenLoop(drops))[0]
        for layer, window in enumerate(geo.windows):
            for g in range(geo.kv_heads):
                rows = ref.rows(layer, g).numpy()
                lost = float((rows * ~resident_mask(drops[layer, g])).sum())
                if window is not None and k >= window:
                    assert lost == 0.0 and pass_.record.displaced[layer, g].max() < 1e-6
                    assert np.all(np.tril(rows, -window) == 0.0)
                    query, key, _ = ref.qkv[layer]
                    unwindowed = head_rows(lm.torch, query, key, g, ref.scaling).numpy()
                    assert float((unwindowed * ~resident_mask(drops[layer, g])).sum()) > 1e-3
                else:
                    assert lost > 0.0


def test_a_budget_on_a_sliding_layer_stores_at_most_min_k_w(tiny):
    """What a closed-loop H2O keeps on a sliding-window layer at K > W: its resident set holds K positions, of which
    the model can see, and an implementation must store, at most W -- min(K, W) -- at every step."""
    import policies
    from realtrace.quality.replay import ClosedLoop

    arch, lm, ids = tiny
    geo = lm.geometry
    k = 10
    plan = ClosedLoop(policies.resolve("H2O"), k)
    replayed(lm, ids, plan)
    t, i = np.arange(T)[:, None], np.arange(T)[None, :]
    for layer, window in enumerate(geo.windows):
        for g in range(geo.kv_heads):
            resident = (i <= t) & (t < plan.drops[layer][g][None, :])
            assert resident.sum(axis=1).max() == k
            visible = resident & ((i > t - window) if window else True)
            assert visible.sum(axis=1).max() == min(k, window or k)


def test_quality_runs_on_a_model_directory_and_names_it(tiny, tmp_path):
    """``quality --model DIR``: the result names the directory, its digest and geometry; the run's means are over
    the model's own layer groups."""
    from paper_check.cli import main
    from realtrace.model import weights_digest

    arch, lm, ids = tiny
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"name": "p", "text": " ".join(f"w{i}" for i in ids[:30]), "answer": " w1"}) + "\n")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["quality", "TOVA", "--budget", "8", "--model", str(lm.source.path), "--prompts-file",
                     str(prompts), "--workers", "0", "--no-cache", "--json"]) == 0
    res = json.loads(out.getvalue())
    m = res["model"]
    assert m["kind"] == "directory" and m["file"] == "model" and m["sha256"] == weights_digest(lm.source.path)
    assert (m["layers"], m["kv_heads"], m["device"], m["dtype"]) == (3, KV_HEADS[arch], "cpu", "float32")
    tova = next(r for r in res["runs"] if r["config"] == "TOVA")
    assert set(tova["groups"]) == {"early", "middle", "late"}


def test_unsupported_models_are_one_line_before_any_weight(tmp_path):
    """A missing path, a text file, a directory without config.json, an encoder-only (BERT) and an encoder-decoder
    (T5) configuration, a soft-capped one (Gemma 2): one line naming --model, exit 2 (the configurations have no
    weights at all: nothing could be loaded)."""
    from transformers import BertConfig, Gemma2Config, T5Config

    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    cases = [(tmp_path / "no" / "such", "no such file or directory"), (text, "neither a GGUF file"),
             (tmp_path, "without config.json")]
    for name, cfg in (("bert", BertConfig()), ("t5", T5Config()), ("gemma2", Gemma2Config())):
        cfg.save_pretrained(tmp_path / name)
        cases.append((tmp_path / name, {"bert": "not a decoder-only", "t5": "encoder-decoder",
                                        "gemma2": "soft-caps"}[name]))
    for path, needle in cases:
        code, out, err = run_module("paper_check", "quality", "TOVA", "--budget", "8", "--model", str(path),
                                    "--workers", "0", "--no-cache")
        assert is_one_line_error(code, err, needle), (path, code, err)
        assert f"--model {path}" in err and out == ""


def test_cuda_is_one_line():
    """Without CUDA (here on any machine: no device is visible to the process): one line, exit 2, before any
    weight (``tests/test_model_device.py`` checks that it is accepted where CUDA is available)."""
    import os

    code, out, err = run_module("paper_check", "quality", "TOVA", "--budget", "8", "--device", "cuda", "--workers",
                                "0", "--no-cache", env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert is_one_line_error(code, err, "--device cuda: CUDA is not available here"), (code, err)
    assert out == ""


def test_the_capture_of_a_model_directory_is_its_own_attention(tiny, tmp_path):
    """``capture --model DIR``: every KV head's rows are the mean of its query heads' rows of the model's own
    ``output_attentions`` (eager, with its own causal and sliding-window masks), renormalised, cut to the top 4;
    the manifest records the model's geometry."""
    from realtrace import load_traceset
    from realtrace.capture import capture

    arch, lm, ids = tiny
    geo = lm.geometry
    prompt = tmp_path / "p.txt"
    prompt.write_text(" ".join(f"w{i}" for i in ids[:24]))
    ts = load_traceset(capture(tmp_path / "ts", tokens=4, prompt=str(prompt), layers="all", top=4, install=False,
                               quiet=True, model=str(lm.source.path)))
    assert ts.meta["model"]["layers"] == geo.layers and ts.meta["model"]["kv_heads"] == geo.kv_heads
    assert len(ts.traces) == geo.traces
    with lm.torch.no_grad():
        att = lm.model(lm.torch.tensor([ts.meta["tokens"]]), output_attentions=True).attentions
    for layer in range(geo.layers):
        for g in range(geo.kv_heads):
            dense = att[layer][0, g * geo.group:(g + 1) * geo.group].double().mean(dim=0).numpy()
            tr = ts.traces[f"L{layer:02d}_kv{g}"]
            for t in range(ts.T):
                idx, w = tr.row(t)
                row = dense[t, : t + 1] / dense[t, : t + 1].sum()
                assert np.allclose(w, row[idx], atol=1e-6)
                assert w.min() >= np.sort(row)[::-1][idx.size - 1] - 1e-6


def test_a_model_that_declares_a_bos_begins_every_sequence_with_it(tmp_path):
    """Gemma reads a sequence without its BOS token as noise (its full cache answered ``needle-400-d10`` wrong
    without it, right with it), so a model whose tokenizer declares ``add_bos_token`` gets its BOS before every
    prompt, and the capture's trace set begins with it; the registered models declare it themselves (Gemma 3
    yes, SmolLM2 no: its committed results were computed without)."""
    from realtrace import load_traceset
    from realtrace.capture import capture
    from realtrace.model import load_model, resolve_model
    from realtrace.tokenizer import sequence_start
    from realtrace.quality.inputs import tokenize_prompts
    from tests.tiny_models import word_tokenizer

    directory = save_tiny_model(tmp_path / "model", "llama", seed=11)
    tok = word_tokenizer()
    tok.bos_token = "w0"
    assert sequence_start(resolve_model(str(directory)), tok) == ()  # its tokenizer_config declares nothing
    plain = tokenize_prompts(["kv-24-12"], tok)[0]
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps({**config, "add_bos_token": True, "bos_token": "w0"}))
    lm = load_model(install=False, threads=1, model=str(directory))
    assert lm.start == sequence_start(lm.source, tok) == (0,)
    first = tokenize_prompts(["kv-24-12"], lm.tokenizer, lm.start)[0]
    assert first.ids == (0, *plain.ids) and first.n_prompt == plain.n_prompt + 1 and first.answer == plain.answer
    prompt = tmp_path / "p.txt"
    prompt.write_text("w5 w6 w7 w8")
    ts = load_traceset(capture(tmp_path / "ts", tokens=2, prompt=str(prompt), layers="all", top=4, install=False,
                               quiet=True, model=str(directory)))
    assert ts.meta["tokens"][:5] == [0, 5, 6, 7, 8] and ts.segments["start"] == (0, 1)
    assert sequence_start(resolve_model("gemma3-270m"), tok) == (0,)
    assert sequence_start(resolve_model("smollm2-135m"), tok) == ()


def test_a_press_kvpress_cannot_apply_is_refused_in_one_line(tmp_path):
    """ExpectedAttention reads the model's one rotary embedding; Gemma 3 has one per attention type, and kvpress
    fails inside its forward pass.  ``quality`` refuses it in one line, exit 2, from the configuration (before the
    model is loaded); on Llama, with a single rotary embedding, the same press runs."""
    pytest.importorskip("kvpress", reason="the press bridge needs the [kvpress] extra")
    from realtrace.model import load_model
    from realtrace.press.registry import check_press_applies, press_spec
    from realtrace.quality.cache import Store, press_drops
    from realtrace.quality.inputs import PromptIds

    gemma, llama = (save_tiny_model(tmp_path / arch, arch, seed=11) for arch in ("gemma3", "llama"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"name": "p", "text": " ".join(f"w{i}" for i in range(30)), "answer": " w1"}))
    code, out, err = run_module("paper_check", "quality", "press:ExpectedAttention", "--budget", "8", "--model",
                                str(gemma), "--prompts-file", str(prompts), "--workers", "0", "--no-cache")
    assert is_one_line_error(code, err, "press ExpectedAttention: kvpress cannot apply it"), (code, err)
    assert out == ""
    ids = tuple(int(x) for x in np.random.default_rng(5).integers(0, 95, T))
    prompt = PromptIds("p", "test", ids, T - 4, "")
    for directory, applies in ((llama, True), (gemma, False)):
        lm = load_model(install=False, threads=1, model=str(directory))
        assert lm.geometry.rope_per_type is not applies
        if applies:
            check_press_applies(press_spec("ExpectedAttention"), lm.geometry, str(directory))
            drops, _ = press_drops(lm, prompt, (8,), ["ExpectedAttention"], Store(None))
            assert ((drops["ExpectedAttention@8"] < T).sum(axis=2) == T - 4 - 8).all()
        else:  # what the refusal spares the user: kvpress failing inside the forward pass
            with pytest.raises(AttributeError, match="inv_freq"):
                press_drops(lm, prompt, (8,), ["ExpectedAttention"], Store(None))
