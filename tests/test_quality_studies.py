"""Several quality studies of the same prompts run as one (:func:`realtrace.quality.run.evaluate_many`,
:mod:`realtrace.quality.studies`: how ``paper_check --full`` remakes the sets whose files share their prompts) give
each study's own result.  Needs the [real] extra and the model wheel (skipped with the reason otherwise)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.model_fixture import shared_model
from tests.test_quality_replay import SECRET, without_cache_status


@pytest.fixture(scope="module")
def lm():
    return shared_model()


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "p", "text": SECRET, "answer": " apple"}) + "\n"
                    + json.dumps({"name": "q", "text": SECRET + " apple. " + SECRET, "answer": " apple"}) + "\n")
    return str(path)


CONFIGURED = ["Default", {"recent": 2, "n_sinks": 1}]


def test_studies_run_as_one_give_each_studys_own_result(lm, prompts_file, monkeypatch):
    """Two studies on two prompts -- H2O at K = 5 and 6, and a configured Default with TOVA at K = 6 -- run as one
    equal each study run alone in every metric and per-step array (only the prompts' cache counts may differ),
    while each prompt's reference is made once, not once per study, and the optimum at K = 6, which both studies
    have, is replayed once (the controls that they did run as one)."""
    import realtrace.quality.run as run_mod
    from realtrace.quality.configs import parse_config

    made, replays = [], []
    reference, one_run = run_mod._Reference, run_mod._one_run
    monkeypatch.setattr(run_mod, "_Reference", lambda *a, **kw: made.append(a[1].name) or reference(*a, **kw))
    monkeypatch.setattr(run_mod, "_one_run", lambda *a: replays.append((a[2].name, a[3])) or one_run(*a))
    studies = [(["H2O"], [6, 5]), (parse_config(CONFIGURED[0], "closed", CONFIGURED[1]) + ["TOVA"], [6])]
    kw = {"workers": 0, "progress": False, "prompts_file": prompts_file, "steps": True, "no_cache": True}
    together = run_mod.evaluate_many(studies, **kw)
    assert sorted(made) == ["p", "q"]
    assert sorted(replays) == sorted(2 * [("H2O", 5), ("H2O", 6), ("OPT", 5), ("OPT", 6),
                                          ("Default(n_sinks=1, recent=2)", 6), ("TOVA", 6)])
    for (configs, budgets), many in zip(studies, together):
        alone = run_mod.evaluate(configs, budgets, **kw)
        assert without_cache_status(many) == without_cache_status(alone)
        assert [r["config"] for r in many["runs"]] == [r["config"] for r in alone["runs"]]
        for a, b in zip(alone["runs"], many["runs"]):
            for prompt, arrays in a.get("steps", {}).items():
                for q, arr in arrays.items():
                    assert np.array_equal(arr, b["steps"][prompt][q]), (a["config"], a["budget"], prompt, q)
    assert together[0]["settings"]["budgets"] == [5, 6] and together[1]["settings"]["configs"] == [
        "Default(n_sinks=1, recent=2)", "TOVA", "OPT"]


def test_write_studies_writes_what_each_command_prints(lm, prompts_file, tmp_path):
    """The spec ``paper_check --full`` runs (:mod:`realtrace.quality.studies`): one file per study, each the JSON
    that ``quality ... --json`` prints for that study alone (:func:`realtrace.quality.report.without_steps` of its
    result), the cache counts aside; a spec naming one file twice is a one-line error before anything runs."""
    from kvcore.errors import ParameterError
    from realtrace.quality.report import without_steps
    from realtrace.quality.run import evaluate, parse_config
    from realtrace.quality.studies import write_studies

    settings = {"workers": 0, "prompts_file": prompts_file, "cache_dir": str(tmp_path / "cache")}
    spec = {"settings": settings, "studies": [{"out": "a.json", "configs": [CONFIGURED], "budgets": [6]},
                                              {"out": "b.json", "configs": ["TOVA", "OPT"], "budgets": [5, 6]}]}
    paths = write_studies(json.dumps(spec), tmp_path)
    assert [p.name for p in paths] == ["a.json", "b.json"]
    for path, (configs, budgets) in zip(paths, [(parse_config("Default", "closed", CONFIGURED[1]), [6]),
                                               (["TOVA", "OPT"], [5, 6])]):
        alone = json.loads(json.dumps(without_steps(evaluate(configs, budgets, progress=False, **settings)),
                                      indent=1))
        assert without_cache_status(json.loads(path.read_text())) == without_cache_status(alone)
    twice = {**spec, "studies": [spec["studies"][0], spec["studies"][0]]}
    with pytest.raises(ParameterError, match="distinct file name"):
        write_studies(twice, tmp_path / "never")
    assert not (tmp_path / "never").exists()
