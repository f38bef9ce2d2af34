"""No deterministic policy has bounded NM regret (paper Section 4(a), read in the no-refetch model of Section 3).

``adversary.adaptive_k_plus_one_nm`` drives a deterministic policy and, from its first drop on, puts each row's whole
mass on a token it dropped.  Derived bounds: the first drop happens at step ``k`` at the latest, so the policy loses
every row after it: ``regret >= T - k - 1``.  The targets after step ``k`` are non-increasing token ids; when they
take at most ``k`` distinct values an offline schedule keeps them all and loses nothing, so ``OPT = 0`` there.
This frames Theorem 2: in NM, ACC is not special -- every registered deterministic policy fails the same way.
"""

import pytest

import policies
from adversary import adaptive_k_plus_one_nm
from kvcore.engine import run_nm
from kvcore.optima import nm_opt
from theorems.results.attention import nm_adaptive_table


def test_every_deterministic_nm_policy_loses_a_unit_per_step():
    table = nm_adaptive_table(ks=(2, 4), Ts=(60, 120))
    assert table.holds, table.explain()
    names = {p.name for p in policies.all_policies("nm", deterministic=True)}
    assert {r.policy for r in table.rows} == names
    for r in table.rows:
        assert r.params["distinct_targets"] <= r.k, f"{r.policy}: OPT = 0 was not derivable"
        assert r.opt_cost <= 1e-9


def test_opt_stays_bounded_as_T_doubles():
    for name in ("LRU", "ACC", "GD-A"):
        opts = [nm_opt(adaptive_k_plus_one_nm(policies.make(name), 3, T), 3).cost for T in (50, 100, 200)]
        regrets = [run_nm(policies.make(name), adaptive_k_plus_one_nm(policies.make(name), 3, T), 3).cost
                   for T in (50, 100, 200)]
        assert max(opts) <= 1e-9
        assert all(r >= T - 4 for r, T in zip(regrets, (50, 100, 200)))


@pytest.mark.slow
def test_larger_k():
    assert nm_adaptive_table(ks=(8, 16), Ts=(400,)).holds
