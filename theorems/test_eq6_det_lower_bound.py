"""Eq. 6 (paper Section 4(a); Sleator & Tarjan, CACM 1985): no deterministic online policy beats ratio k.

The adaptive adversary over k+1 items requests, at every step, the item the policy does not hold, so the policy
faults on all T requests, while OPT_h <= (k-h+1)/k T + h on any sequence over k+1 items.  Hence every deterministic
policy's ratio is at least T / (T/k + k) = k (1 - eps), eps = k^2/(T + k^2).  The test runs every deterministic RM
policy of the registry (a new policy is checked automatically) and also checks the OPT bound itself for every h.
"""

import pytest

from theorems.results.classic import deterministic_rm_policies, eq6_table, opt_on_k_plus_one_table


@pytest.mark.parametrize("name", deterministic_rm_policies())
def test_adaptive_adversary_forces_ratio_near_k(name):
    table = eq6_table(ks=(2, 3, 4), T_per_k2=20, names=[name])
    assert table.holds, table.explain()
    assert all(r.ratio >= r.k * (1 - r.params["eps"]) for r in table.rows)


def test_opt_bound_on_k_plus_one_items():
    table = opt_on_k_plus_one_table(ks=(2, 3, 4, 6), T=400, seeds=3)
    assert table.holds, table.explain()


@pytest.mark.slow
@pytest.mark.parametrize("name", deterministic_rm_policies())
def test_adaptive_adversary_large_k(name):
    table = eq6_table(ks=(8, 16, 32), T_per_k2=40, names=[name])
    assert table.holds, table.explain()
