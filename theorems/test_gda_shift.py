"""The shifted window of the Section 11 prediction (claim ``gda-validation``), on the model's output.

Without torch: the committed quality replay of the Section 10 default, H2O and TOVA on the ``shift-G-dD`` prompts
(``realtrace/data/quality_section11_shift``, ``realtrace/data/PROVENANCE.md``) is what the prompt family builds today
(the text's sha256), was run as Section 10 configures the default, and the claim's shifted side
(:func:`theorems.claims.separation.shift_side`) reacts to it.  With ``--runslow`` and the ``[real]`` extra: one of
its runs recomputed in the model equals the committed values."""

from __future__ import annotations

import copy
import hashlib

import pytest

from realtrace.quality.prompts import build
from tests.model_fixture import needs_model
from theorems.claims import significance
from theorems.claims.separation import separates_in_output, shift_side, tracking_gap
from theorems.results.recommendations import SHIFT_POLICIES, section10_params, shift_quality


@pytest.fixture(scope="module")
def replay():
    q = shift_quality()
    assert q is not None, "no committed replay in realtrace/data/quality_section11_shift"
    return q


def test_the_committed_shift_replay_is_the_prompt_family_run_as_section_10_says(replay):
    import json
    from pathlib import Path

    from realtrace import DATA_DIR
    from realtrace.quality.run import config_label

    for name in replay["files"]:
        doc = json.loads((Path(DATA_DIR) / "quality_section11_shift" / name).read_text())
        for p in doc["prompts"]:
            built = build(p["name"], len)  # the shift family does not size with the tokenizer
            assert p["sha256"] == hashlib.sha256((built.text + built.answer).encode()).hexdigest(), p["name"]
    assert replay["configs"] == {f"{pol} K={k}": config_label(pol, section10_params(pol, k))
                                 for k in replay["budgets"] for pol in SHIFT_POLICIES}
    for case in replay["cases"].values():
        assert case["prompt"].startswith("shift-")
        for pol in (*SHIFT_POLICIES, "OPT"):
            assert case[pol]["kl_stream"] >= 0 and case[pol]["regret_stream"] >= 0


def test_the_shifted_side_reacts_to_the_output(replay):
    """From the committed replay: the default's output set to H2O's separates nowhere (not-reproduced, the control
    passing); the optimum's output set to H2O's fails the positive control (not-checkable); H2O made to lose every
    answer separates wherever the default answers right and is no worse."""
    qm, m = significance.declared_quality(), significance.declared()
    side = shift_side(replay, qm, m)
    assert side["verdict"] != "not-checkable" and side["counted"]
    same = copy.deepcopy(replay)
    for c in same["cases"].values():
        c["Default"] = dict(c["H2O"])
    assert shift_side(same, qm, m)["separated"] == [] and shift_side(same, qm, m)["verdict"] == "not-reproduced"
    blind = copy.deepcopy(replay)  # the positive control: an optimum no better than H2O leaves nothing checkable
    for c in blind["cases"].values():
        c["OPT"] = dict(c["H2O"])
    assert shift_side(blind, qm, m)["verdict"] == "not-checkable"
    lost = copy.deepcopy(replay)
    for c in lost["cases"].values():
        c["H2O"]["right"] = False
    want = [n for n in side["counted"] if replay["cases"][n]["Default"]["right"]
            and not significance.quality_losses(replay["cases"][n]["Default"], replay["cases"][n]["H2O"], qm)]
    assert set(want) <= set(shift_side(lost, qm, m)["separated"])
    assert shift_side(None, qm, m)["verdict"] == "not-checkable"


def test_tracking_gaps_are_against_the_optimum_of_the_same_run(replay):
    """The tracking gap is the policy's regret minus the optimum's on the same rows; the optimum (solved on top
    rows) is above the exact one by at most its reported gap on average, so the policies' mean gap over prompts is
    at least minus that bound."""
    for k in replay["budgets"]:
        cases = [c for c in replay["cases"].values() if c["budget"] == k]
        bound = replay["opt_gap"][f"K={k}"]
        for pol in SHIFT_POLICIES:
            mean_gap = sum(tracking_gap(c, pol, "stream") for c in cases) / len(cases)
            assert mean_gap >= -bound - 1e-6, (pol, k, mean_gap, bound)
    c = next(iter(replay["cases"].values()))
    assert separates_in_output(c["H2O"], c["H2O"], significance.declared_quality()) is False


@pytest.mark.slow
def test_one_committed_run_recomputes(replay):
    """Default at the smallest budget on the first shifted prompt, recomputed in the model as committed
    (closed loop, seed 0, optimum on top-32 rows): the same answer, KL, NLL change and regret."""
    needs_model(reason="recomputing needs the [real] extra")
    from realtrace.quality.run import evaluate

    k = replay["budgets"][0]
    name = f"{next(iter(replay['cases'].values()))['prompt']} K={k}"
    case = replay["cases"][name]
    from realtrace.quality.run import parse_config

    cfg = parse_config("Default", "closed", section10_params("Default", k))
    res = evaluate(cfg, [k], [case["prompt"]], "closed", 0, None, 0, None, 1, False, progress=False, opt_top=32)
    got = {r["kind"]: r["prompts"][case["prompt"]] for r in res["runs"] if r["kind"] in ("policy", "opt")}
    for kind, pol in (("policy", "Default"), ("opt", "OPT")):
        assert got[kind]["right"] == case[pol]["right"]
        for q in ("kl_stream", "dnll_answer", "regret_stream", "regret_answer"):
            assert got[kind][q] == pytest.approx(case[pol][q], rel=1e-3, abs=1e-6), (kind, q)
