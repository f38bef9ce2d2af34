"""Quality floors, working sets and adaptive budgets (claims ``quality-floor-working-set``,
``adaptive-budget-quality``, ``long-range-floor``; paper §7-§8, §11): the measure against a plain reference, the
floor and allocation rules against their definitions, the committed sweep read without torch, and (``--runslow``
with the ``[real]`` extra) the committed numbers recomputed in the model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.command_line import ROOT
from theorems.results import workingset as W


def _rows(T: int, seed: int, concentration: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.zeros((T, T))
    for t in range(T):
        a[t, :t + 1] = rng.dirichlet(np.full(t + 1, concentration))
    return a


def _plain_working_set(a: np.ndarray, level: float, window: int) -> int:
    """The definition, row by row: the tokens heavy in some row of ``[t - window, t - 1]``, at its largest."""
    best = 0
    for t in range(1, a.shape[0]):
        best = max(best, int((a[max(0, t - window):t] >= level).any(axis=0).sum()))
    return best


@given(st.integers(2, 40), st.integers(0, 10 ** 6), st.sampled_from([0.05, 0.3, 2.0]),
       st.sampled_from([0.01, 0.05, 0.2]), st.integers(1, 12))
def test_head_working_set_is_the_definition(T, seed, concentration, level, window):
    a = _rows(T, seed, concentration)
    assert W.head_working_set(a, level, window) == _plain_working_set(a, level, window)


def test_planted_control_has_the_working_sets_worked_out_by_hand():
    """Near: the sink, and the ``local`` tokens before each of ``WINDOW`` rows plus the row itself: 1 + W + local.
    Long-range: the revisited facts are heavy in every window, ``facts`` more."""
    c = W.planted_heads(96, local=8, facts=8, every=4)
    assert (c["near"], c["long_range"]) == (1 + W.WINDOW + 8, 1 + W.WINDOW + 8 + 8)


def _point(right: bool, kl: float) -> dict:
    return {"right": right, "kl_answer": kl}


def test_floor_is_the_smallest_budget_from_which_every_larger_one_passes():
    ok, bad = _point(True, 0.01), _point(True, 0.5)
    assert W.floor({16: ok, 32: bad, 64: ok, 128: ok, 256: ok}) == 64
    assert W.floor({16: ok, 32: ok, 64: ok, 128: ok, 256: ok}) == 16
    assert W.floor({16: ok, 32: ok, 64: ok, 128: ok, 256: _point(False, 0.0)}) is None
    assert W.passes(_point(True, W.KL_PASS)) and not W.passes(_point(True, W.KL_PASS + 1e-9))


@given(st.lists(st.floats(1, 300), min_size=1, max_size=8), st.sampled_from(W.FIXED))
def test_adaptive_budgets_are_the_largest_feasible_scale(ws_list, fixed):
    """Against a plain scan over a fine grid of scales: the same budgets, within the total, ordered like the
    working sets."""
    ws = {f"p{i}": w for i, w in enumerate(ws_list)}
    got = W.adaptive_budgets(ws, fixed)
    assert sum(got.values()) <= len(ws) * fixed
    order = sorted(ws, key=ws.get)
    assert [got[p] for p in order] == sorted(got.values())
    plain = {p: W.GRID[0] for p in ws}
    for c in sorted({g / w for g in W.GRID for w in ws.values()} | set(np.linspace(0, 20, 401))):
        b = {p: min([g for g in W.GRID if g >= c * w - 1e-9] or [W.GRID[-1]]) for p, w in ws.items()}
        if sum(b.values()) <= len(ws) * fixed and sum(b.values()) >= sum(plain.values()):
            plain = b
    assert sum(got.values()) == sum(plain.values())


def test_beats_needs_more_passing_or_a_kl_gain_beyond_the_margin():
    f = {"passing": 3, "mean_kl_answer": 1.0}
    assert W.beats({"passing": 4, "mean_kl_answer": 5.0}, f)
    assert not W.beats({"passing": 3, "mean_kl_answer": 0.95}, f)      # within a tenth of 1.0
    assert W.beats({"passing": 3, "mean_kl_answer": 0.85}, f)


committed = pytest.mark.skipif(W.load() is None, reason="no committed working-set sweep")


@committed
def test_every_counted_prompt_passes_the_full_cache_control_and_has_every_replay():
    t = W.committed_table()
    sweep = json.loads((W.DIRECTORY / W.SWEEP).read_text())
    right = {p["name"]: p["full_cache_right"] for p in sweep["prompts"]}
    assert t["counted"] == [q for q, ok in right.items() if ok] and t["excluded"] == [q for q, ok in right.items()
                                                                                     if not ok]
    assert {W.group(q) for q in t["counted"]} == {"sharp", "broad"}
    for pol in W.POLICIES:
        assert set(t["floors"][pol]) == set(t["counted"])


@committed
def test_the_loader_refuses_a_sweep_that_is_not_the_declared_one(tmp_path):
    for name in (W.SWEEP, W.WORKING_SETS):
        shutil.copy(W.DIRECTORY / name, tmp_path / name)
    doc = json.loads((tmp_path / W.SWEEP).read_text())
    doc["settings"]["budgets"] = [16, 32]
    (tmp_path / W.SWEEP).write_text(json.dumps(doc))
    with pytest.raises(W.DataError, match="declared grid"):
        W.load(tmp_path)


@committed
def test_the_figure_plots_the_committed_floors():
    from figures import render
    from theorems.results.overlays import workingset_overlay

    t = W.committed_table()
    plotted = render("workingset", workingset_overlay({})).plotted
    for pol, floors in t["floors"].items():
        series = plotted[f"measured/{pol}"]
        want = sorted((t["prompts"][q]["ws"], W.floor_number(f)) for q, f in floors.items())
        got = sorted(zip(series["x"], series["y"]))  # flattened: pytest.approx takes no nested tuples
        assert [v for pair in got for v in pair] == pytest.approx([v for pair in want for v in pair])
    assert plotted["measured/adaptive"]["y"] == [W.hetero_passing(t)[p]["adaptive"] for p in W.POLICIES]


@committed
def test_the_claims_read_the_committed_sweep_without_torch():
    code = ("import sys; sys.modules['torch'] = sys.modules['transformers'] = sys.modules['kvpress'] = None; "
            "from theorems.results.workingset import committed_table; print(len(committed_table()['counted']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == len(W.committed_table()["counted"])


def _hop_tables(ws_far: float, floor_far: int | None, counted=("alias-400-d10",)) -> tuple[dict, dict]:
    """A one-hop table with ``needle-400-d90`` (working set 50, every floor 32) and a two-hop table whose counted
    prompts have working set ``ws_far`` and every floor ``floor_far``."""
    one = {"prompts": {"needle-400-d90": {"ws": 50.0}}, "floors": {p: {"needle-400-d90": 32} for p in W.POLICIES}}
    two = {"prompts": {q: {"ws": ws_far} for q in counted}, "floors": {p: {q: floor_far for q in counted}
                                                                        for p in W.POLICIES},
           "counted": list(counted), "excluded": [q for q in W.HOP_PROMPTS if q not in counted], "opt_gap_max": 0.0}
    return one, two


def test_the_two_hop_reading_decides_its_pairs_by_the_three_parts():
    from theorems.claims.workingset import two_hop_reading, two_hop_statistics

    def verdict(ws_far, floor_far, counted=("alias-400-d10",)):
        return two_hop_reading(two_hop_statistics(*_hop_tables(ws_far, floor_far, counted)))["verdict"]

    assert verdict(100.0, 64) == "holds"                    # working set x2, floor x2
    assert verdict(100.0, 256) == "holds-with-correction"   # floor x8: higher, not about the ratio
    assert verdict(54.0, 64) == "not-reproduced"            # working set only 8 % larger
    assert verdict(100.0, 32) == "not-reproduced"           # floor not higher
    assert verdict(100.0, 64, counted=()) == "not-checkable"  # the full cache answers none right
    assert two_hop_reading(two_hop_statistics(_hop_tables(100.0, 64)[0], None))["verdict"] == "not-checkable"
    h = two_hop_statistics(*_hop_tables(100.0, None, ("alias-400-d10", "chain-600-d10")))
    assert [(p["far"], p["near"]) for p in h["pairs"]] == [("alias-400-d10", "needle-400-d90")]  # 600: no partner


def test_each_two_hop_prompt_is_paired_with_the_one_hop_prompt_of_its_length():
    from theorems.quality_inputs import TWO_HOP_PROMPTS

    assert TWO_HOP_PROMPTS.split(",") == list(W.HOP_PROMPTS)   # the recompute's sweep is the declared one
    assert len(W.HOP_PAIRS) == len(W.HOP_PROMPTS) == 8
    for far, near in W.HOP_PAIRS:
        assert near in W.PROMPTS and far.split("-")[1] == near.split("-")[1] and near.endswith("-d90")


hop_committed = pytest.mark.skipif(W.load(prompts=W.HOP_PROMPTS) is None, reason="no committed two-hop sweep")


@hop_committed
def test_the_committed_two_hop_pairs_are_the_counted_prompts_and_their_partners():
    from theorems.claims.workingset import two_hop_statistics

    h = W.committed_table(prompts=W.HOP_PROMPTS)
    sweep = json.loads((W.HOP_DIRECTORY / W.SWEEP).read_text())
    assert h["counted"] == [p["name"] for p in sweep["prompts"] if p["full_cache_right"]]
    stats = two_hop_statistics(W.committed_table(), h)
    assert [p["far"] for p in stats["pairs"]] == h["counted"]   # every partner is counted in the one-hop sweep
    for p in stats["pairs"]:
        assert p["ws_far"] == h["prompts"][p["far"]]["ws"] and p["floors"]["OPT"]["far"] == h["floors"]["OPT"][p["far"]]
    with pytest.raises(W.DataError, match="not the declared"):
        W.load(W.HOP_DIRECTORY)   # read as the one-hop sweep: other prompts


# ---- recomputed in the model (--runslow, [real] extra) ----------------------------------------------------------

@pytest.mark.slow
@committed
def test_committed_working_sets_recompute():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    got = W.measure(W.PROMPTS[:2] + ("kv-24-12",))
    want = json.loads((W.DIRECTORY / W.WORKING_SETS).read_text())["prompts"]
    for name, m in got["prompts"].items():
        assert m["heads"] == want[name]["heads"], name


@pytest.mark.slow
@hop_committed
def test_a_committed_two_hop_working_set_recomputes():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    got = W.measure(W.HOP_PROMPTS[:1])["prompts"]
    want = json.loads((W.HOP_DIRECTORY / W.WORKING_SETS).read_text())["prompts"]
    assert got[W.HOP_PROMPTS[0]]["heads"] == want[W.HOP_PROMPTS[0]]["heads"]


def replayed_from_the_command_line(policy: str, budget: int, prompt: str) -> tuple[dict, dict]:
    """``quality POLICY --budget K --prompts P --no-opt --no-cache --json`` as a user types it (nothing read from a
    cache: a recompute): the whole result and the policy's run."""
    p = subprocess.run([sys.executable, "-m", "paper_check", "quality", policy, "--budget", str(budget), "--prompts",
                        prompt, "--no-opt", "--no-cache", "--workers", "1", "--threads", "1", "--json"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (run,) = [r for r in doc["runs"] if r["config"] == policy]
    return doc, run


@pytest.mark.slow
@hop_committed
def test_a_committed_two_hop_replay_recomputes_through_the_command_line():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    doc, run = replayed_from_the_command_line("H2O", 64, "alias-400-d90")
    want = W.committed_table(prompts=W.HOP_PROMPTS)["replays"]["H2O"]["alias-400-d90"]["64"]
    assert doc["prompts"][0]["full_cache_right"] and run["prompts"]["alias-400-d90"]["right"] == want["right"]
    assert run["prompts"]["alias-400-d90"]["kl_answer"] == pytest.approx(want["kl_answer"], rel=1e-6, abs=1e-9)


@pytest.mark.slow
@committed
def test_a_committed_replay_recomputes_through_the_command_line():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    _, run = replayed_from_the_command_line("TOVA", 32, "kv-24-12")
    want = W.committed_table()["replays"]["TOVA"]["kv-24-12"]["32"]
    assert run["prompts"]["kv-24-12"]["right"] == want["right"]
    assert run["prompts"]["kv-24-12"]["kl_answer"] == pytest.approx(want["kl_answer"], rel=1e-6, abs=1e-9)
