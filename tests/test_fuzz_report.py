"""An honest fuzz report (issue 50 item 5): every kind of violation found is reported with its counterexample (a
contract violation does not hide a ratio above the bound), the worst value is credited to the stage that found it
(never to "shrinking"), ``budget_ran_out`` is true whenever the budget cut anything short, and the command line ends
within one second of ``--seconds``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest

from bench.power_policies import PeriodicMRU
from kvcore.measure import measure
from policies.lifo import LIFO
from tests.command_line import run_module
from verify.fuzz import fuzz_policy


@dataclass
class LIFOBreakingOnNewIds(LIFO):
    """LIFO (unbounded ratio: the adaptive construction finds it first), which also breaks the engine's contract --
    it names the requested item as its victim -- once an id above ``k`` is requested (the constructions that bring
    new items per phase do, after the adaptive one)."""

    name = "LIFOBreakingOnNewIds"

    def victim(self, t, protected):
        late = [i for i in protected if i > self.k]
        return late[0] if late else super().victim(t, protected)


def test_a_contract_violation_does_not_hide_a_ratio_violation():
    rep = fuzz_policy("tests.test_fuzz_report:LIFOBreakingOnNewIds", 3, seconds=20)
    kinds = [v["kind"] for v in rep.violations]
    assert kinds == ["violates", "contract violation"], rep.as_dict()
    assert rep.verdict == "violates and contract violation" and rep.exit_code == 1
    ratio, contract = rep.violations
    # each with its own counterexample: the ratio's replays to the value reported (plain LIFO, the same victims
    # while no id above k is requested), the contract's requests an id above k
    assert ratio["trace"].items.max() <= 3 and contract["trace"].items.max() > 3
    assert measure(LIFO, ratio["trace"], 3).ratio == pytest.approx(ratio["value"])
    assert "evicts an item that is not resident" in contract["message"]   # the requested one is not, yet
    as_json = rep.as_dict()["violations"]
    assert [v["kind"] for v in as_json] == kinds and all(v["trace"] for v in as_json)


def test_the_worst_value_is_credited_to_the_stage_that_found_it():
    """LIFO's worst value comes from a construction or a search; when shrinking measures a larger value, the report
    still names where the trace being shrunk came from."""
    for target in ("LIFO", "LFU", "Clock-new-unreferenced"):
        rep = fuzz_policy(target, 3, seconds=12)
        assert rep.verdict == "violates", rep.as_dict()
        stage = rep.worst_source.removeprefix("shrinking the counterexample found by ")
        assert stage.startswith(("construction ", "targeted search", "climbing search", "periodic climbing search")), \
            rep.worst_source


def test_budget_ran_out_whenever_the_budget_cut_something_and_the_run_ends_on_time(tmp_path):
    seconds = 4.0
    t0 = time.monotonic()
    code, out, err = run_module("verify", "LRU", "-k", "3", "--seconds", repr(seconds), "--json", cwd=tmp_path)
    wall = time.monotonic() - t0
    assert code == 0, err
    rep = json.loads(out)
    # LRU has no violation: deepening goes on until the clock stops it, so the budget cut it short
    assert rep["budget_ran_out"] is True and any(c.startswith("deepening") for c in rep["cut_short"]), rep
    assert rep["verdict"] == "no violation found"
    assert wall <= seconds + 1.0, wall


@dataclass
class SlowPeriodicMRU(PeriodicMRU):
    """PeriodicMRU (above 3 on the adaptive construction's 80 requests) taking 5 ms per eviction: about 0.3 s per
    judgement of such a trace, so making it locally minimal (well over 80 judgements) cannot fit in 6 s."""

    name = "SlowPeriodicMRU"

    def victim(self, t, protected):
        time.sleep(0.005)
        return super().victim(t, protected)


def test_budget_ran_out_when_shrinking_is_cut_short():
    """The report says the shrinking was cut and that the budget ran out (it used to say null)."""
    rep = fuzz_policy("tests.test_fuzz_report:SlowPeriodicMRU", 3, seconds=6)
    assert rep.verdict == "violates" and rep.shrunk_minimal is False, rep.as_dict()
    assert rep.budget_ran_out and any("minimization" in c for c in rep.cut_short), rep.cut_short
