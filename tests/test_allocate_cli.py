"""``paper_check allocate`` (and ``realtrace allocate``) through the real command line, and the LU-KV budget curve.

The curve's format and semantics were read from kvpress' ``LUKVPress`` (``kvpress/presses/lukv_press.py``;
docs/budgets.md): a float array ``[99, layers, kv_heads]`` of per-head prune ratios, row ``r - 1`` used at
global compression ratio ``r / 100``, each layer's keep counts ``(1 - p) * seq_len`` rounded so the layer keeps the
rounded sum, at least one token per head.  :func:`kvpress_keep_counts` re-states that rule so the test can check that
a layer whose heads were all captured keeps exactly the static allocation's slots.  With kvpress installed (the
``[kvpress]`` extra, which ``.ci/run`` installs) the file written by the command line is also handed to ``LUKVPress``
itself, and the press's own ``compress`` prunes each captured head down to its static slots.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from adversary._build import attention_from_rows
from realtrace import COMMITTED_NAME, load_traceset
from realtrace.allocate import allocate, head_curves, lukv_curve
from realtrace.traceset import save_traceset
from tests.command_line import is_one_line_error, run_module

T = 24


def trace(seed: int):
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(T):
        keys = rng.choice(t + 1, size=min(t + 1, 4), replace=False)
        w = rng.dirichlet(np.ones(keys.size))
        rows.append(dict(zip(keys.tolist(), w.tolist())))
    return attention_from_rows(rows, f"seed {seed}")


@pytest.fixture(scope="module")
def traceset(tmp_path_factory):
    """Three of the four KV heads of a 3-layer, 2-KV-head model: layer 0 whole, layer 1 one head, layer 2 none."""
    d = tmp_path_factory.mktemp("alloc") / "set"
    save_traceset(d, {(0, "kv0"): trace(0), (0, "kv1"): trace(1), (1, "kv1"): trace(2)}, {"all": (0, T)},
                  {"model": {"layers": 3, "kv_heads": 2}})
    return d


def kvpress_keep_counts(prune: np.ndarray, seq_len: int) -> np.ndarray:
    """LUKVPress' keep counts of one layer from its heads' prune ratios (the rule of the module docstring)."""
    ideal = np.clip(1.0 - prune.astype(np.float32), 0.0, 1.0) * seq_len
    n = ideal.size
    total = max(n, min(n * seq_len, int(np.round(ideal.sum()))))
    base = np.floor(ideal).astype(np.int64)
    rem = total - int(base.sum())
    if rem > 0:
        base[np.argsort(-(ideal - base), kind="stable")[:min(rem, n)]] += 1
    return np.clip(base, 1, seq_len)


def test_lukv_curve_shape_and_semantics(traceset):
    ts = load_traceset(traceset)
    curves = head_curves(ts)
    curve = lukv_curve(ts, curves)
    assert curve.shape == (99, 3, 2) and curve.dtype == np.float32
    names = ts.names()  # L00_kv0, L00_kv1, L01_kv1
    for r in (1, 10, 50, 90, 99):
        row = curve[r - 1]
        assert row[2].tolist() == [np.float32(r / 100)] * 2 and row[1, 0] == np.float32(r / 100)  # not captured
        k = [round((1 - float(row[layer, g])) * T) for layer, g in ((0, 0), (0, 1), (1, 1))]
        assert sum(k) == round((1 - r / 100) * T * len(names))  # the captured heads share their uniform total
        rep = allocate(ts, sum(k), curves) if sum(k) else None
        if rep is not None:
            assert k == [rep["static"]["slots"][n] for n in names]
        kept = kvpress_keep_counts(row[0], T).tolist()
        # kvpress keeps at least one token per head (and as many as heads in a layer): a zero slot becomes one
        assert kept == k[:2] if min(k[:2]) >= 1 else min(kept) == 1


def test_lukv_curve_refuses_a_set_without_kv_heads(tmp_path):
    d = tmp_path / "mean"
    save_traceset(d, {(0, "mean"): trace(3)}, {"all": (0, T)}, {"model": {"layers": 1, "kv_heads": 1}})
    code, _, err = run_module("paper_check", "allocate", "--traces", d, "--total", 4, "--lukv-curve", tmp_path / "c.npy")
    assert is_one_line_error(code, err, "KV head") and not (tmp_path / "c.npy").exists()


def test_allocate_json_through_the_command_line(traceset, tmp_path):
    out = tmp_path / "curve.npy"
    code, stdout, err = run_module("paper_check", "allocate", "--traces", traceset, "--total", 10, "--json",
                                   "--lukv-curve", out)
    assert code == 0, err
    rep = json.loads(stdout)
    assert rep["total"] == 10 and sum(rep["static"]["slots"].values()) == 10
    assert rep["uniform"]["slots"] == {"L00_kv0": 4, "L00_kv1": 3, "L01_kv1": 3}
    assert rep["dynamic"]["regret"] <= rep["static"]["regret"] <= rep["uniform"]["regret"]
    assert all(rep["order_exact"].values()) and rep["dynamic"]["certificate"]["certified"]
    assert rep["curve_certificates"]["all_certified"] and rep["marginal"]["equalized"]
    assert np.load(out).shape == (99, 3, 2) and rep["lukv_curve"]["shape"] == [99, 3, 2]


def test_lukv_press_itself_keeps_the_static_slots(traceset, tmp_path):
    """kvpress 0.5.5 loads curves only from its own URL table, so a user sets the loaded array on the press
    (``press._budget_curves = np.load(FILE)``, the attribute its loader fills); the press then checks the shape
    against the model's layers and KV heads and masks, per head, ``T - k_h`` positions at every global ratio."""
    torch = pytest.importorskip("torch", reason="the [kvpress] extra (torch, kvpress)")
    kvpress = pytest.importorskip("kvpress", reason="the [kvpress] extra")
    from types import SimpleNamespace

    out = tmp_path / "curve.npy"
    code, _, err = run_module("paper_check", "allocate", "--traces", traceset, "--total", 10, "--lukv-curve", out)
    assert code == 0, err
    curves = head_curves(load_traceset(traceset))
    model = SimpleNamespace(config=SimpleNamespace(num_hidden_layers=3, num_key_value_heads=2))
    for r in (10, 50, 90):
        press = kvpress.LUKVPress(press=kvpress.KnormPress(), compression_ratio=r / 100, sink=0, window=0)
        press._budget_curves = np.load(out)
        assert press._model_curve_shape(model) == press._budget_curves.shape[1:]
        layer0 = SimpleNamespace(layer_idx=0, config=SimpleNamespace(_attn_implementation="sdpa"))
        keys = torch.randn(1, 2, T, 8, generator=torch.Generator().manual_seed(r))
        press.compress(layer0, torch.zeros(1, T, 16), keys, keys.clone(), None, {})
        _, head, _ = layer0.masked_key_indices
        pruned = torch.bincount(head, minlength=2).tolist()
        rep = allocate(load_traceset(traceset), round((1 - r / 100) * T * 3), curves)
        static = [rep["static"]["slots"][n] for n in ("L00_kv0", "L00_kv1")]
        assert [T - p for p in pruned] == [max(k, 1) for k in static]


def test_allocate_text_on_the_committed_set():
    code, out, err = run_module("realtrace", "allocate", "--total", 24)
    assert code == 0, err
    assert out.startswith(f"trace set {COMMITTED_NAME}: 12 heads, T = 617, total budget B = 24")
    assert "exact order dynamic <= static <= uniform: True" in out and "all certified: True" in out


@pytest.mark.parametrize("args, needle", [
    (["--total", "0"], "--total"),
    (["--total", "73"], "from 1 to 3 heads x 24 steps = 72"),
    (["--total", "x"], "--total"),
    (["--traces", "/nonexistent/set", "--total", "3"], "not a trace set"),
    (["--total", "3", "--lukv-curve", "/nonexistent/dir/c.npy"], "directory does not exist"),
])
def test_bad_input_is_one_line(traceset, args, needle):
    if "--traces" not in args:
        args = ["--traces", str(traceset), *args]
    code, _, err = run_module("paper_check", "allocate", *args)
    assert is_one_line_error(code, err, needle), err


def test_help_lists_the_options():
    code, out, _ = run_module("paper_check", "allocate", "--help")
    assert code == 0 and all(o in out for o in ("--traces", "--total", "--json", "--lukv-curve"))
