"""Figure 14 measured (claim ``fig14-measured``, figure ``14m``) on the committed sweep, without torch; with
``--runslow`` and the ``[real,kvpress]`` extras one press point is recomputed in the model.

* the measured points are recounted from the raw ``--json`` documents, and the figure draws exactly them;
* each published statement is judged at the smallest measured budget at or above its fraction of each prompt;
* the shape test reacts to a rise beyond the quality margin and to a curve that flattens as the budget drops.
"""

from __future__ import annotations

import json
import math

import pytest

from figures import render
from figures.published import budget_statements
from tests.model_fixture import needs_model
from theorems.claims import significance
from theorems.claims.figure14 import published_checks, shape_checks
from theorems.results import benchmark as B


def test_points_recount_from_the_raw_documents():
    pts = B.fig14_points()
    assert set(pts["series"]) == set(B.RULES) | {B.OPT}
    for f in B.exact_files()[:2]:
        d = json.loads(f.read_text())
        tokens = {p["name"]: p["tokens"] for p in d["prompts"] if p["full_cache_right"] and p["name"] in B.EASY}
        for r in d["runs"]:
            if r["kind"] == "full":
                continue
            (p,) = [p for p in pts["series"][r["config"]] if p["budget"] == r["budget"]]
            assert p["accuracy"] == sum(r["prompts"][n]["right"] for n in tokens) / len(tokens)
            assert p["fraction"] == pytest.approx(math.fsum(r["budget"] / t for t in tokens.values()) / len(tokens))
            assert p["dnll_answer"] == pytest.approx(
                math.fsum(r["prompts"][n]["dnll_answer"] for n in tokens) / len(tokens), rel=1e-12)


def test_the_figure_draws_the_committed_points_and_every_published_budget():
    pts = B.fig14_points()
    plotted = render("14m", pts).plotted
    for name, series in pts["series"].items():
        drawn = plotted[f"measured/{name}/accuracy"]
        assert list(drawn["x"]) == pytest.approx([p["fraction"] for p in series])
        assert list(drawn["y"]) == pytest.approx([p["accuracy"] for p in series])
    published = {f"published/{r['system']}/{q['fraction']:g}" for r in budget_statements() for q in r["points"]}
    assert published <= set(plotted)


def test_a_published_statement_is_judged_at_the_first_budget_reaching_its_fraction():
    cs = B.cases(True)
    checks = published_checks(cs, B.fig14_points(cs))
    assert {c["system"] for c in checks} == {"H2O", "TOVA"}
    for c in checks:
        for p in c["prompts"]:
            T = cs[(p["prompt"], p["budget"])]["tokens"]
            assert p["budget"] / T >= c["fraction"]
            smaller = [b for (n, b) in cs if n == p["prompt"] and b < p["budget"]]
            assert all(b / T < c["fraction"] for b in smaller)
            assert p["rule_right"] == bool(cs[(p["prompt"], p["budget"])]["runs"][c["rule"]]["right"])


def test_the_shape_test_sees_a_rise_and_a_flattening():
    qm = significance.declared_quality()

    def one(loss):
        series = {"X": [{"budget": b, "dnll_answer": x} for b, x in zip((32, 64, 128), loss)]}
        (s,) = shape_checks({"series": series}, qm)
        return s["monotone"], s["steepening"]

    assert one([2.0, 0.5, 0.1]) == (True, True)
    assert one([2.0, 1.9, 0.1]) == (True, False)             # steepest at the large end
    assert one([2.0, 0.5, 0.5 * 1.12]) == (False, True)  # rises beyond a tenth of the smaller budget's loss
    assert one([2.0, 0.5, 0.5 * 1.08]) == (True, True)   # within it
    assert one([2.0, 0.0, 2 * math.log(1.01)]) == (False, True)  # near 0 the floor ln 1.01 decides
    assert one([2.0, 0.0, 0.5 * math.log(1.01)]) == (True, True)


@pytest.mark.slow
def test_one_press_point_recomputes():
    """SnapKV at K = 64 on the first easy prompt, recomputed in the model without the optimum."""
    needs_model(("torch", "transformers", "gguf", "kvpress"), reason="recomputing needs the [real,kvpress] extras")
    from realtrace.quality.run import evaluate, parse_config

    prompt, k = B.EASY[0], 64
    case = B.cases(True)[(prompt, k)]
    res = evaluate(parse_config("press:SnapKV"), [k], [prompt], "closed", 0, None, 0, None, 1, False,
                   progress=False, no_opt=True)
    (got,) = [r["prompts"][prompt] for r in res["runs"] if r["kind"] == "press"]
    want = case["runs"]["press:SnapKV"]
    assert bool(got["right"]) == bool(want["right"])
    for q in ("kl_stream", "dnll_answer", "regret_stream"):
        assert got[q] == pytest.approx(want[q], rel=1e-3, abs=1e-6), q
