"""The capture: argument checks always; the sparsifier with torch; a tiny real capture (model load ~20 s: slow)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from kvcore.errors import ParameterError
from kvcore.traces import ROW_SUM_TOL
from realtrace import capture as cap


def test_layer_spec_parsing():
    assert cap.parse_layers("0,9, 19,29") == [0, 9, 19, 29]
    assert cap.parse_layers("2-4,3") == [2, 3, 4]
    assert cap.parse_layers("all") == list(range(30))
    with pytest.raises(ParameterError, match="--layers '30'"):
        cap.parse_layers("30")
    with pytest.raises(ParameterError, match="'x' is not a layer"):
        cap.parse_layers("1,x")


def test_bad_arguments_exit_2_before_loading_anything(tmp_path, capsys):
    assert cap.main(["--tokens", "-1", "--out", str(tmp_path / "o")]) == 2
    assert "--tokens -1" in capsys.readouterr().err
    assert cap.main(["--tokens", "2", "--prompt", str(tmp_path / "none.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert cap.main(["--tokens", "2", "--out", str(tmp_path / "full")]) == 2
    assert "new or empty directory" in capsys.readouterr().err


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
