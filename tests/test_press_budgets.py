"""Presses whose budgets differ across layers and KV heads (issue 31): PyramidKV (per layer), CriticalKV (uniform,
value-aware), CriticalAdaKV and AdaKV (per KV head), LU-KV (per layer and KV head from a budget curve file).

Without the model: how LU-KV's curve file is named and checked, through the command lines.  With the model (the
``[real,kvpress]`` extras, installed in CI): on one prompt at K = 128, what the bridge records each press keeping,
against each press's budget rule restated here from kvpress 0.5.5's source, and the totals over the 90 heads."""

from __future__ import annotations

import numpy as np
import pytest

from kvcore.errors import ParameterError
from realtrace.press.registry import load_lukv_curve, press_spec
from tests.command_line import is_one_line_error, run_module
from tests.model_fixture import REAL, shared_model

L, H = 30, 3


def graded_curve() -> np.ndarray:
    """A valid curve whose three KV heads prune differently at every ratio: head 1 the global ratio ``r``, heads 0
    and 2 half of ``min(r, 1 - r)`` less and more."""
    r = np.arange(1, 100, dtype=np.float64)[:, None, None] / 100
    shift = 0.5 * np.minimum(r, 1 - r) * (np.arange(H) - 1)[None, None, :]
    return np.broadcast_to(r + shift, (99, L, H)).astype(np.float32)


@pytest.fixture(scope="module")
def curve_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lukv") / "graded.npy"
    np.save(path, graded_curve())
    return str(path)


def test_lukv_is_named_with_its_curve_file(curve_file, tmp_path):
    spec = press_spec(f"lukv={curve_file}")
    assert spec.name == "LUKV" and spec.curve == curve_file and spec.headwise
    assert press_spec("SnapKV").curve is None
    with pytest.raises(ParameterError, match="needs its budget curve: name it LUKV=FILE"):
        press_spec("LUKV")
    with pytest.raises(ParameterError, match="SnapKV takes no file"):
        press_spec(f"SnapKV={curve_file}")
    bad = tmp_path / "negative.npy"
    np.save(bad, -graded_curve())
    with pytest.raises(ParameterError, match=r"negative.npy: entries must be prune fractions in \[0, 1\]"):
        load_lukv_curve(str(bad))


@pytest.mark.parametrize("argv", [["quality", "--budget", "128"], ["press", "--budget", "64"]],
                         ids=["quality", "press"])
def test_lukv_curve_errors_through_the_command_lines(argv, tmp_path):
    """Without a file, with a file of the wrong shape for the model (a curve of the committed 12-head test shape),
    with a file that is not an ``.npy``: one line, exit 2, naming what to pass or the file and its shape."""
    name = "press:LUKV" if argv[0] == "quality" else "LUKV"
    code, _, err = run_module("paper_check", argv[0], name, *argv[1:])
    assert is_one_line_error(code, err, "LUKV=FILE") and "allocate" in err, err
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.full((99, 3, 2), 0.5, np.float32))
    code, _, err = run_module("paper_check", argv[0], f"{name}={wrong}", *argv[1:])
    assert is_one_line_error(code, err, f"{wrong}: shape [99, 3, 2], the model needs [99, 30, 3]"), err
    text = tmp_path / "text.npy"
    text.write_text("not an array")
    code, _, err = run_module("paper_check", argv[0], f"{name}={text}", *argv[1:])
    assert is_one_line_error(code, err, f"{text}: not an .npy or .npz array file"), err


# ---------------------------------------------------------------------------------------------------------------------
# with the model

K = 128


@pytest.fixture(scope="module")
def lm():
    return shared_model(REAL + ("kvpress",), "the press bridge needs the [real,kvpress] extras")


@pytest.fixture(scope="module")
def prompt(lm):
    from realtrace.quality.run import tokenize_prompts

    return tokenize_prompts(["kv-24-12"], lm.tokenizer)[0]  # 424 prompt tokens


@pytest.fixture(scope="module")
def fanned(lm, prompt, curve_file):
    """Every press below compresses the same prefill (the quality study's fan-out); ``name@K -> drops (L, H, T)``."""
    from realtrace.press.registry import build_press, ratio_for_budget
    from realtrace.quality.prefill import trace_pass

    names = [("SnapKV", K), ("PyramidKV", K), ("PyramidKV", 64), ("CriticalKV", K), ("AdaKV", K),
             ("CriticalAdaKV", K), (f"LUKV={curve_file}", K)]
    fan = [(f"{n.split('=')[0]}@{k}", build_press(press_spec(n), ratio_for_budget(prompt.n_prompt, k), False, 1,
                                                    None), press_spec(n).headwise) for n, k in names]
    return trace_pass(lm, list(prompt.ids), prompt.n_prompt, H, None, fan)[1]


def kept_sets(drops: np.ndarray, n_prompt: int) -> list[list[set]]:
    """Per layer and KV head, the prompt positions resident at the first answer step."""
    return [[set(np.flatnonzero(drops[layer, g, :n_prompt] > n_prompt).tolist()) for g in range(H)]
            for layer in range(L)]


def counts(drops: np.ndarray, n_prompt: int) -> np.ndarray:
    return (drops[:, :, :n_prompt] > n_prompt).sum(axis=2)


def test_pyramidkv_keeps_a_linear_layer_schedule_of_snapkv_choices_at_the_same_total(fanned, prompt):
    """kvpress's PyramidKV at beta = 2: layer l keeps round(K + K/2 (1 - 2l/29)) positions (192 at layer 0, 64 at
    layer 29), every KV head the same, 90 K in total (the rounding cancels); they are SnapKV's top positions by the
    same score, so a layer keeping more than K keeps all SnapKV keeps and one keeping fewer a subset.  At K = 64 the
    smallest budget 32 is below the 64-query window and kvpress falls back to the uniform K."""
    n = prompt.n_prompt
    got = counts(fanned[f"PyramidKV@{K}"], n)
    want = np.array([round(K + K / 2 * (1 - 2 * layer / (L - 1))) for layer in range(L)])
    assert (got == want[:, None]).all(), got[:, 0].tolist()
    assert got.sum() == L * H * K and want[0] == 192 and want[-1] == 64
    pyramid, snap = kept_sets(fanned[f"PyramidKV@{K}"], n), kept_sets(fanned[f"SnapKV@{K}"], n)
    for layer in range(L):
        for g in range(H):
            assert (snap[layer][g] <= pyramid[layer][g]) if want[layer] >= K else (pyramid[layer][g] <= snap[layer][g])
    assert (counts(fanned["PyramidKV@64"], n) == 64).all()


def test_criticalkv_keeps_k_per_head_half_of_them_snapkvs(fanned, prompt):
    """CriticalKV keeps K per head; its first stage keeps SnapKV's top K/2 by the same score, the second reweights by
    ||W_o v||_1, so it shares at least K/2 positions with SnapKV in every head and differs somewhere."""
    n = prompt.n_prompt
    assert (counts(fanned[f"CriticalKV@{K}"], n) == K).all()
    crit, snap = kept_sets(fanned[f"CriticalKV@{K}"], n), kept_sets(fanned[f"SnapKV@{K}"], n)
    shared = [len(crit[layer][g] & snap[layer][g]) for layer in range(L) for g in range(H)]
    assert min(shared) >= K // 2 and min(shared) < K


def test_head_wise_presses_move_budget_between_heads_within_a_layer(fanned, prompt):
    """AdaKV and CriticalAdaKV: each layer's three KV heads keep 3 K together, each at least int(0.2 K) = 25 (the
    safeguard), the split differs across heads; both split by the same rule on SnapKV's scores, so the counts are
    the same while the kept sets are not.  Within a head AdaKV keeps that head's top positions by SnapKV's score, so
    its set and SnapKV's are nested, the larger one containing the other (recorded under the right head)."""
    n = prompt.n_prompt
    ada, crit = counts(fanned[f"AdaKV@{K}"], n), counts(fanned[f"CriticalAdaKV@{K}"], n)
    for c in (ada, crit):
        assert (c.sum(axis=1) == H * K).all() and c.min() >= int(0.2 * K) and (c.max(axis=1) > c.min(axis=1)).any()
    assert (ada == crit).all()
    ada_sets, snap = kept_sets(fanned[f"AdaKV@{K}"], n), kept_sets(fanned[f"SnapKV@{K}"], n)
    assert ada_sets != kept_sets(fanned[f"CriticalAdaKV@{K}"], n)
    for layer in range(L):
        for g in range(H):
            a, b = ada_sets[layer][g], snap[layer][g]
            assert (b <= a) if ada[layer, g] >= K else (a <= b), (layer, g)


def test_lukv_keeps_what_its_curve_row_gives_each_head(fanned, prompt):
    """LU-KV at ratio r reads row round(100 r) - 1 of the curve: head g keeps (1 - p_g) n, floors, the layer's
    rounded total restored by largest fractional parts, at least 1; the first 4 positions and the last are always
    kept.  With the graded curve the heads keep different counts, and the total is the row's, not 90 K."""
    from realtrace.press.registry import ratio_for_budget

    n = prompt.n_prompt
    row = graded_curve()[int(round(ratio_for_budget(n, K) * 100)) - 1].astype(np.float64)
    got = counts(fanned[f"LUKV@{K}"], n)
    for layer in range(L):
        ideal = (1 - row[layer]) * n
        base = np.floor(ideal).astype(int)
        extra = int(round(ideal.sum())) - base.sum()
        base[np.argsort(-(ideal - base), kind="stable")[:extra]] += 1
        assert got[layer].tolist() == np.maximum(base, 1).tolist(), layer
    assert len(set(got[0].tolist())) == H
    protected = {0, 1, 2, 3, n - 1}
    assert all(protected <= s for per in kept_sets(fanned[f"LUKV@{K}"], n) for s in per)


@pytest.mark.parametrize("name", ["PyramidKV", "CriticalKV"])
def test_fan_out_records_what_the_press_keeps_alone(lm, prompt, fanned, name):
    """The shared prefill gives each of these presses the prompt positions the press keeps when it runs alone
    (kvpress's own hooks on the model, recorded by realtrace.press.recorder.run_press; the prefill only: after
    PyramidKV the layers' caches differ in length, which eager attention cannot decode -- the press command runs it on
    the sdpa model)."""
    from realtrace.press.recorder import run_press
    from realtrace.press.registry import build_press, ratio_for_budget
    from realtrace.press.schedule import replay

    n = prompt.n_prompt
    press = build_press(press_spec(name), ratio_for_budget(n, K), False, 1, None)
    record = run_press(lm, press, list(prompt.ids)[:n], n)[0]
    alone = [[set(replay(record, layer, g).kept[0][1].tolist()) for g in range(H)] for layer in range(L)]
    assert kept_sets(fanned[f"{name}@{K}"], n) == alone
