"""The optimum's blind spot (claim ``opt-blind-spot``, paper §4, §9) on the committed sweep, without torch; with
``--runslow`` and the ``[real]`` extra the saved case is replayed through the command line and gives the committed
output.

* every case's optimum is exact (complete rows, lazy) and every positive-control case is counted;
* "beats the optimum" is recomputed from the raw entries with the declared quality margin written out, and a swapped
  pair is seen;
* the saved case's files are valid schedules of the prompt at the budget (checked as ``file:PATH`` is, before any
  model loads), the two schedules differ, and their per-row outputs give the committed answer-NLL changes.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from realtrace.quality.schedule import check_schedule_file, read_schedule_file
from tests.command_line import run_module
from tests.model_fixture import needs_model
from theorems.claims import significance
from theorems.claims.blind_spot import _case, answer_losses, blind_spot_table
from theorems.results import benchmark as B

FLOOR = math.log(1.01)  # VERDICTS.md's quality margin, written out independently of significance.py


def worse(x: dict, ref: dict) -> bool:
    """``x`` measurably worse than ``ref`` on one prompt's answer: loses it, or an answer-NLL change or answer KL
    above ``ref``'s by more than max(0.1 ref, ln 1.01)."""
    return (ref["right"] and not x["right"]) or any(
        x[q] - ref[q] > max(0.1 * max(ref[q], 0), FLOOR) for q in ("dnll_answer", "kl_answer"))


def test_every_case_has_the_exact_optimum_and_the_control_decides_what_counts():
    t = blind_spot_table()
    assert t["measured"] and t["opt_exact"]
    assert abs(t["opt_gap_max"]) < 1e-9  # complete rows: the schedule's cost is the optimum's, up to rounding
    control = {(c["prompt"], c["budget"]) for c in B.cases(True).values() if c["control"]}
    assert {(c["prompt"], c["budget"]) for c in t["cases"]} == control


def test_beating_the_optimum_recomputes_from_the_raw_entries():
    t = blind_spot_table()
    for c in t["cases"]:
        opt = c["opt"]
        want = sorted(r for r, m in c["rules"].items() if worse(opt, m) and not worse(m, opt))
        assert c["beats_opt"] == want, (c["prompt"], c["budget"])
        assert c["opt_beats"] == sorted(r for r, m in c["rules"].items() if worse(m, opt) and not worse(opt, m))
    # a swapped pair is seen: the optimum's entry given to a rule it beats, and that rule's to the optimum
    c = next(c for c in t["cases"] if c["opt_beats"])
    r = c["opt_beats"][0]
    raw = {"prompt": c["prompt"], "budget": c["budget"], "tokens": c["tokens"],
           "runs": {**c["rules"], r: c["opt"], B.OPT: c["rules"][r]}}
    swapped = _case(raw, significance.declared_quality())
    assert r in swapped["beats_opt"] and r not in swapped["opt_beats"]


def test_the_margin_is_a_tenth_of_the_references_loss_or_ln_1_01():
    qm = significance.declared_quality()
    ref = {"right": False, "dnll_answer": 1.0, "kl_answer": 0.0}
    assert answer_losses(dict(ref, dnll_answer=1.105), ref, qm) == ["dnll_answer"]  # 0.105 > 0.1 x 1.0
    assert answer_losses(dict(ref, dnll_answer=1.095), ref, qm) == []
    assert answer_losses(dict(ref, kl_answer=1.01 * FLOOR), ref, qm) == ["kl_answer"]  # at 0: the floor
    assert answer_losses(dict(ref, kl_answer=0.99 * FLOOR), ref, qm) == []
    assert answer_losses(ref, dict(ref, right=True), qm) == ["answer"]


def _saved():
    s = blind_spot_table()["saved"]
    if s is None:
        pytest.skip("no rule beats the optimum: nothing to save")
    return s


def test_the_saved_case_is_two_valid_schedules_with_the_committed_outputs():
    s = _saved()
    assert set(s["files"]) == {B.OPT, s["rule"]}, "a saved case file is missing"
    case = B.cases(True)[(s["prompt"], s["budget"])]
    drops = []
    for name, rel in s["files"].items():
        path = B.BLIND_DIR.parent / rel.split("/", 2)[2]
        arrays = read_schedule_file(str(path))
        check_schedule_file(arrays, str(path), [s["prompt"]], 30, 3, s["budget"], {s["prompt"]: case["tokens"]})
        drops.append(arrays[f"drop_{s['prompt']}"])
        dnll = arrays[f"dnll_{s['prompt']}"]  # one per row 0..T-2; the answer rows start at prompt_tokens - 1
        assert dnll.shape == (case["tokens"] - 1,)
        a0 = case["tokens"] - _answer_tokens(s["prompt"]) - 1
        assert float(np.mean(dnll[a0:], dtype=np.float64)) == pytest.approx(case["runs"][name]["dnll_answer"],
                                                                            rel=1e-5, abs=1e-6), name
    assert not np.array_equal(drops[0], drops[1]), "the two schedules are the same"


def _answer_tokens(prompt: str) -> int:
    for f in B.exact_files():
        if f.is_file():
            for p in json.loads(f.read_text())["prompts"]:
                if p["name"] == prompt:
                    return p["answer_tokens"]
    raise KeyError(prompt)


@pytest.mark.slow
def test_the_saved_case_replays_through_the_command_line(tmp_path):
    """Each saved schedule replayed as ``file:PATH`` (no optimum beside it) answers as committed, with the committed
    answer-NLL change."""
    needs_model(reason="the replay needs the [real] extra")
    s = _saved()
    case = B.cases(True)[(s["prompt"], s["budget"])]
    for name, rel in s["files"].items():
        path = B.BLIND_DIR.parent / rel.split("/", 2)[2]
        code, out, err = run_module("paper_check", "quality", f"file:{path}", "--budget", str(s["budget"]),
                                    "--prompts", s["prompt"], "--no-opt", "--workers", "1", "--json", timeout=1800)
        assert code == 0, err
        (run,) = [r for r in json.loads(out)["runs"] if r["kind"] == "file"]
        got, want = run["prompts"][s["prompt"]], case["runs"][name]
        assert bool(got["right"]) == bool(want["right"]), name
        assert got["dnll_answer"] == pytest.approx(want["dnll_answer"], rel=1e-3, abs=1e-6), name
