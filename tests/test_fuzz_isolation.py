"""The fuzzer cannot be gamed (issue 14, item 5): a ``module:Class`` policy runs in its own process and receives only
the engine's five calls (:mod:`verify.isolated`).

The policies live in a user module, ``fuzz_gamers.py`` in the working directory (:data:`GAMERS`).  Each gaming one
is first shown to *work* against a plain in-process run -- so the test can fail -- and then shown to get the verdict
of what it really does once the fuzzer isolates it:

- ``StackGamer`` plays honest LRU while ``assert_prefix_consistent`` is on the stack and otherwise reads the trace
  from the engine's frame and evicts like Belady: in-process it passes the information-rule check and looks optimal.
  Isolated there is no frame to read, so its own fallback (MRU) runs, and the fuzzer reports ``violates``.
- ``CostZeroer`` (RM) evicts like MRU and zeroes the simulator's ``cost``/``misses`` through the stack: in-process its
  cost is below the exact optimum.  Isolated: ``violates``.  Run inside the engine's process (registered), the result
  below the optimum is a ``contract violation``, never "no violation found".
- ``Resurrector`` (NM) drops every arriving token and re-marks every token resident in the simulator: in-process it
  hides almost all its regret.  Isolated: its real regret is found to exceed Theorem 4's tail bound.
- ``Sleeper`` / ``ObserveSleeper`` do not answer: ``policy timeout`` ("the policy did not answer within S s") within
  the budget.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from contextlib import closing

import pytest

import policies
from adversary import cyclic_k_plus_one, decoy_and_sleeper, relabel, tail_mass, topic_shift
from kvcore.engine import RMSimulator, run_nm
from kvcore.errors import ContractViolation
from kvcore.measure import measure
from verify import search
from verify.check import assert_prefix_consistent
from verify.fuzz import fuzz_policy
from verify.isolated import PolicyFailed, PolicyHost
from verify.supervisor import GRACE

GAMERS = '''
"""Policies that try to game the fuzzer, or fail, as a user would write them."""

import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from kvcore.engine import RMSimulator
from kvcore.traces import PagingTrace
from policies.base import Policy
from policies.lru import LRU


def _mru(policy, protected):
    return next(i for i in reversed(policy._order) if i not in protected)


def _frames():
    """The caller's stack, innermost first (what a stack-walking policy reads)."""
    f = sys._getframe(1)
    while f is not None:
        yield f
        f = f.f_back


@dataclass
class StackGamer(LRU):
    """Honest while checked, Belady with the engine's trace otherwise, MRU when there is nothing to read."""

    name = "StackGamer"

    def victim(self, t, protected):
        frames = list(_frames())
        if any(f.f_code.co_name == "assert_prefix_consistent" for f in frames):
            return super().victim(t, protected)
        trace = next((f.f_locals["trace"] for f in frames if isinstance(f.f_locals.get("trace"), PagingTrace)), None)
        if trace is None:
            return _mru(self, protected)
        future = trace.items[t + 1:].tolist()
        return max((i for i in self._order if i not in protected),
                   key=lambda i: future.index(i) if i in future else len(future))


@dataclass
class CostZeroer(LRU):
    """MRU victims; zeroes the RM simulator's cost and misses whenever it can reach them."""

    name = "CostZeroer"

    def victim(self, t, protected):
        for f in _frames():
            sim = f.f_locals.get("self")
            if isinstance(sim, RMSimulator):
                sim.cost, sim.misses = 0.0, 0
        return _mru(self, protected)


@dataclass
class Resurrector(Policy):
    """NM: drops every arriving token, then marks every token resident again in the simulator's mask."""

    name = "Resurrector"
    models = frozenset({"nm"})

    def victim(self, t, protected):
        return t

    def on_observe(self, t, items, weights):
        for f in _frames():
            sim = f.f_locals.get("self")
            if type(sim).__name__ == "NMSimulator":
                sim._mask[: t + 1] = True


@dataclass
class Sleeper(LRU):
    name = "Sleeper"

    def victim(self, t, protected):
        time.sleep(60)
        return super().victim(t, protected)


@dataclass
class ObserveSleeper(Policy):
    name = "ObserveSleeper"
    models = frozenset({"rm", "nm"})

    def victim(self, t, protected):
        return min(self.resident - protected)

    def on_observe(self, t, items, weights):
        if t >= 3:
            time.sleep(60)


@dataclass
class RaisesOnNewItems(LRU):
    """Raises on any item above k."""

    name = "RaisesOnNewItems"

    def on_admit(self, t, item, cost):
        if item > self.k:
            raise ValueError(f"item {item} is beyond what I was tested on")
        super().on_admit(t, item, cost)


@dataclass
class SpyToFile(LRU):
    """Appends every call it receives to the file named by $KV_SPY_PATH."""

    name = "SpyToFile"
    models = frozenset({"nm"})

    def reset(self, capacity, rng, model="rm"):
        self._log(("reset", capacity, model))
        super().reset(capacity, rng, model)

    def admit(self, t, item, cost):
        self._log(("admit", t, item, cost))
        super().admit(t, item, cost)

    def on_observe(self, t, items, weights):
        self._log(("observe", t, items.tolist(), weights.tolist(), items.flags.writeable, weights.flags.writeable))

    def _log(self, call):
        with open(os.environ["KV_SPY_PATH"], "a") as fh:
            fh.write(repr(call) + "\\n")


RUNS = [0]


@dataclass
class CountsRuns(LRU):
    """Raises on its second run in the same process."""

    name = "CountsRuns"

    def on_reset(self):
        super().on_reset()
        RUNS[0] += 1
        if RUNS[0] > 1:
            raise RuntimeError("a run saw the state of an earlier run")


@dataclass
class ExitsInVictim(LRU):
    name = "ExitsInVictim"

    def victim(self, t, protected):
        os._exit(7)


@dataclass
class ReturnsJunk(Policy):
    name = "ReturnsJunk"

    def evict(self, t, need, protected):
        return [np.float64(0.0)]
'''


@pytest.fixture(scope="module")
def gamers_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("user")
    (d / "fuzz_gamers.py").write_text(GAMERS)
    sys.path.insert(0, str(d))
    importlib.invalidate_caches()
    yield d
    sys.path.remove(str(d))
    sys.modules.pop("fuzz_gamers", None)


@pytest.fixture
def gamers(gamers_dir, monkeypatch):
    """The user module, imported here for in-process runs; the working directory is its folder, as for a user."""
    monkeypatch.chdir(gamers_dir)
    return importlib.import_module("fuzz_gamers")


CYCLIC = cyclic_k_plus_one(3, 40)


def test_stack_gamer_fools_an_in_process_run_but_not_the_fuzzer(gamers):
    # without isolation the game works: the check sees honest LRU, the measurement sees Belady
    assert_prefix_consistent(gamers.StackGamer, CYCLIC, 3)
    assert measure(gamers.StackGamer, CYCLIC, 3).ratio == pytest.approx(1.0)
    rep = fuzz_policy("fuzz_gamers:StackGamer", 3, examples=5, seconds=30)
    # isolated, nothing on its stack holds a trace: it plays its MRU fallback, which the adaptive adversary beats
    assert rep.verdict == "violates" and rep.constructions["adaptive k+1"] > 10, rep.as_dict()
    assert rep.exit_code == 1


def test_cost_zeroer_is_caught_isolated_and_in_process(gamers, registered):
    m = measure(gamers.CostZeroer, CYCLIC, 3)
    assert m.cost < m.opt_cost  # the plain in-process run is fooled
    rep = fuzz_policy("fuzz_gamers:CostZeroer", 3, examples=5, seconds=30)
    assert rep.verdict == "violates" and rep.worst > 3
    registered(gamers.CostZeroer)  # a registered policy runs inside the worker: the result below OPT is flagged
    rep = fuzz_policy("CostZeroer", 3, examples=5, seconds=30)
    assert rep.verdict == "contract violation" and "below the exact optimum" in rep.message, rep.as_dict()


def test_resurrector_is_caught_in_nm(gamers):
    # its evictions are LIFO's in NM (drop the arriving token); in-process it hides almost all of LIFO's regret
    tr = topic_shift(64, 16, 1, zipf_s=0.0, sinks=0, sink_mass=0.0, self_mass=0.0).trace
    honest = run_nm(policies.make("LIFO"), tr, 4).cost
    assert run_nm(gamers.Resurrector(), tr, 4).cost <= 3.0 < honest / 10
    rep = fuzz_policy("fuzz_gamers:Resurrector", 4, model="nm", examples=2, seconds=8)
    assert rep.verdict == "violates" and rep.worst > 1.0, rep.as_dict()
    # the reported value is LIFO's real regret on that trace minus its tail mass
    lifo = run_nm(policies.make("LIFO"), rep.worst_trace, 4).cost
    assert lifo - tail_mass(rep.worst_trace, 0.25) == pytest.approx(rep.worst)


@pytest.mark.parametrize("cls, model, call", [("Sleeper", "rm", "evict at step"),
                                              ("ObserveSleeper", "nm", "observe at step 3")])
def test_a_policy_that_does_not_answer_times_out_within_the_budget(gamers, cls, model, call):
    rep = fuzz_policy(f"fuzz_gamers:{cls}", 3, model=model, examples=20, seconds=8, call_timeout=0.5)
    assert rep.verdict == "policy timeout" and rep.exit_code == 1
    assert rep.message.startswith("the policy did not answer within 0.5 s") and call in rep.message, rep.message
    assert rep.seconds < 8 + GRACE


def test_the_budget_bounds_a_sleeper_with_a_long_call_timeout(gamers):
    rep = fuzz_policy("fuzz_gamers:Sleeper", 3, examples=20, seconds=1.5, call_timeout=30)
    assert rep.seconds <= 1.5 + GRACE + 0.5 and rep.verdict == "inconclusive"
    assert rep.budget_ran_out and "budget ran out" in rep.notes[-1]


def test_a_policy_raising_only_in_the_search_gets_a_one_line_verdict_and_a_minimal_trace(gamers, monkeypatch):
    monkeypatch.setattr(search, "constructions", lambda model: [])  # so that it fails in the search only
    # and on the search's own ids (0 ... k + 1): a renamed trace fails at its first request, whatever hypothesis
    # shrinks, and this test is about hypothesis shrinking a policy's failure
    monkeypatch.setattr(relabel, "ID_FAMILIES", ())
    rep = fuzz_policy("fuzz_gamers:RaisesOnNewItems", 3, examples=40, seconds=30)
    assert rep.verdict == "policy error" and "\n" not in rep.message
    assert "ValueError: item 4 is beyond" in rep.message and "in admit at step" in rep.message
    assert 4 in rep.finding_trace.items.tolist() and rep.finding_trace.T <= 12


def test_alg_below_opt_with_an_isolated_policy_is_an_internal_error(gamers, monkeypatch):
    real = search.measure

    def inflated_optimum(*args, **kwargs):  # a broken optimum: the isolated policy cannot have caused this
        m = real(*args, **kwargs)
        return dataclasses.replace(m, opt=None, opt_cost=m.opt_cost + 100)

    monkeypatch.setattr(search, "measure", inflated_optimum)
    rep = fuzz_policy("fuzz_gamers:StackGamer", 3, examples=5, seconds=20)
    assert rep.verdict == "internal error" and rep.exit_code == 3
    assert "below the exact optimum" in rep.message and "isolated" in rep.message


def test_isolated_policy_receives_exactly_the_engine_calls(gamers, tmp_path, monkeypatch):
    """The host gets the engine's calls and nothing else: a spy in the host logs what it receives, which equals
    what the same spy logs in-process (attention on resident tokens only), with read-only arrays."""
    tr = decoy_and_sleeper(3, 0.01, 12)
    monkeypatch.setenv("KV_SPY_PATH", str(tmp_path / "local.txt"))
    run_nm(gamers.SpyToFile(), tr, 3)
    monkeypatch.setenv("KV_SPY_PATH", str(tmp_path / "isolated.txt"))  # the host inherits the environment
    with closing(PolicyHost("fuzz_gamers:SpyToFile", call_timeout=5)) as host:
        run_nm(host.factory()(), tr, 3)
        host.finish()
    read = lambda name: [eval(line) for line in (tmp_path / name).read_text().splitlines()]  # noqa: E731,S307
    local, isolated = read("local.txt"), read("isolated.txt")
    assert [c[:4] for c in isolated] == [c[:4] for c in local] and len(local) > 2 * tr.T
    assert all(c[4:] == (False, False) for c in isolated if c[0] == "observe")


def test_host_runs_are_fresh_processes(gamers):
    """Every run is a new process: CountsRuns raises on its second run in one process, which would surface here
    as PolicyFailed."""
    with closing(PolicyHost("fuzz_gamers:CountsRuns", call_timeout=5)) as host:
        make = host.factory()
        for _ in range(3):
            sim = RMSimulator(make(), 2)
            for item in (0, 1, 2):
                sim.step([item])
        host.finish()


def test_host_reports_failures_of_its_process(gamers):
    with closing(PolicyHost("fuzz_gamers:ExitsInVictim", call_timeout=5)) as host:
        sim = RMSimulator(host.factory()(), 1)
        sim.step([0])
        with pytest.raises(PolicyFailed, match=r"exited with status 7 during calls: reset, admit at step 0, evict"):
            sim.step([1])
        sim = RMSimulator(host.factory()(), 2)   # the host still serves new runs
        sim.step([0])
        host.finish()


def test_victims_that_are_not_item_ids_are_refused_by_the_engine(gamers):
    with closing(PolicyHost("fuzz_gamers:ReturnsJunk", call_timeout=5)) as host:
        sim = RMSimulator(host.factory()(), 1)
        sim.step([0])
        with pytest.raises(ContractViolation, match="is not an item id"):
            sim.step([1])
