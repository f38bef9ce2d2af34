"""Budgets across heads (paper §8, §11) on the committed real traces, at the quick profile's sizes.

* The exact NM regret curve ``OPT(k)`` of every captured head is convex and non-increasing (exact second
  differences); the same check computed with the future-mass heuristic in place of the flow (a perturbed solver,
  paper §4's "Belady analog") finds violations -- the check can fail.
* The static optimum (greedy) equals the dynamic program over heads; §8's marginal condition holds at it; the
  dynamic coupled optimum, the static optimum and the uniform split are ordered exactly, and the uniform split's
  regret equals the sum of the heads' own ``nm_opt`` (an independent path).
"""

from __future__ import annotations

import math

import pytest

from kvcore.optima import nm_opt
from theorems.claims import CLAIMS
from theorems.claims.allocation import CURVE_SIZES, SIZES
from theorems.results.allocation import allocation_study, committed_traceset, curve_study
from theorems.tables import cached, to_jsonable

QUICK = {name: pair[0] for name, pair in {**SIZES, **CURVE_SIZES}.items()}


@pytest.fixture(scope="module")
def study():
    return cached(allocation_study, per_head_ks=QUICK["per_head_ks"], dp_per_head=QUICK["dp_per_head"],
                  curve_steps=QUICK["curve_steps"])


def test_every_head_curve_is_convex_and_non_increasing():
    curves = cached(curve_study, curve_k=QUICK["curve_steps"])
    heads = curves["heads"]
    assert len(heads) == 12 and curves["flows_certified"] and curves["flow_solves"] == 12 * QUICK["curve_steps"]
    for name, h in heads.items():
        assert h["violations"] == {"increase": [], "concave": []}, name
        assert h["min_second_difference"] >= 0 and h["first_decrease"] >= h["last_decrease"] >= 0


def test_a_perturbed_solver_breaks_the_convexity_check():
    heuristic = cached(curve_study, curve_k=12, solver="future-mass")
    broken = [n for n, h in heuristic["heads"].items() if h["violations"]["concave"] or h["violations"]["increase"]]
    assert broken, "the convexity check passed the future-mass heuristic's curves: it cannot fail"


def test_static_dynamic_uniform_at_equal_memory(study):
    ts = committed_traceset()
    assert study["dp_check"]["equal"]
    for row in study["rows"]:
        assert row["order_exact"] and row["dynamic_certified"] and row["marginal"]["holds"]
        assert sum(row["static_slots"].values()) == row["B"]
        assert row["dynamic"] <= row["static"] < row["uniform"]
        k = row["per_head"]
        independent = math.fsum(nm_opt(ts.traces[n], k).cost for n in ts.names())
        assert row["uniform"] == pytest.approx(independent, rel=1e-12)


def test_the_claims_decide_on_these_values(study):
    """The three verdicts as registered, decided on the values the study computed here."""
    from theorems.claims import Context
    from theorems.profile import QUICK as PROFILE

    verdicts = {cid: CLAIMS[cid].run(Context(PROFILE, out_dir=None)).verdict
                for cid in ("regret-curve-convex", "equal-marginal-regret", "static-vs-coupled")}
    assert verdicts == {"regret-curve-convex": "holds", "equal-marginal-regret": "holds", "static-vs-coupled": "holds"}
    assert to_jsonable(study["rows"][0]["B"]) == 12 * QUICK["per_head_ks"][0]
