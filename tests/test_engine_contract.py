"""The engine rejects every kind of broken policy with a one-line error naming the policy, the step and the item.

Broken policies live in ``tests/broken_policies.py``.  The RM trace below is k=2, steps [0], [1], [0, 2]: the
first eviction is needed at step 2, where 0 is a hit (protected), 2 is a miss, and FIFO's legal victim is 1.
"""

from __future__ import annotations

import numpy as np
import pytest

import policies
from kvcore.engine import NMSimulator, RMSimulator, run, run_rm
from kvcore.errors import ContractViolation, ParameterError
from kvcore.traces import AttentionTrace, PagingTrace
from tests import broken_policies as bp

RM_TRACE = PagingTrace.from_steps([[0], [1], [0, 2]])


def _one_line(err) -> str:
    msg = str(err)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("cls,problem,item", [
    (bp.EvictsNonResident, "not resident", 10**6),
    (bp.EvictsProtected, "requested at this step", 0),
    (bp.EvictsTwice, "same item twice", 1),
])
def test_rm_contract_violations_name_policy_step_item(cls, problem, item):
    with pytest.raises(ContractViolation) as e:
        run_rm(cls(), RM_TRACE, 2)
    msg = _one_line(e.value)
    assert f"policy {cls.name!r}" in msg and "step 2" in msg and f"item {item}" in msg and problem in msg
    assert (e.value.policy, e.value.step, e.value.item) == (cls.name, 2, item)


def test_too_few_victims():
    with pytest.raises(ContractViolation) as e:
        run_rm(bp.TooFewVictims(), RM_TRACE, 2)
    msg = _one_line(e.value)
    # no single item is at fault here: the message names the policy, the step and the shortfall
    assert "'TooFewVictims'" in msg and "step 2" in msg and "returned 0 victim(s) but 1 are needed" in msg


@pytest.mark.parametrize("cls,shown", [(bp.NonIntVictim, "'1'"), (bp.FloatVictim, "1.0")])
def test_victim_must_be_an_int(cls, shown):
    with pytest.raises(ContractViolation) as e:
        run_rm(cls(), RM_TRACE, 2)
    msg = _one_line(e.value)
    assert f"policy {cls.name!r}" in msg and "step 2" in msg and f"victim {shown} is not an item id" in msg


@pytest.mark.parametrize("model", ["rm", "nm"])
def test_missing_interface_method_is_a_parameter_error(model):
    trace = RM_TRACE if model == "rm" else AttentionTrace.from_rows([{0: 1.0}])
    with pytest.raises(ParameterError) as e:
        run(bp.LacksObserve(), trace, 2, model=model)
    msg = _one_line(e.value)
    assert "'LacksObserve'" in msg and "observe" in msg


def test_working_reference_passes_the_same_trace():
    # the broken policies differ from FIFO only in their victims: FIFO itself evicts 1 at step 2
    assert run_rm(policies.make("FIFO"), RM_TRACE, 2, record=True).evictions == [(2, 1)]


# -- NM: no refetch ---------------------------------------------------------------------------------------------------

NM_ROWS = [{0: 1.0}, {0: 0.5, 1: 0.5}, {0: 0.5, 2: 0.5}, {0: 0.25, 1: 0.25, 3: 0.5}]


def test_nm_evicted_token_cannot_come_back():
    # The only way into an NM cache is to arrive (NMSimulator.step admits token t and nothing else), so a policy
    # that acts as if an evicted token were still cached is caught by the residency check.  k=2: it drops 0 at
    # step 2 (legal) and offers 0 again at step 3.
    sim = NMSimulator(bp.ForgetsEvictions(), 2)
    trace = AttentionTrace.from_rows(NM_ROWS)
    rows = list(trace.rows())
    for _, idx, w in rows[:3]:
        sim.step(idx, w)
    assert not sim.is_resident(0)
    with pytest.raises(ContractViolation) as e:
        sim.step(rows[3][1], rows[3][2])
    msg = _one_line(e.value)
    assert "'ForgetsEvictions'" in msg and "step 3" in msg and "item 0" in msg and "not resident" in msg


def test_nm_regret_keeps_charging_an_evicted_token():
    # FIFO, k=2 (hand-worked): t2 drops 0 -> regret a[2,0] = 0.5; t3 drops 1 -> resident {2,3}, regret
    # a[3,0] + a[3,1] = 0.5.  Token 0 is attended at t3 but stays out: total regret 1.0.
    sim = NMSimulator(policies.make("FIFO"), 2, record=True)
    for _, idx, w in AttentionTrace.from_rows(NM_ROWS).rows():
        sim.step(idx, w)
    res = sim.result()
    assert res.evictions == [(2, 0), (3, 1)]
    assert res.per_step.tolist() == [0.0, 0.0, 0.5, 0.5]
    assert sim.resident == frozenset({2, 3})


@pytest.mark.parametrize("name,model", [(i.name, m) for i in policies.all_policies() for m in i.models])
def test_capacity_is_never_exceeded_and_no_token_returns(name, model):
    rng = np.random.default_rng(2)
    k = 3
    if model == "rm":
        sim = RMSimulator(policies.make(name), k, seed=1)
        for _ in range(200):
            sim.step(rng.choice(8, size=int(rng.integers(1, k + 1)), replace=False).tolist())
            assert len(sim.resident) <= k
        return
    sim = NMSimulator(policies.make(name), k, seed=1)
    gone: set[int] = set()
    for t in range(60):
        before = sim.resident | {t}
        sim.step(np.arange(t + 1), rng.dirichlet(np.ones(t + 1)))
        after = sim.resident
        assert len(after) <= k and after <= before and not (after & gone)
        gone |= before - after


# -- engine input checks (fixed in this issue) -----------------------------------------------------------------------


def test_rm_step_rejects_a_repeated_item():
    sim = RMSimulator(policies.make("LRU"), 3)
    with pytest.raises(ParameterError, match="step 0: an item is requested twice"):
        sim.step([4, 4])


def test_rm_step_rejects_costs_that_do_not_match_items():
    sim = RMSimulator(policies.make("LRU"), 3)
    with pytest.raises(ParameterError, match="step 0: 2 items requested but 1 costs given"):
        sim.step([4, 5], [1.0])
