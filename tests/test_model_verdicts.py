"""A claim decided on the model's output is decided on every model with committed results, and one verdict comes from
the readings by the rule VERDICTS.md declares ("Several models"): the worst checkable reading; an effect shown on some
models only is model-dependent; a reading that fails its own positive control takes no part."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import theorems.quality_inputs as QI
from realtrace import DATA_MODEL, current_model, input_dir, model_data_dir, reading_model
from theorems.claims import Claim, Computed, Context, Decision
from theorems.claims.registry import combine_readings, decide_models
from theorems.profile import PROFILES
from theorems.tables import cached


def _d(verdict: str, correction: str | None = None) -> Decision:
    return Decision(verdict, f"the {verdict} finding", correction)


@pytest.mark.parametrize("readings,want,says", [
    ({"a": "holds", "b": "holds"}, "holds", "holds on every model measured (a, b)"),
    ({"a": "holds", "b": "not-reproduced"}, "not-reproduced", "model-dependent: holds on a, not-reproduced on b"),
    ({"a": "not-reproduced", "b": "holds-with-correction"}, "not-reproduced",
     "model-dependent: holds on b, not-reproduced on a"),
    ({"a": "refuted", "b": "holds"}, "refuted",
     "refuted on a (its finding below names the counterexample), holds on b"),
    ({"a": "holds", "b": "refuted", "c": "not-reproduced"}, "refuted", "refuted on b"),
    ({"a": "holds", "b": "holds-with-correction"}, "holds-with-correction", "holds-with-correction on b"),
    ({"a": "holds", "b": "not-checkable"}, "holds", "not checkable on b, which takes no part"),
    ({"a": "not-reproduced", "b": "not-checkable"}, "not-reproduced", "not-reproduced on every model measured (a)"),
    ({"a": "not-checkable", "b": "not-checkable"}, "not-checkable", "Not checkable on any of the 2 models"),
])
def test_the_combined_verdict_is_the_worst_checkable_reading(readings, want, says):
    d = combine_readings({m: _d(v, "fix it" if v == "holds-with-correction" else None) for m, v in readings.items()})
    assert d.verdict == want and says in d.summary, d.summary
    for m, v in readings.items():  # every model's own verdict and finding are in the summary
        assert f"[{m}: {v}] the {v} finding" in d.summary


def test_a_correction_names_the_model_it_applies_to_and_readings_keep_their_model():
    d = combine_readings({"a": Decision("holds", "fine", None, {"strict": {"verdict": "holds", "finding": "x"}}),
                          "b": Decision("holds-with-correction", "almost", "use 3, not 2",
                                        {"strict": {"verdict": "refuted", "finding": "y"}})})
    assert d.correction == "[b] use 3, not 2"
    assert d.readings == {"strict [a]": {"verdict": "holds", "finding": "x"},
                          "strict [b]": {"verdict": "refuted", "finding": "y"}}


OTHER = "tiny-other-model"
FAKE_CLAIM = "fake-model-backed-claim"


def _answers() -> float:
    """The fake claim's experiment: a number read from the input set of the model being read."""
    return float((input_dir("quality_fake") / "answer.txt").read_text())


def _table(seed: int) -> dict:
    return {"model": current_model()}


@pytest.fixture
def fake_claim(tmp_path, monkeypatch):
    """A model-backed claim over a fake input set committed for the default model and for OTHER (data in
    ``tmp_path``): its compute reads the set and a cached table, its decide says holds above 1."""
    monkeypatch.setattr("realtrace.DATA_DIR", tmp_path)
    for model, answer in ((DATA_MODEL, "2.5"), (OTHER, "0.5")):
        (model_data_dir(model) / "quality_fake").mkdir(parents=True)
        (model_data_dir(model) / "quality_fake" / "answer.txt").write_text(answer)
    monkeypatch.setattr(QI, "QUALITY_INPUTS", QI.QUALITY_INPUTS + (
        QI.QualityInput("quality_fake", (FAKE_CLAIM,), (), models=(DATA_MODEL, OTHER)),))

    def compute(ctx):
        return Computed({"answer": _answers(), "table": cached(_table, seed=1)["model"]}, {"above": 1})

    def decide(values, expected):
        """holds while ``answer`` > 1."""
        return Decision("holds" if values["answer"] > 1 else "not-reproduced", f"answer {values['answer']}")

    return Claim(FAKE_CLAIM, "test", "a fake claim", compute, decide=decide, flips={})


def test_a_model_backed_claim_is_computed_and_decided_on_every_model(fake_claim, tmp_path):
    res = fake_claim.run(Context(PROFILES["quick"], tmp_path))
    assert res.values["answer"] == 2.5 and res.values["table"] == DATA_MODEL
    # the other model's values come from its own committed set, and a cached table is that model's own
    assert res.values["per_model"] == {OTHER: {"answer": 0.5, "table": OTHER}}
    assert {m: r["verdict"] for m, r in res.models.items()} == {DATA_MODEL: "holds", OTHER: "not-reproduced"}
    assert res.verdict == "not-reproduced" and "model-dependent" in res.summary
    assert set(res.evidence["models"]) == {DATA_MODEL, OTHER}
    assert current_model() == DATA_MODEL  # the reading model is restored


def test_the_verdict_is_recomputed_from_the_values_alone(fake_claim, tmp_path):
    """decide_models gives the run's verdict from the JSON values, and moves when another model's values move."""
    res = fake_claim.run(Context(PROFILES["quick"], tmp_path))
    d, readings = decide_models(fake_claim, res.values, res.expected, DATA_MODEL)
    assert d.verdict == res.verdict and set(readings) == {DATA_MODEL, OTHER}
    fixed = dict(res.values, per_model={OTHER: {"answer": 3.0, "table": OTHER}})
    assert decide_models(fake_claim, fixed, res.expected, DATA_MODEL)[0].verdict == "holds"


def test_a_claim_without_another_models_results_is_read_on_the_default_model_only(fake_claim, tmp_path, monkeypatch):
    one = tuple(dataclasses.replace(s, models=(DATA_MODEL,)) if s.name == "quality_fake" else s
                for s in QI.QUALITY_INPUTS)
    monkeypatch.setattr(QI, "QUALITY_INPUTS", one)
    res = fake_claim.run(Context(PROFILES["quick"], tmp_path))
    assert "per_model" not in res.values and res.models is None and res.verdict == "holds"
    assert res.summary == "answer 2.5"  # unchanged: the single-model claim reads as before


def test_reading_another_model_reads_its_own_directory(tmp_path, monkeypatch):
    monkeypatch.setattr("realtrace.DATA_DIR", tmp_path)
    assert input_dir("quality_x") == tmp_path / "quality_x"
    with reading_model(OTHER):
        assert input_dir("quality_x") == tmp_path / OTHER / "quality_x"
    assert input_dir("quality_x") == tmp_path / "quality_x"
