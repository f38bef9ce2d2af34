"""The persistent-state wrapper (policies/persistent_state.py) and EMA-Block's victim search (policies/ema_block.py).

* The wrapper equals the plain policy until the first re-admission (and on a whole run without one).
* Hand-worked re-admission traces where restoring the state changes the victims (LFU, EMA-Block in both readings).
* EMA-Block's pruned / vectorized victim search picks what a full scan of its own ``priority`` picks.
"""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.engine import RMSimulator
from kvcore.errors import ParameterError
from policies import all_policies, get, make

PERSISTABLE = [("LFU", None), ("EMA-Block", {"alpha": 0.1}), ("EMA-Block", {"alpha": 0.3, "unattended": "hold"})]


def drive(policy, steps, capacity):
    """Run ``steps`` = list of (items, {item: score}) and return the simulator (evictions recorded)."""
    sim = RMSimulator(policy, capacity, record=True)
    for items, scores in steps:
        obs = sorted(scores)
        sim.step(items, None, (np.array(obs, dtype=np.int64), np.array([scores[i] for i in obs], dtype=float)))
    return sim


def first_readmission(steps, evictions):
    """First step that requests an item evicted earlier in the run (None if there is none)."""
    gone = set()
    by_step = {}
    for t, item in evictions:
        by_step.setdefault(t, []).append(item)
    for t, (items, _) in enumerate(steps):
        if any(i in gone for i in items):
            return t
        gone.update(by_step.get(t, []))
    return None


# -- construction ----------------------------------------------------------------------------------------------------

def test_wrapping_a_non_persistable_policy_is_a_one_line_parameter_error():
    with pytest.raises(ParameterError) as err:
        make("Persistent", policy="LRU")
    assert "LRU" in str(err.value) and "\n" not in str(err.value)


def test_bad_wrapper_parameters():
    with pytest.raises(ParameterError):
        make("Persistent", policy="EMA-Block", params="alpha=0.01")
    with pytest.raises(ParameterError):
        make("Persistent", policy="no-such-policy")
    with pytest.raises(ParameterError):
        make("Persistent", policy="EMA-Block", params={"alpha": 2.0})
    with pytest.raises(ParameterError):
        make("Persistent", policy="Persistent")  # the wrapper itself keeps no per-item state


def test_registry_builds_persistent_lfu_and_ema_with_json_friendly_parameters():
    assert make("Persistent", policy="LFU").inner.name == "LFU"
    ema = make("Persistent", policy="EMA-Block", params={"alpha": 0.01})
    assert ema.inner.alpha == 0.01 and ema.label == "Persistent(EMA-Block, alpha=0.01)"
    json.dumps(get("Persistent").as_dict())
    json.dumps({"policy": "EMA-Block", "params": {"alpha": 0.01}})


def test_ema_block_rejects_bad_parameters():
    for bad in ({"alpha": 0.0}, {"alpha": 1.5}, {"beta": 0.0}, {"beta": float("inf")}, {"unattended": "freeze"},
                {"alpha": True}):
        with pytest.raises(ParameterError):
            make("EMA-Block", **bad)


# -- equal to the plain policy until something comes back -------------------------------------------------------------

traces = st.lists(st.tuples(st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
                            st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3)),
                  min_size=1, max_size=60)


# every registered persistable policy with its defaults (LFU, EMA-Block, ACC, LRFU, GD-A, ... as they are added), plus
# EMA-Block's other reading: the wrapper relies only on the export/import contract of policies/base.py
EVERY_PERSISTABLE = sorted({(i.name, None) for i in all_policies("rm") if i.cls.persistable} | set(
    (n, None if p is None else tuple(sorted(p.items()))) for n, p in PERSISTABLE), key=str)


@pytest.mark.parametrize("name, params", [(n, None if p is None else dict(p)) for n, p in EVERY_PERSISTABLE])
@given(raw=traces, capacity=st.integers(3, 5))
def test_persistent_equals_plain_until_the_first_readmission(name, params, raw, capacity):
    steps = [(items, dict(zip(items, w))) for items, w in raw]
    plain = drive(make(name, **(params or {})), steps, capacity)
    kept = drive(make("Persistent", policy=name, params=params), steps, capacity)
    t1 = first_readmission(steps, plain.evictions)
    if t1 is None:
        assert kept.evictions == plain.evictions and kept.cost == plain.cost
    else:
        # the state is imported after the re-admission's evictions, so step t1 itself still agrees
        assert [e for e in kept.evictions if e[0] <= t1] == [e for e in plain.evictions if e[0] <= t1]


@pytest.mark.parametrize("name, params", PERSISTABLE)
def test_persistent_equals_plain_on_a_run_without_readmission(name, params):
    # each item is requested in one run of consecutive steps and never again, so evictions never come back
    rng = np.random.default_rng(3)
    steps = [([item], {item: float(rng.random())}) for item in range(40) for _ in range(int(rng.integers(1, 5)))]
    plain = drive(make(name, **(params or {})), steps, 2)
    kept = drive(make("Persistent", policy=name, params=params), steps, 2)
    assert first_readmission(steps, plain.evictions) is None and len(plain.evictions) == 38
    assert kept.evictions == plain.evictions and kept.misses == plain.misses == 40


# -- hand-worked re-admission traces ---------------------------------------------------------------------------------

A, B, C = 10, 11, 12


def test_lfu_readmission_trace():
    """k = 2.  A is hit to count 3, then evicted while B and C are protected; it returns.  Plain LFU restarts A at
    count 1 and evicts it again at step 6; persistent LFU restores 1 + 3 = 4, evicts B (count 2) instead, and step 7
    is a hit.

    t0 [A] miss A=1 | t1 [A] A=2 | t2 [A] A=3 | t3 [B] miss B=1 | t4 [B,C]: B=2, evict A (only unprotected)
    t5 [A]: evict C (1 < 2); A = 1 plain / 4 persistent | t6 [C]: plain evicts A (1 < 2), persistent evicts B (2 < 4)
    t7 [A]: plain miss, evicts C (count 1 < B's 2); persistent hit.  Misses: plain 6, persistent 5.
    """
    steps = [([A], {}), ([A], {}), ([A], {}), ([B], {}), ([B, C], {}), ([A], {}), ([C], {}), ([A], {})]
    plain = drive(make("LFU"), steps, 2)
    kept = drive(make("Persistent", policy="LFU"), steps, 2)
    assert plain.evictions == [(4, A), (5, C), (6, A), (7, C)] and plain.misses == 6
    assert kept.evictions == [(4, A), (5, C), (6, B)] and kept.misses == 5


# t0 [A] A scored 0.8 | t1 [B] 0.2 | t2 [B, C] both 0.2: A is the only unprotected block -> evicted
# t3 [A, B]: C evicted (only unprotected); A re-admitted, not observed | t4 [C]: A and B have the same age 1
# t5 [A]
EMA_TRACE = [([A], {A: 0.8}), ([B], {B: 0.2}), ([B, C], {B: 0.2, C: 0.2}), ([A, B], {}), ([C], {}), ([A], {})]


@pytest.mark.parametrize("params", [{"alpha": 0.5, "unattended": "hold"}, {"alpha": 0.1}])
def test_ema_readmission_trace(params):
    """Scores at the eviction of step 4 (A and B both last accessed at step 3, so equal recency):

    hold, alpha 0.5: s_B = 0.5*0.2 + 0.5*0.1 = 0.15; plain s_A = 0 -> p_A > p_B, evict A;
                     persistent s_A = 0.4 (restored) -> p_A = 0.6 r < p_B = 0.85 r, evict B.
    decay, alpha 0.1: s_B(3) = (0.1*0.2 + 0.9*0.02) * 0.9 = 0.0342; plain s_A = 0, evict A;
                      persistent s_A(3) = 0.08 * 0.9^3 = 0.05832 > s_B, evict B.
    Step 5: plain must fetch A again and evicts B (age 2 beats C's age 1); persistent hits A.
    """
    plain = drive(make("EMA-Block", **params), EMA_TRACE, 2)
    kept = drive(make("Persistent", policy="EMA-Block", params=params), EMA_TRACE, 2)
    assert plain.evictions == [(2, A), (3, C), (4, A), (5, B)] and plain.misses == 6
    assert kept.evictions == [(2, A), (3, C), (4, B)] and kept.misses == 5


def test_ema_decay_reading_forgets_over_long_gaps():
    """With alpha = 0.5 under "decay" the restored score of A has decayed to 0.4 * 0.5^3 = 0.05 by step 4, below B's
    0.075, so persistence changes nothing on the same trace: both runs evict A at step 4."""
    plain = drive(make("EMA-Block", alpha=0.5), EMA_TRACE, 2)
    kept = drive(make("Persistent", policy="EMA-Block", params={"alpha": 0.5}), EMA_TRACE, 2)
    assert plain.evictions == kept.evictions == [(2, A), (3, C), (4, A), (5, B)]


# -- the victim search equals a full scan ----------------------------------------------------------------------------

@pytest.mark.parametrize("params", [{"alpha": 0.2, "beta": 0.05}, {"alpha": 0.2, "beta": 0.05, "unattended": "hold"},
                                    {"alpha": 0.9, "beta": 0.5, "unattended": "hold"}])
@given(raw=st.lists(st.tuples(st.lists(st.integers(0, 15), min_size=1, max_size=3, unique=True),
                              st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 1), min_size=3,
                                       max_size=3),
                              st.booleans()),
                    min_size=1, max_size=80),
       capacity=st.integers(3, 6))
def test_victims_match_a_full_scan_of_priority(params, raw, capacity):
    pol = make("EMA-Block", **params)
    sim = RMSimulator(pol, capacity, record=True)
    for t, (items, w, observe) in enumerate(raw):
        candidates = [i for i in pol.resident if i not in items] if t else []
        need = len(pol.resident | set(items)) - capacity if t else 0
        ranked = sorted(candidates, key=lambda i: (-pol.priority(i, t), t - pol.age(i, t), i))
        idx = np.array(sorted(items), dtype=np.int64) if observe else np.zeros(0, dtype=np.int64)
        sim.step(items, None, (idx, np.array(w[: idx.size])))
        chosen = [v for s, v in sim.evictions if s == t]
        assert len(chosen) == max(need, 0)
        assert chosen == ranked[: len(chosen)]
