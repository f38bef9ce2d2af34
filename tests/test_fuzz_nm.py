"""NM fuzzing that means something (issue 14, item 5): the search inside Theorem 4's corrected premise, and the
search against a reference policy.  Every value the fuzzer reports is recomputed here independently (plain
``run_nm``, the exact optimum, ``adversary.tail_mass``) on the trace it returns."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

import policies
from adversary import (observed_union_max, persistence_violations, tail_mass, thm4_nm_counterexample)
from adversary.strategies import theorem4_premise_traces, within_theorem4_premise
from kvcore.engine import run_nm
from kvcore.optima import optimum
from verify.config import Premise
from verify.fuzz import fuzz_policy
from verify.questions import AGAINST_FLOOR

RHO, W, TAU = Premise().rho, Premise().W, Premise().tau


def in_premise(trace, k, rho=RHO, w=W, tau=TAU) -> bool:
    return persistence_violations(trace, rho, w, tau, chain=True) == [] and observed_union_max(trace, rho, w, tau) <= k - 1


@given(data=st.data(), k=st.integers(2, 6), w=st.integers(1, 5), tau=st.sampled_from((0.1, 0.25, 0.5)),
       rho=st.sampled_from((0.5, 0.8)))
def test_premise_strategy_stays_inside_the_premise_where_rlruh_meets_its_bound(data, k, w, tau, rho):
    tr = data.draw(theorem4_premise_traces(k, rho, w, tau, max_T=30, max_support=6))
    assert in_premise(tr, k, rho, w, tau)
    assert within_theorem4_premise(tr, rho, w, tau, k - 1).weights.tolist() == tr.weights.tolist()  # a fixed point
    regret = run_nm(policies.make("R-LRU-H", rho=rho, tau=tau, W=w), tr, k).cost
    assert regret <= tail_mass(tr, tau) + 1e-9   # Theorem 4 under the corrected premise


def test_the_premise_map_repairs_the_papers_counterexample():
    tr = thm4_nm_counterexample()    # the paper's premise holds, the corrected one does not
    k, rho, w, tau = 3, 0.5, 1, 0.5
    assert not in_premise(tr, k, rho, w, tau)
    fixed = within_theorem4_premise(tr, rho, w, tau, k - 1)
    assert in_premise(fixed, k, rho, w, tau) and fixed.weights.tolist() != tr.weights.tolist()


def test_rlruh_passes_within_the_premise():
    rep = fuzz_policy("R-LRU-H", 4, model="nm", examples=30, seconds=8)
    assert rep.verdict == "no violation found" and rep.mode == "premise", rep.as_dict()
    assert rep.policy_params == {"rho": RHO, "tau": TAU, "W": W} and rep.worst <= 1e-9


def test_h2o_fails_within_the_premise_on_a_topic_shift():
    rep = fuzz_policy("H2O", 4, model="nm", examples=5, seconds=60)
    assert rep.verdict == "violates" and rep.worst_source == "construction 'topic shift, no tail'", rep.as_dict()
    tr = rep.worst_trace
    assert in_premise(tr, 4)
    assert run_nm(policies.make("H2O"), tr, 4).cost - tail_mass(tr, TAU) == pytest.approx(rep.worst)
    assert rep.worst > 10   # the old topic's accumulated attention keeps the new topic's token out


def test_the_search_finds_and_shrinks_a_premise_counterexample():
    rep = fuzz_policy("LRU", 4, model="nm", examples=40, seconds=60)
    assert rep.verdict == "violates" and rep.worst_source.startswith("targeted search"), rep.as_dict()
    tr = rep.shrunk_trace
    assert in_premise(tr, 4) and tr.T <= 8
    excess = run_nm(policies.make("LRU"), tr, 4).cost - tail_mass(tr, TAU)
    assert excess == pytest.approx(rep.shrunk) and excess > 0
    assert rep.shrunk <= rep.worst


def against_value(name, ref, tr, k):
    opt = optimum(tr, k, "nm").cost
    return (run_nm(policies.make(name), tr, k).cost - run_nm(policies.make(ref), tr, k).cost) / max(opt, AGAINST_FLOOR)


def test_against_a_reference_maximises_and_shrinks():
    rep = fuzz_policy("TOVA", 4, model="nm", against="H2O", examples=15, seconds=8)   # shrinking may be cut short
    assert rep.verdict == "worse than H2O" and rep.exit_code == 1, rep.as_dict()
    assert against_value("TOVA", "H2O", rep.worst_trace, 4) == pytest.approx(rep.worst)
    assert against_value("TOVA", "H2O", rep.shrunk_trace, 4) == pytest.approx(rep.shrunk)
    # the shrunk trace attains (at least) the largest value the search found
    assert rep.shrunk >= rep.search_worst - 1e-9
    same = fuzz_policy("H2O", 4, model="nm", against="H2O", examples=10, seconds=6)
    assert same.verdict == "not worse than H2O on the traces searched" and same.exit_code == 0
    assert same.worst == 0.0


def test_same_seed_same_report():
    a = fuzz_policy("LFU", 3, examples=40, seconds=60, seed=7).as_dict()
    b = fuzz_policy("LFU", 3, examples=40, seconds=60, seed=7).as_dict()
    for d in (a, b):
        d.pop("seconds")
        d.pop("first_violation_seconds")    # a time, not a result
        d.pop("shrink_seconds")             # what was left of the budget when the shrinking started: a time too
    assert a == b and a["verdict"] == "violates"
