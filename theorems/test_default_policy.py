"""The Section 10 default policy and the Section 11 GD-A validation, measured against the exact NM optimum.

- Decoy-and-sleeper (paper Section 5, Theorem 2): the default (recency floor k/4, 4 sinks, decayed score, random
  ties) keeps the sleeper and pays 0, like the optimum; undecayed ACC pays one unit per suffix row.
- The adaptive NM adversary (all of a row's mass on a token the policy has dropped) gives every online policy,
  the default included, regret of at least one unit per row after its first drop, against an optimum of 0:
  ``regret >= T - k - 1`` exactly, since the first drop happens at the arrival of token k.
- Benign traces (persistent attention with sinks, topic shifts): the default's regret is at most H2O's on short
  traces; on the long persistent trace it loses to H2O, by less than the declared practical-significance margin
  (``theorems.claims.significance``, VERDICTS.md), and measurably to the best other policy.
- Section 11 (``realtrace.experiments.section11``): the policy the sentence names (the Section 10 default) keeps the
  sleeper on decoy-and-sleeper, like H2O, where ACC and the registered plain GD-A drop it (one unit per suffix
  step); on a topic shift and on real traces its suffix gap is below H2O's and ACC's by more than the margin.
"""

from adversary import adaptive_k_plus_one_nm
from kvcore.measure import measure
from theorems.claims import significance
from theorems.results.practice import nm_policy_names
from theorems.results.recommendations import compared_policy, default_policy_table, gda_validation

T, K = 200, 16


def test_default_is_safe_on_decoy_and_sleeper_and_no_worse_than_h2o_on_small_benign_traces():
    table = default_policy_table(T, K, seeds=4)
    by = {}
    for r in table.rows:
        by.setdefault(r.workload, {})[r.policy] = r
    ds = by["decoy-and-sleeper"]
    assert ds["Default"].opt_cost == 0 and ds["Default"].ci_high == 0
    assert ds["ACC"].alg_cost >= T - K - 1 - 1e-9
    for w, rows in by.items():
        if rows["Default"].params["kind"] == "benign":
            assert rows["Default"].ci_high <= rows["H2O"].alg_cost + 1e-9, (w, rows["Default"], rows["H2O"])


def test_default_loses_to_h2o_on_a_long_persistent_trace_within_the_margin():
    """The strict reading's counterexample behind the default-policy verdict: on the benign persistent trace with 4
    sinks at T = 2000, k = 128 the Section 10 default (floor k/4, 4 sinks) loses more attention mass than H2O, every
    seed -- but less than the declared margin (a tenth of H2O's regret), while the best policy on that trace, LRU,
    beats it by more than the margin."""
    from adversary import adversarial_and_benign

    tr = adversarial_and_benign(2000, 128)["persistent sinks=4"][1]
    default = measure(compared_policy("Default", 128), tr, 128, model="nm", seeds=range(4), with_opt=False)
    h2o = measure(compared_policy("H2O", 128), tr, 128, model="nm", with_opt=False)
    lru = measure(compared_policy("LRU", 128), tr, 128, model="nm", with_opt=False)
    assert min(default.costs) > h2o.cost, (default.costs, h2o.cost)
    assert not significance.measurably_worse(default.cost, h2o.cost, tr.T)
    assert significance.measurably_worse(default.cost, lru.cost, tr.T)


def test_the_declared_margin():
    """margin = max(0.10 x reference, 0.01 x rows): the relative part above 10 per 100 rows of reference, the
    per-row floor below it; "worse" and "better" are strict beyond it."""
    assert significance.margin(300.0, 2000) == 30.0 and significance.margin(5.0, 2000) == 20.0
    assert significance.margin(0.0, 1) == 0.01
    assert significance.measurably_worse(130.1, 100.0, 10) and not significance.measurably_worse(110.0, 100.0, 10)
    assert significance.measurably_better(0.0, 0.02, 1) and not significance.measurably_better(0.0, 0.01, 1)
    assert significance.margin(300.0, 2000, {"relative": 0.0, "per_step": 0.0}) == 0.0


def test_adaptive_nm_adversary_defeats_every_policy():
    for name in nm_policy_names():
        tr = adaptive_k_plus_one_nm(compared_policy(name, K)(), K, T, seed=0)
        m = measure(compared_policy(name, K), tr, K, model="nm", seeds=(0,))
        assert m.opt_cost == 0 and m.cost >= T - K - 1, name


def test_gda_separation_on_synthetic_suffixes():
    res, _ = gda_validation(T, K, real=0)
    gap = {(n, r["policy"], r["window"]): r["gap_per_step"] for n, rows in res.items() for r in rows}
    # decoy-and-sleeper: the plain GD-A and ACC lose the sleeper (gap 1 per suffix step, no background mass); the
    # recency-floored default keeps it, and so does H2O, so there is nothing to separate from there
    assert gap[("decoy-and-sleeper", "GD-A", "suffix")] == gap[("decoy-and-sleeper", "ACC", "suffix")] == 1.0
    assert gap[("decoy-and-sleeper", "Default", "suffix")] == gap[("decoy-and-sleeper", "H2O", "suffix")] == 0.0
    # topic shift: the default follows the new topic better than H2O and ACC, by more than the margin, and matches
    # H2O on the benign window
    for rival in ("H2O", "ACC"):
        assert significance.measurably_better(gap[("topic shift", "Default", "suffix")],
                                              gap[("topic shift", rival, "suffix")], 1)
    assert not significance.measurably_worse(gap[("topic shift", "Default", "benign")],
                                             gap[("topic shift", "H2O", "benign")], 1)


def test_gda_and_the_default_on_real_traces_are_ahead_of_h2o_on_both_windows():
    """The real-trace finding the gda-validation verdict rests on (two committed traces, k = 32): the plain GD-A's
    and the default's gaps are below H2O's on the benign window and on the suffix; winning on both windows is
    matching on the benign one, and the default's suffix lead over H2O and ACC exceeds the margin (a separation)."""
    res, _ = gda_validation(T, K, budgets_real=(32,), real=2)
    for name, rows in res.items():
        if not name.startswith("real"):
            continue
        g = {(r["policy"], r["window"]): r["gap_per_step"] for r in rows}
        for pol in ("GD-A", "Default"):
            assert g[(pol, "benign")] < g[("H2O", "benign")], (name, pol)
            assert g[(pol, "suffix")] < g[("H2O", "suffix")], (name, pol)
        assert all(significance.measurably_better(g[("Default", "suffix")], g[(r, "suffix")], 1)
                   for r in ("H2O", "ACC")), name
