"""The output-quality side of the Section 10 default (issue 28 item 4): the declared quality margin
(``theorems.claims.significance``, VERDICTS.md "Practical significance"), and the committed quality replay of Default
and H2O (``realtrace/data/quality_section10``) read without torch, refused when the two runs do not share their
settings or the default was not configured as Section 10 says.  No model runs here."""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import sys

import pytest

from tests.command_line import ROOT
from theorems.claims import significance
from theorems.results.recommendations import QUALITY_DIR, section10_params, section10_quality

FLOOR = math.log(1.01)


def test_the_declared_quality_margin():
    """quality margin = max(0.10 x reference, ln 1.01 nats): relative above 0.0995 nats of reference, the floor
    below it and for a negative reference; a flipped answer counts with no margin, an answer gained does not."""
    assert significance.quality_margin(2.0) == pytest.approx(0.2)
    assert significance.quality_margin(0.05) == FLOOR and significance.quality_margin(-1.0) == FLOOR
    ref = {"right": True, "dnll_answer": 2.0, "kl_stream": 0.05}
    assert significance.quality_losses(dict(ref), ref) == []
    assert significance.quality_losses(dict(ref, right=False), ref) == ["answer"]
    assert significance.quality_losses(dict(ref, dnll_answer=2.19), ref) == []
    assert significance.quality_losses(dict(ref, dnll_answer=2.21), ref) == ["dnll_answer"]
    assert significance.quality_losses(dict(ref, kl_stream=0.05 + FLOOR * 0.99), ref) == []
    assert significance.quality_losses(dict(ref, kl_stream=0.05 + FLOOR * 1.01), ref) == ["kl_stream"]
    assert significance.quality_losses(dict(ref, right=True), dict(ref, right=False)) == []


def test_the_committed_replay_pairs_default_and_h2o_with_identical_settings():
    q = section10_quality()
    assert q is not None, "no committed quality replay in realtrace/data/quality_section10"
    for k in q["budgets"]:
        assert q["configs"][f"Default K={k}"] == "Default(n_sinks=4, recent=%d)" % section10_params("Default", k)[
            "recent"]
        assert q["configs"][f"H2O K={k}"] == "H2O"
    assert q["mode"] == "closed" and "SmolLM2-135M-Instruct" in q["model"]
    for case in q["cases"].values():
        for pol in ("Default", "H2O"):
            assert set(case[pol]) == {"right", "dnll_answer", "kl_stream"}
            assert case[pol]["kl_stream"] >= 0
    assert any(c["full_cache_right"] for c in q["cases"].values())


def _copy(tmp_path, change=None):
    for f in QUALITY_DIR.glob("*_K*.json"):
        shutil.copy(f, tmp_path / f.name)
    if change:
        name, edit = change
        doc = json.loads((tmp_path / name).read_text())
        edit(doc)
        (tmp_path / name).write_text(json.dumps(doc))
    return tmp_path


def _h2o_file():
    return next(f.name for f in QUALITY_DIR.glob("H2O_K*.json"))


def _default_file():
    return next(f.name for f in QUALITY_DIR.glob("Default_K*.json"))


def test_an_empty_directory_is_no_replay(tmp_path):
    assert section10_quality(tmp_path) is None


def test_a_copy_reads_the_same(tmp_path):
    a, b = section10_quality(), section10_quality(_copy(tmp_path))
    assert a["cases"] == b["cases"] and a["configs"] == b["configs"]


@pytest.mark.parametrize("what, change, needle", [
    ("another seed", lambda doc: doc["settings"].update(seed=1), "settings differ"),
    ("another prompt set", lambda doc: doc["settings"].update(prompts=doc["settings"]["prompts"][:1]),
     "settings differ"),
    ("open loop", lambda doc: doc["settings"].update(mode="open"), "settings differ"),
    ("another model", lambda doc: doc["model"].update(torch="0.0"), "model"),
])
def test_runs_with_different_settings_are_refused(tmp_path, what, change, needle):
    with pytest.raises(ValueError, match=needle):
        section10_quality(_copy(tmp_path, (_h2o_file(), change)))


def test_a_default_not_configured_as_section_10_is_refused(tmp_path):
    """The registered Default (recency floor 256) at K = 128 is a sliding window, not the Section 10 default."""
    def unconfigure(doc):
        for r in doc["runs"]:
            if r["kind"] == "policy":
                r["config"] = "Default"

    with pytest.raises(ValueError, match="expected one policy run Default"):
        section10_quality(_copy(tmp_path, (_default_file(), unconfigure)))


def test_a_missing_h2o_run_is_refused(tmp_path):
    _copy(tmp_path)
    (tmp_path / _h2o_file()).unlink()
    with pytest.raises(ValueError, match="missing"):
        section10_quality(tmp_path)


def test_the_claim_reads_the_replay_without_torch():
    """``paper_check claim default-policy`` decides the quality reading from the committed JSON with torch and
    transformers unimportable."""
    code = ("import sys; sys.modules['torch'] = sys.modules['transformers'] = sys.modules['kvpress'] = None; "
            "from theorems.results.recommendations import section10_quality; q = section10_quality(); "
            "print(len(q['cases']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == len(section10_quality()["cases"])


def test_the_decision_reads_the_quality_reading():
    """From the committed values with Default's output set to H2O's on every prompt (no quality loss: the regret
    reading decides), one flipped answer on a counted prompt, or one stream KL just beyond the quality margin,
    refutes the claim; just inside the margin it does not."""
    from paper_check.report import load_ledger
    from theorems.claims import CLAIMS

    entry, decide = load_ledger()["default-policy"], CLAIMS["default-policy"].decide
    values = copy.deepcopy(entry["values"])
    cases = values["quality_replay"]["cases"]
    for c in cases.values():
        c["Default"] = dict(c["H2O"])
    level = decide(copy.deepcopy(values), entry["expected"]).verdict
    assert level in ("holds", "holds-with-correction")
    first = next(n for n, c in cases.items() if c["full_cache_right"])
    h2o = cases[first]["H2O"]
    for change, want in (({"right": False} if h2o["right"] else None, "refuted"),
                         ({"kl_stream": h2o["kl_stream"] + 1.01 * significance.quality_margin(h2o["kl_stream"])},
                          "refuted"),
                         ({"kl_stream": h2o["kl_stream"] + 0.99 * significance.quality_margin(h2o["kl_stream"])},
                          level)):
        if change is None:
            continue
        edited = copy.deepcopy(values)
        edited["quality_replay"]["cases"][first]["Default"].update(change)
        assert decide(edited, entry["expected"]).verdict == want, change


def test_the_summary_counts_h2o_worse_and_default_separating_apart():
    """With the output neutral, one counted case where Default is better by the stream KL alone and one where it is
    better by the answer dNLL and worse by the stream KL: H2O is measurably worse on 2, Default separates (better by
    some measure, worse by none) on 1, is worse on 1 -- in the summary and in the recorded counts."""
    from theorems.claims import CLAIMS
    from theorems.claims.recommendations import _quality_counts

    values, expected = _neutral("default-policy")
    cases = values["quality_replay"]["cases"]
    better, mixed = [n for n, c in cases.items() if c["full_cache_right"]][:2]
    h2o = cases[better]["H2O"]
    cases[better]["Default"]["kl_stream"] = h2o["kl_stream"] - 2 * significance.quality_margin(h2o["kl_stream"])
    h2o = cases[mixed]["H2O"]
    cases[mixed]["Default"]["dnll_answer"] = h2o["dnll_answer"] - 2 * significance.quality_margin(h2o["dnll_answer"])
    cases[mixed]["Default"]["kl_stream"] = h2o["kl_stream"] + 2 * significance.quality_margin(h2o["kl_stream"])
    counted = sum(c["full_cache_right"] for c in cases.values())
    assert _quality_counts(values["quality_replay"], values["quality_margin"]) == {
        "positive_control": counted, "default_measurably_worse": 1, "h2o_measurably_worse": 2, "default_separates": 1}
    summary = CLAIMS["default-policy"].decide(values, expected).summary
    assert f"Default is measurably worse than H2O on 1 of {counted}" in summary
    assert ("H2O measurably worse than Default on 2 (Default separating -- better by some measure, worse by none -- "
            "on 1)") in summary


def _neutral(cid: str) -> tuple[dict, dict]:
    """The committed values of ``cid`` with Default's output in the replay set to H2O's (no quality loss)."""
    from paper_check.report import load_ledger

    entry = load_ledger()[cid]
    values = copy.deepcopy(entry["values"])
    for c in values["quality_replay"]["cases"].values():
        c["Default"] = dict(c["H2O"])
    return values, entry["expected"]


def test_with_the_output_neutral_the_regret_side_still_refutes_default_policy():
    """The regret readings still decide where the output shows no loss: a loss to H2O beyond the margin on every
    benign trace, or the margin set to zero (the strict reading: the persistent trace's +12.1), refutes."""
    from theorems.claims import CLAIMS

    decide = CLAIMS["default-policy"].decide
    values, expected = _neutral("default-policy")
    assert decide(copy.deepcopy(values), expected).verdict == "holds-with-correction"
    lost = copy.deepcopy(values)
    for c in lost["workloads"].values():
        if c["kind"] == "benign":
            c["regret"]["Default"] = c["regret"]["H2O"] * 1.5 + 0.02 * c["steps"]
    assert decide(lost, expected).verdict == "refuted"
    strict = dict(copy.deepcopy(values), margin={"relative": 0.0, "per_step": 0.0})
    assert decide(strict, expected).verdict == "refuted"


def test_with_the_output_neutral_the_suffix_still_refutes_gda_validation():
    """gda-validation: with no quality loss on the benign prompts and the shifted window separated, the default no
    better than H2O on any synthetic suffix refutes; a quality loss on at most half of the counted prompts is a
    correction, on more than half a refutation."""
    from theorems.claims import CLAIMS

    from theorems.claims.recommendations import _shift_separated

    decide = CLAIMS["gda-validation"].decide
    values, expected = _neutral("gda-validation")
    values = _shift_separated(values)  # the shifted window out of the way: the suffix and benign sides decide
    assert decide(copy.deepcopy(values), expected).verdict == "holds-with-correction"
    flat = copy.deepcopy(values)
    for c in flat["cases"].values():
        c["gap_per_step"]["Default suffix"] = c["gap_per_step"]["H2O suffix"]
    assert decide(flat, expected).verdict == "refuted"
    counted = [n for n, c in values["quality_replay"]["cases"].items() if c["full_cache_right"]]
    for n_lost, want in ((1, "holds-with-correction"), (len(counted) // 2 + 1, "refuted")):
        edited = copy.deepcopy(values)
        for n in counted[:n_lost]:
            h2o = edited["quality_replay"]["cases"][n]["H2O"]
            edited["quality_replay"]["cases"][n]["Default"]["kl_stream"] = (
                h2o["kl_stream"] + 1.01 * significance.quality_margin(h2o["kl_stream"]))
        assert decide(edited, expected).verdict == want, n_lost
