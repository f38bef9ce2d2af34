"""Budgets across heads (paper §8, §11) on the 12 real heads, at the quick profile's sizes: their complete rows (the
claims' own reading, ``realtrace/data/smollm2_recall_complete``) and the top-32 stored entries (the truncated one).

* The complete set holds the committed heads: every stored top-32 entry is the complete row's entry, and every
  complete row sums to 1 with no residual.
* The exact NM regret curve ``OPT(k)`` of every head is convex and non-increasing (exact second differences); the
  same check computed with the future-mass heuristic in place of the flow (a perturbed solver, paper §4's "Belady
  analog") finds violations -- the check can fail.
* The static optimum (greedy) equals the dynamic program over heads and the certified static flow; §8's marginal
  condition holds at it; the dynamic coupled optimum, the static optimum and the uniform split are ordered exactly,
  and the uniform split's regret equals the sum of the heads' own ``nm_opt`` (an independent path).
* The priced coupled optimum equals the coupled flow on every entry (:mod:`kvcore.optima.coupled`, an independent
  network) on a prefix of the complete heads.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvcore.optima import nm_opt
from kvcore.optima.coupled import coupled_nm_opt
from theorems.claims import CLAIMS, edit
from theorems.claims.allocation import CURVE_SIZES, SIZES
from theorems.results.allocation import ROWS, allocation_study, curve_study, priced, traceset
from theorems.tables import cached, to_jsonable

QUICK = {name: pair[0] for name, pair in {**SIZES, **CURVE_SIZES}.items()}


def _study(rows):
    return cached(allocation_study, per_head_ks=QUICK["per_head_ks"], dp_per_head=QUICK["dp_per_head"],
                  curve_steps=QUICK["curve_steps"], rows=rows)


def test_the_complete_set_holds_the_committed_heads_rows_in_full():
    complete, stored = traceset("complete"), traceset("stored")
    assert complete.names() == stored.names() and complete.T == stored.T == 617
    for n in complete.names():
        full, top = complete.traces[n].to_dense(), stored.traces[n].to_dense()
        kept = top > 0
        assert np.array_equal(full[kept], top[kept]), n  # the same capture: the stored entries are the rows' own
        assert (full <= np.where(kept, top, np.inf).min(axis=1, keepdims=True))[~kept].all(), n  # the top 32
        assert np.abs(full.sum(axis=1) - 1).max() < 1e-12 and complete.traces[n].residual.max() < 1e-12, n


@pytest.mark.parametrize("rows", ROWS)
def test_every_head_curve_is_convex_and_non_increasing(rows):
    curves = cached(curve_study, curve_k=QUICK["curve_steps"], rows=rows)
    heads = curves["heads"]
    assert len(heads) == 12 and curves["flows_certified"] and curves["flow_solves"] == 12 * QUICK["curve_steps"]
    for name, h in heads.items():
        assert h["violations"] == {"increase": [], "concave": []}, name
        assert h["min_second_difference"] >= 0 and h["first_decrease"] >= h["last_decrease"] >= 0


def test_a_perturbed_solver_breaks_the_convexity_check():
    heuristic = cached(curve_study, curve_k=12, solver="future-mass", rows="stored")
    broken = [n for n, h in heuristic["heads"].items() if h["violations"]["concave"] or h["violations"]["increase"]]
    assert broken, "the convexity check passed the future-mass heuristic's curves: it cannot fail"


@pytest.mark.parametrize("rows", ROWS)
def test_static_dynamic_uniform_at_equal_memory(rows):
    study, ts = _study(rows), traceset(rows)
    assert study["dp_check"]["equal"]
    for row in study["rows"]:
        assert row["order_exact"] and row["dynamic_certified"] and row["marginal"]["holds"]
        assert row["static_flow"]["certified"] and row["static_flow"]["equals_greedy"]
        assert sum(row["static_slots"].values()) == row["B"]
        assert row["dynamic"] <= row["static"] < row["uniform"]
        k = row["per_head"]
        independent = math.fsum(nm_opt(ts.traces[n], k).cost for n in ts.names())
        assert row["uniform"] == pytest.approx(independent, rel=1e-12)


def test_the_priced_coupled_optimum_equals_the_flow_on_every_entry():
    """On the first 120 steps of the complete heads (every entry in one network, :mod:`kvcore.optima.coupled`)."""
    ts = traceset("complete")
    ts.traces = {n: tr.prefix(120) for n, tr in ts.traces.items()}
    for B in (12, 60):
        full = coupled_nm_opt([ts.traces[n] for n in ts.names()], B)
        got = priced(ts, B, "coupled")
        assert full.certified and got.certificate.certified
        assert got.exact_regret == full.exact_regret, B


def test_the_claims_decide_on_these_values():
    """The three verdicts as registered, on complete rows and under the truncated reading."""
    from theorems.claims import Context
    from theorems.profile import QUICK as PROFILE

    results = {cid: CLAIMS[cid].run(Context(PROFILE, out_dir=None))
               for cid in ("regret-curve-convex", "equal-marginal-regret", "static-vs-coupled")}
    assert {cid: r.verdict for cid, r in results.items()} == {
        "regret-curve-convex": "holds", "equal-marginal-regret": "holds", "static-vs-coupled": "holds"}
    for r in results.values():
        assert [x["verdict"] for k, x in r.readings.items() if k.startswith("top-32")] == ["holds"]
    # the truncated reading is reported, never the verdict: its failure leaves each verdict as it is
    broken = {"regret-curve-convex": ("truncated/heads/L09_kv1/increases", [3]),
              "equal-marginal-regret": ("truncated/dp_check/equal", False),
              "static-vs-coupled": ("truncated/budgets", lambda bs: [dict(b, dynamic=b["static"]) for b in bs])}
    for cid, (path, new) in broken.items():
        d = CLAIMS[cid].decide(edit(results[cid].values, path, new), results[cid].expected)
        assert d.verdict == "holds" and [x["verdict"] for k, x in d.readings.items() if k.startswith("top-32")] == [
            "refuted"], cid
    own = results["static-vs-coupled"].values
    assert own["unattributed"] < 1e-9 < own["truncated"]["unattributed"]
    assert to_jsonable(own["budgets"][0]["B"]) == 12 * QUICK["per_head_ks"][0]
