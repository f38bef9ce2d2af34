"""Complete-row press charging on the real model (issue 27 item 3; needs the [real,kvpress] extras and the model
wheel, skipped with the reason otherwise; CI installs them, .ci/run).  A short trace set (48 tokens of the committed
prompt, 3 layers) is built here from the model's own ``output_attentions``; the bridge charges TOVA on the complete
rows it recomputes, and each trace's regret and optimum are recomputed independently from those attentions."""

from __future__ import annotations

import numpy as np
import pytest

from kvcore.errors import KVToolkitError
from kvcore.optima import nm_opt
from realtrace import COMMITTED, load_traceset
from realtrace.press.eval import charged_trace
from realtrace.traceset import TraceSet
from tests.test_press_bridge import needs_extras
from tests.test_press_rows import complete_trace

T_SHORT, N_PROMPT, LAYERS, TOP = 48, 40, (0, 14, 29), 4


@pytest.fixture(scope="module")
def model():
    needs_extras()
    from realtrace.press.run import get_model

    return get_model("eager")


@pytest.fixture(scope="module")
def short(model):
    """``(ids, {(layer, KV head): complete rows})``: the head-mean attention of every KV head, from transformers' own
    eager attention weights of one plain forward (not the bridge's full-cache pass), renormalised in float64."""
    ids = load_traceset(COMMITTED).meta["tokens"][:T_SHORT]
    torch = model.torch
    with torch.no_grad():
        att = model.model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
    rows = {}
    for layer in LAYERS:
        w = att[layer][0].to(torch.float64).numpy()  # (query heads, T, T)
        rep = w.shape[0] // 3
        for g in range(3):
            a = w[g * rep:(g + 1) * rep].mean(axis=0)
            rows[(layer, g)] = a / a.sum(axis=1, keepdims=True)
    return ids, rows


def traceset(short, source: str, shift: float = 0.0) -> TraceSet:
    """The short set with ``TOP`` stored entries per row (the capture's rule); ``shift`` moves one stored weight of
    the last row of every trace (and its residual the other way), so the stored rows are not the model's."""
    from realtrace.capture import sparsify_rows

    ids, rows = short
    torch = pytest.importorskip("torch")
    traces, layers, heads = {}, {}, {}
    for (layer, g), a in rows.items():
        tr = sparsify_rows(torch.from_numpy(a), TOP, f"{source}/L{layer:02d}_kv{g}")
        if shift:
            w, r = tr.weights.copy(), tr.residual.copy()
            w[-1] += shift
            r[-1] -= shift
            tr = type(tr)(tr.indptr, tr.indices, w, r, tr.source)
        name = f"L{layer:02d}_kv{g}"
        traces[name], layers[name], heads[name] = tr, layer, f"kv{g}"
    return TraceSet(traces, layers, heads, {"continuation": (N_PROMPT, T_SHORT)}, {"tokens": list(ids)}, source)


def test_complete_row_regret_is_the_models_attention_and_nothing_is_unattributed(model, short):
    """TOVA at ratio 0.5 (keeps 20 of 40 prompt tokens): unattributed is exactly 0 on every trace; each trace's
    press regret equals the drop schedule charged on the model's own attention weights, and its optimum the exact
    optimum of those rows; charged on the stored top-4 rows instead, the press's regret brackets the complete one."""
    import kvpress

    from realtrace.press.recorder import run_press
    from realtrace.press.run import press_traceset
    from realtrace.press.schedule import replay

    ids, rows = short
    ts = traceset(short, "short")
    res = press_traceset("TOVA", ts, ratio=0.5, answer=False)
    assert res["rows"] == "complete" and res["total"]["unattributed"] == 0.0
    assert res["max_stored_deviation"] < 1e-5
    record = run_press(model, kvpress.TOVAPress(compression_ratio=0.5), ids, N_PROMPT)[0]
    t = np.arange(T_SHORT)
    for row in res["traces"]:
        layer, g = row["layer"], int(row["head"][2:])
        a = rows[(layer, g)]
        drop = replay(record, layer, g).drop
        gone = (drop[None, :] <= t[:, None]) & (t[:, None] >= N_PROMPT) & (t[None, :] <= t[:, None])
        assert row["unattributed"] == 0.0 and row["n_kept"] == 20
        assert row["press"] == pytest.approx(a[gone].sum(), rel=1e-5, abs=1e-6)
        opt = nm_opt(charged_trace(complete_trace(a, "eager"), N_PROMPT), row["budget"]).cost
        assert row["opt"] == pytest.approx(opt, rel=1e-5, abs=1e-6)
        assert row["opt"] <= row["one_shot"] + 1e-9 <= row["press"] + 2e-9
    stored = press_traceset("TOVA", ts, ratio=0.5, answer=False, rows="stored")
    assert stored["max_stored_deviation"] is None and stored["total"]["unattributed"] > 1.0
    for c, s in zip(res["traces"], stored["traces"]):
        assert s["press"] - 1e-6 <= c["press"] <= s["press"] + s["unattributed"] + 1e-6
        assert s["opt"] <= c["opt"] + 1e-6


def test_a_set_that_is_not_the_models_capture_is_refused(model, short):
    from realtrace.press.run import press_traceset

    with pytest.raises(KVToolkitError, match=r"differs from the stored entries by up to 0\.001.*--rows stored"):
        press_traceset("StreamingLLM", traceset(short, "short-shifted", shift=1e-3), ratio=0.5, answer=False)
