"""The tracking gap as the benchmark (claim ``tracking-benchmark``, paper §8 "The right benchmark is closeness to the
future-mass set") on the committed sweep (realtrace/data/quality_benchmark), without torch; with ``--runslow`` and
the ``[real,kvpress]`` extras one committed run is recomputed in the model.

* the per-set summaries are recounted from the raw ``--json`` documents;
* the pair comparisons follow the declared margins on either side of the line, and a broken comparison is seen;
* the claim's table is computed where torch cannot be imported.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from tests.command_line import ROOT
from tests.model_fixture import needs_model
from theorems.claims import significance
from theorems.claims.benchmark import _better, _smaller_gap, tracking_pairs, tracking_table
from theorems.results import benchmark as B

QM, RM = significance.declared_quality(), significance.declared()


def raw(path) -> dict:
    return json.loads(path.read_text())


def test_the_sets_are_the_declared_prompts_and_every_rule_ran_on_both():
    t = tracking_table()
    assert t["measured"]
    for k, s in t["sets"].items():
        assert set(s["easy"]["counted"]) | set(s["easy"]["excluded"]) == set(B.EASY), k
        assert set(s["hard"]["counted"]) | set(s["hard"]["excluded"]) == set(B.HARD), k
        assert set(s["easy"]["rules"]) == set(s["hard"]["rules"]) == set(B.RULES), k
    n = len(B.RULES)
    assert len(t["pairs"]) == len(t["sets"]) * n * (n - 1) // 2


def test_the_summaries_recount_from_the_raw_documents():
    """Answers right and the stream tracking gap, recounted from the JSON: each rule's prompt entry against the OPT
    run's entry of the same file, prompt and budget."""
    t = tracking_table()
    for files, prompts, side in ((B.exact_files()[:1], B.EASY, "easy"), (B.hard_files(), B.HARD, "hard")):
        docs = [raw(f) for f in files]
        for k, s in t["sets"].items():
            budget = int(k.split("=")[1])
            for d in docs:
                control = {p["name"] for p in d["prompts"] if p["full_cache_right"]} & set(prompts)
                runs = {r["config"]: r for r in d["runs"] if r["budget"] == budget}
                opt = runs["OPT"]["prompts"]
                for rule in B.RULES:
                    got = s[side]["rules"][rule]
                    mine = runs[rule]["prompts"]
                    assert got["right"] == sum(mine[p]["right"] for p in control)
                    gap = math.fsum(mine[p]["regret_stream"] - opt[p]["regret_stream"] for p in control) / len(control)
                    assert got["gap_stream"] == pytest.approx(gap, rel=1e-12, abs=1e-15)


def test_better_on_a_set_counts_answers_first_then_the_declared_quality_margin():
    a = {"right": 1, "dnll_answer": 5.0}
    assert _better("a", "b", a, {"right": 0, "dnll_answer": 0.0}, QM) == "a"  # answers beat a lower NLL change
    lo = 1.0
    m = significance.quality_margin(lo, QM)
    assert _better("a", "b", {"right": 0, "dnll_answer": lo}, {"right": 0, "dnll_answer": lo + 1.01 * m}, QM) == "a"
    assert _better("a", "b", {"right": 0, "dnll_answer": lo + 0.99 * m}, {"right": 0, "dnll_answer": lo}, QM) is None
    assert _better("a", "b", {"right": 2, "dnll_answer": 3.0}, {"right": 2, "dnll_answer": 0.01}, QM) == "b"


def test_a_gap_orders_a_pair_only_beyond_the_declared_regret_margin():
    gb = 0.5
    m = significance.margin(gb, 1, RM)
    assert _smaller_gap("a", "b", gb - 1.01 * m, gb, RM) == "a"
    assert _smaller_gap("a", "b", gb - 0.99 * m, gb, RM) is None
    assert _smaller_gap("a", "b", gb, gb - 1.01 * m, RM) == "b"  # the margin is the larger gap's
    assert _smaller_gap("a", "b", gb, gb - 0.99 * m, RM) is None


def test_pairs_take_both_sets_of_one_budget():
    rule = {"right": 1, "dnll_answer": 0.5, "gap_answer": 0.1, "gap_stream": 0.1}
    easy = {"budget": 64, "rules": {"H2O": rule, "FIFO": dict(rule, gap_answer=0.3)}}
    hard = {"budget": 64, "rules": {"H2O": dict(rule, right=2), "FIFO": rule}}
    (p,) = tracking_pairs(easy, hard, QM, RM)
    assert (p["a"], p["b"], p["hard_better"], p["easy_gap_smaller"], p["hard_gap_smaller"]) == (
        "H2O", "FIFO", "H2O", "H2O", None)


def test_the_claim_reads_the_sweep_without_torch():
    code = ("import sys; sys.modules['torch'] = sys.modules['transformers'] = sys.modules['kvpress'] = None; "
            "from theorems.claims.benchmark import tracking_table; t = tracking_table(); print(len(t['pairs']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == len(tracking_table()["pairs"]) > 0


@pytest.mark.slow
def test_one_committed_run_recomputes():
    """FIFO at K = 64 on the shortest hard prompt, recomputed in the model as committed (closed loop, optimum on
    top-32 rows): the same answer, answer-NLL change, stream KL and regret."""
    needs_model(reason="recomputing needs the [real] extra")
    from realtrace.quality.run import evaluate, parse_config

    prompt, k = B.HARD[0], 64
    case = B.cases(False)[(prompt, k)]
    res = evaluate(parse_config("FIFO"), [k], [prompt], "closed", 0, None, 0, None, 1, False, progress=False,
                   opt_top=32)
    got = {r["config"]: r["prompts"][prompt] for r in res["runs"] if r["kind"] in ("policy", "opt")}
    for name in ("FIFO", "OPT"):
        assert bool(got[name]["right"]) == bool(case["runs"][name]["right"])
        for q in ("kl_stream", "dnll_answer", "regret_stream"):
            assert got[name][q] == pytest.approx(case["runs"][name][q], rel=1e-3, abs=1e-6), (name, q)
