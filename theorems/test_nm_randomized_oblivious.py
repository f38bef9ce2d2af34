"""The toolkit's no-refetch finding (claim ``nm-det-unbounded``), randomized half: against the oblivious
:func:`adversary.oblivious_k_plus_one_nm` (rows on the arriving token, then all mass on a fixed target among the
first k+1 tokens) every randomized NM policy's expected regret, averaged over the k+1 targets, is at least
(T-k-1)/(k+1) while the optimum loses 0 (Yao).  Exact at k = 2; sampled at k = 4.  The deterministic half (the
adaptive adversary, regret >= T-k-1) is ``theorems/test_nm_adaptive.py``; here every deterministic NM policy also
loses T-k-1 on one fixed target.
"""

import policies
from adversary import oblivious_k_plus_one_nm
from kvcore.engine import run_nm
from kvcore.optima import nm_opt
from theorems.results.randomized import nm_oblivious_table


def test_every_randomized_policy_meets_the_yao_bound():
    table = nm_oblivious_table(ks=(2,), T=10, sampled_ks=(4,), sampled_T=40, seeds=6)
    assert {r.policy for r in table.rows} == {p.name for p in policies.all_policies("nm", deterministic=False)}
    assert all(r.opt_cost == 0.0 for r in table.rows)
    assert table.holds, table.explain()
    exact = [r for r in table.rows if r.params["exact"]]
    assert exact and all(r.alg_cost >= (r.params["T"] - r.k - 1) / (r.k + 1) for r in exact)
    # Random's choice is symmetric in the first k+1 tokens: every target costs it the same
    rnd = next(r for r in exact if r.policy == "Random")
    assert len(set(rnd.params["per_target"])) == 1


def test_a_deterministic_policy_loses_every_later_row_on_one_fixed_target():
    k, T = 3, 30
    for p in policies.all_policies("nm", deterministic=True):
        worst = max(run_nm(policies.make(p.name), oblivious_k_plus_one_nm(k, T, j), k).cost for j in range(k + 1))
        assert worst >= T - k - 1, p.name
    assert nm_opt(oblivious_k_plus_one_nm(k, T, 0), k).cost == 0.0
