"""LFU is not competitive (paper Section 2.2; Borodin & El-Yaniv 1998; SPEC section 5): on
``p_1^m ... p_{k-1}^m (x y)^{m-1}`` LFU (in-cache counts, ties to the least recently used) pays exactly
(k-1) + 2(m-1) faults while OPT pays exactly k+1, so the ratio grows linearly in m without bound."""

from theorems.results.classic import lfu_table


def test_lfu_exact_costs_and_growth():
    table = lfu_table(ks=(2, 3, 4, 8), ms=(2, 4, 8, 16, 32, 64))
    assert table.holds, table.explain()
    for k in (2, 3, 4, 8):
        ratios = [r.ratio for r in table.rows if r.k == k]
        assert ratios == sorted(ratios) and ratios[-1] > k, f"k={k}: ratios {ratios} do not grow past k"
