"""Contract fuzzing (issue 6): a hypothesis state machine drives every registered policy through random
interleavings of requests (RM) or arrivals with attention rows (NM) and checks, after every step, the engine contract
and the information rule:

- capacity holds and every requested item is resident after its step (RM);
- the policy's own view of residency (the base class's bookkeeping) equals the engine's;
- the policy is shown attention on resident tokens only;
- its decisions depend only on the past: replaying the steps so far on a fresh instance (same seed) makes the same
  evictions, so nothing it did can have depended on a step it had not seen.

A policy that reads the future (here: by walking up the call stack to the engine's trace) is caught by
``verify.check.assert_prefix_consistent`` and reported as a contract violation, and so is it by ``fuzz`` when it
runs inside the engine's process (a registered policy); as ``module:Class`` the fuzzer runs it in its own process
(:mod:`verify.isolated`), where there is no trace to read.
"""

import inspect
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import policies
from adversary import cyclic_k_plus_one
from kvcore.engine import NMSimulator, RMSimulator
from kvcore.errors import ContractViolation
from kvcore.measure import measure
from kvcore.traces import PagingTrace
from policies.lru import LRU
from verify.check import assert_prefix_consistent
from verify.fuzz import fuzz_policy

ITEMS = 6


def spied(name: str):
    """An instance of the registered policy whose ``observe`` records what it is shown."""
    pol = policies.make(name)
    seen = []
    inner = pol.observe

    def observe(t, items, weights):
        seen.append(items.tolist())
        inner(t, items, weights)

    pol.observe = observe
    return pol, seen


def machine_for(name: str, model: str):
    class PolicyMachine(RuleBasedStateMachine):
        @initialize(k=st.integers(1, 4), seed=st.integers(0, 3))
        def start(self, k, seed):
            self.k, self.seed = k, seed
            self.policy, self.seen = spied(name)
            Sim = RMSimulator if model == "rm" else NMSimulator
            self.sim = Sim(self.policy, k, seed, record=True)
            self.steps = []

        @precondition(lambda self: model == "rm")
        @rule(data=st.data())
        def request(self, data):
            q = data.draw(st.sets(st.integers(0, ITEMS - 1), min_size=1, max_size=min(2, self.k)))
            costs = data.draw(st.lists(st.integers(1, 5), min_size=len(q), max_size=len(q)))
            self.sim.step(sorted(q), [float(c) for c in costs])
            self.steps.append((sorted(q), [float(c) for c in costs]))
            assert set(q) <= self.sim.resident

        @precondition(lambda self: model == "nm")
        @rule(data=st.data())
        def arrive(self, data):
            t = self.sim.t
            support = sorted(data.draw(st.sets(st.integers(0, t), min_size=1, max_size=3)))
            w = np.asarray(data.draw(st.lists(st.integers(1, 9), min_size=len(support), max_size=len(support))),
                           dtype=float)
            self.sim.step(np.asarray(support), w / w.sum())
            self.steps.append((support, (w / w.sum()).tolist()))

        @invariant()
        def contract(self):
            if not hasattr(self, "sim"):
                return
            res = self.sim.resident
            assert len(res) <= self.k
            if hasattr(self.policy, "resident"):
                assert set(self.policy.resident) == set(res)
            for shown in self.seen[-1:]:
                assert set(shown) <= res

        @invariant()
        def decisions_depend_on_the_past_only(self):
            if not getattr(self, "steps", None):
                return
            fresh = policies.make(name)
            Sim = RMSimulator if model == "rm" else NMSimulator
            replay = Sim(fresh, self.k, self.seed, record=True)
            for a, b in self.steps:
                replay.step(a, b) if model == "rm" else replay.step(np.asarray(a), np.asarray(b))
            assert replay.evictions == self.sim.evictions

    PolicyMachine.__name__ = f"Machine_{name}_{model}"
    return PolicyMachine


CASES = [(i.name, m) for i in policies.all_policies() for m in i.models]


@pytest.mark.parametrize("name, model", CASES)
def test_policy_contract_under_random_interleavings(name, model):
    machine = machine_for(name, model)
    machine.TestCase.settings = settings(max_examples=15, stateful_step_count=25, deadline=None)
    machine.TestCase().runTest()


@dataclass
class PeeksAtTrace(LRU):
    """Cheats: walks up the call stack to the engine's trace and evicts the item requested furthest in the future."""

    name = "PeeksAtTrace"

    def victim(self, t, protected):
        trace = next((f.frame.f_locals["trace"] for f in inspect.stack() if "trace" in f.frame.f_locals), None)
        if trace is None:  # driven step by step (an adaptive adversary): nothing to peek at
            return super().victim(t, protected)
        future = trace.items[t + 1:].tolist()
        return max((i for i in self._order if i not in protected),
                   key=lambda i: future.index(i) if i in future else len(future))


def test_reading_the_future_is_a_contract_violation():
    trace = PagingTrace.unit([0, 1, 2, 0, 3, 1, 0, 2, 4, 0, 1, 3, 2, 0, 4, 1])
    with pytest.raises(ContractViolation, match="reads the future"):
        assert_prefix_consistent(PeeksAtTrace, trace, 3)
    assert_prefix_consistent(LRU, trace, 3)  # the honest policy passes the same check


def test_fuzz_isolates_a_future_reader_or_catches_it(registered):
    # as module:Class it runs in its own process, where no frame holds a trace: only its fallback (LRU) can run
    rep = fuzz_policy("tests.test_contract_statemachine:PeeksAtTrace", 3, examples=3, seconds=20)
    lru = measure(LRU, cyclic_k_plus_one(3, 80), 3).ratio   # the construction's trace, replayed by plain LRU
    assert rep.verdict == "no violation found" and rep.constructions["cyclic k+1"] == pytest.approx(lru)
    # registered, it runs inside the engine's process, reads the trace, and the information-rule check catches it
    registered(PeeksAtTrace)
    rep = fuzz_policy("PeeksAtTrace", 3, examples=3, seconds=30)
    assert rep.verdict == "contract violation" and "reads the future" in rep.contract_violation
