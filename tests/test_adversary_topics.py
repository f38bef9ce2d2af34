"""Topic shifts (adversary/topics.py): boundaries, moving heavy sets, and a topic-following cache losing nothing."""

import numpy as np
import pytest

from adversary import persistence_holds, topic_shift
from kvcore.engine import run_nm
from kvcore.errors import ParameterError
from kvcore.optima.nm_flow import nm_opt
from policies import make


@pytest.mark.parametrize("T,L,h,sinks,s", [(60, 12, 3, 1, 1.0), (45, 10, 2, 2, 0.0), (31, 8, 4, 0, 1.5)])
def test_boundaries_and_heavy_sets(T, L, h, sinks, s):
    res = topic_shift(T, L, h, zipf_s=s, sinks=sinks, sink_mass=0.1 if sinks else 0.0, seed=2)
    a = res.trace.to_dense()
    assert np.allclose(a.sum(axis=1), 1.0, atol=1e-12)
    assert res.boundaries == tuple(range(L, T, L))
    starts = (0,) + res.boundaries
    for j, start in enumerate(starts):
        stop = min(start + L, T)
        heavy = res.heavy_sets[j]
        first = start + (sinks if j == 0 else 0)
        assert heavy == tuple(i for i in range(first, first + h) if i < T)
        block = a[start:stop]
        for t in range(start, stop):
            allowed = set(range(min(sinks, t + 1))) | {i for i in heavy if i <= t} | {t}
            assert a[t, [i for i in range(T) if i not in allowed]].sum() == 0
            assert all(a[t, i] > 0 for i in allowed)
        if j:  # the previous topic's heavy tokens get nothing after the boundary
            assert block[:, list(res.heavy_sets[j - 1])].sum() == 0


def test_topic_following_cache_loses_nothing_and_accumulation_loses_after_boundaries():
    T, L, h, sinks = 80, 16, 3, 1
    res = topic_shift(T, L, h, sinks=sinks, seed=0)
    k = sinks + h + 1
    assert nm_opt(res.trace, k).cost == pytest.approx(0.0, abs=1e-9)
    acc = run_nm(make("ACC"), res.trace, k, record=True)
    after = sum(acc.per_step[b: b + h + 2].sum() for b in res.boundaries)
    assert acc.cost > 0 and after > 0


def test_persistent_within_topics_and_seeded():
    a = topic_shift(50, 10, 3, seed=4)
    b = topic_shift(50, 10, 3, seed=4)
    assert np.array_equal(a.trace.weights, b.trace.weights)
    # heavy tokens are attended at every step from their arrival until the boundary
    assert persistence_holds(a.trace, 0.5, 1, 0.05)


def test_parameter_checks():
    with pytest.raises(ParameterError, match="topic_length = 3"):
        topic_shift(20, 3, 3, sinks=1)
    with pytest.raises(ParameterError, match="sink_mass"):
        topic_shift(20, 5, 2, sinks=0, sink_mass=0.2)
