"""LFU priming (adversary/lfu_priming.py): the SPEC section 5 formula and its attention analogue."""

import numpy as np
import pytest

from adversary import lfu_priming, lfu_priming_attention, lfu_priming_attention_targets
from kvcore.engine import run_nm, run_rm
from kvcore.optima.nm_flow import nm_opt
from kvcore.optima.rm_flow import rm_opt
from policies import make


def spec_sequence(k, m):
    p = list(range(k - 1))
    x, y = k - 1, k
    return [pi for pi in p for _ in range(m)] + [x, y] * (m - 1)


@pytest.mark.parametrize("k,m", [(1, 1), (2, 1), (2, 3), (3, 2), (5, 4), (8, 7)])
def test_sequence_matches_the_spec_formula(k, m):
    assert lfu_priming(k, m).items.tolist() == spec_sequence(k, m)


@pytest.mark.parametrize("k,m", [(2, 2), (3, 3), (4, 5), (6, 8)])
def test_lfu_and_optimum_pay_the_spec_costs(k, m):
    trace = lfu_priming(k, m)
    assert run_rm(make("LFU"), trace, k).cost == (k - 1) + 2 * (m - 1)
    assert rm_opt(trace, k).cost == k + 1


@pytest.mark.parametrize("k,m", [(2, 2), (3, 3), (5, 4)])
def test_attention_analogue_relabels_the_spec_sequence(k, m):
    trace = lfu_priming_attention(k, m)
    targets = lfu_priming_attention_targets(k, m)
    assert trace.nnz == trace.T == targets.size
    assert np.array_equal(trace.indices, targets) and np.all(trace.weights == 1.0)
    relabel = {int(j) * m: j for j in range(k - 1)} | {(k - 1) * m: k - 1, (k - 1) * m + 1: k}
    assert [relabel[int(x)] for x in targets] == spec_sequence(k, m)
    mass = np.bincount(trace.indices, weights=trace.weights)
    assert all(mass[j * m] == m for j in range(k - 1))
    assert mass[(k - 1) * m] == mass[(k - 1) * m + 1] == m - 1


@pytest.mark.parametrize("k,m", [(2, 3), (3, 3), (5, 4)])
def test_attention_analogue_costs_the_optimum_nothing_and_acc_the_late_rows(k, m):
    trace = lfu_priming_attention(k, m)
    assert nm_opt(trace, k).cost == pytest.approx(0.0, abs=1e-9)
    # ACC (arrival protected) holds the k-1 decoys (mass m each) and one of x, y (mass < m): once both x and y
    # are present (y's arrival) it drops x, whose score 1 is below every decoy's m, and loses x's m-2 later rows
    acc = make("ACC", protect_arrival=True)
    assert run_nm(acc, trace, k).cost >= m - 2
