"""Depth and shrinking of the fuzzer (issue 32; issue 28 item 9): a flaw that starts only after many evictions is
found within the budget, sound policies spend the budget and pass, and a counterexample -- short from the search or
10^5 steps long -- shrinks to a locally minimal trace (removing any one step loses the violation), checked here by
removing each step and measuring again.

The planted-flaw policies are the benchmark's (``bench/power_policies.py``), loaded by ``module:Class`` as a user's
policy would be; the budgets are short so that CI stays fast (the default 60 s run is ``python -m
bench.fuzz_power``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import pytest

import policies
from adversary import constructions, cyclic_k_plus_one
from adversary.warmups import concat_attention, nm_warmup, rm_warmup
from bench.power_policies import LateLIFO
from kvcore.measure import measure, within
from kvcore.traces import PagingTrace
from policies.lifo import LIFO
from tests.command_line import run_module
from verify.config import FuzzConfig
from verify.deepen import Climber
from verify.fuzz import fuzz_policy
from verify.questions import SEEDS, RatioBound
from verify.search import Search
from verify.shrink import minimize, without_steps
from verify.supervisor import GRACE


@dataclass
class LateLIFOAfter1000(LateLIFO):
    """LRU for 1000 evictions, then LIFO: no trace of the base-length stages gets there."""

    switch_after: int = 1000


def ratio(name, trace, k=3):
    return measure(policies.resolve(name), trace, k).judged("ratio")


def test_a_flaw_after_1000_evictions_is_found_by_going_deeper():
    # at the base length nothing reaches the switch: the constructions and the search stay within LRU's bound
    rep = fuzz_policy("tests.test_fuzz_depth:LateLIFOAfter1000", 3, seconds=40)
    assert all(v <= 3 + 1e-9 for v in rep.constructions.values()) and rep.search_worst <= 3
    assert rep.verdict == "violates" and rep.worst > 3, rep.as_dict()
    assert " x" in rep.worst_source and rep.worst_trace.T > 1000     # found by the deepening stage
    assert rep.longest_trace >= rep.worst_trace.T and rep.first_violation_seconds < rep.seconds
    assert rep.seconds < 40 + GRACE + 1   # the budget is kept


@pytest.mark.parametrize("target", ["LRU", "FIFO", "bench.power_policies:MarkingFIFO"]
                         + [i.name for i in policies.all_policies("rm") if i.guarantee and i.name != "LRU"
                            and i.name != "FIFO"])
def test_sound_policies_spend_the_budget_and_pass(target):
    rep = fuzz_policy(target, 3, seconds=5)
    assert rep.verdict == "no violation found", rep.as_dict()
    assert rep.seconds >= 0.9 * 5                          # no early stop without a violation
    assert rep.longest_trace > 20 * 4                      # past the constructions' base length 20 (k + 1)


@dataclass
class CoinLIFO(LIFO):
    """FIFO or LIFO, by a fair coin at each run's start, promising H_k: half its runs are LIFO's, so its expected
    ratio on LIFO's bad traces grows with their length (a randomized policy that truly breaks its bound)."""

    name = "CoinLIFO"
    deterministic = False
    guarantee = "H_k"

    def on_reset(self) -> None:
        super().on_reset()
        self._lifo = bool(self.rng.integers(2))

    def victim(self, t, protected):
        order = reversed(self._stack) if self._lifo else iter(self._stack)
        return next(item for item in order if item not in protected)


# OnlineMin's "violation" of H_3 found by the fuzzer before fresh runs confirmed values (seed 2, 60 s, k = 3): the
# interval of its 8 runs lies above 11/6, but its expected ratio is 1.805 (4,000 other runs): the search kept the
# trace on which those 8 runs happened to go badly.
SELECTED_BY_ITS_RUNS = [int(c) for c in (
    "0123012310230123012303201230123001203123012012301230123012301233012301230123012301231023012301230123"
    "0123012301230123012301203123012301230123012031230123012123301231233012312330123123301231233012312330"
    "12312330123123301231233012330123012301230123013012301230012333201123012301231023012301310123001303")]


class _Asking:
    """What a question needs of the search: the policy factory, k, and the search's measure."""

    def __init__(self, name, k=3):
        self.make, self.k, self.cfg = policies.resolve(name), k, FuzzConfig(name, k)

    def measure(self, make, trace, opt=None, seeds=range(SEEDS), confidence=0.95):
        return measure(make, trace, self.k, seeds=seeds, opt=opt, confidence=confidence)


def test_a_randomized_value_above_the_bound_is_confirmed_on_fresh_runs():
    question = RatioBound(_Asking("OnlineMin"))
    assert question.bound == pytest.approx(11 / 6)
    trace = PagingTrace.unit(SELECTED_BY_ITS_RUNS)
    selected = measure(policies.resolve("OnlineMin"), trace, 3, seeds=range(SEEDS))
    assert question.exceeds(selected.judged("ratio"))          # the selection's own runs say "violates"
    value, details = question.evaluate(trace)
    assert not question.exceeds(value), (value, details)
    assert details["cost"] != selected.cost             # the value and its details are the fresh runs'


def test_a_randomized_policy_that_breaks_its_bound_is_still_found():
    rep = fuzz_policy("tests.test_fuzz_depth:CoinLIFO", 3, seconds=10)
    assert rep.verdict == "violates" and rep.worst > 11 / 6, rep.as_dict()


def test_the_report_states_the_longest_trace_tried(tmp_path):
    # 8 s: a command line's budget counts from its process's start, and a loaded machine imports slowly
    code, out, err = run_module("verify", "LRU", "-k", "3", "--seconds", "8", cwd=tmp_path)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("depth:"))
    assert int(line.split("longest trace measured ")[1].split()[0]) > 80


def is_locally_minimal(name, trace, bound, k=3):
    """Removing any one step of the unit trace brings the ratio within ``bound`` (recomputed from scratch)."""
    items = trace.items
    return all(within(ratio(name, PagingTrace.unit(np.delete(items, i)), k), bound) for i in range(items.size))


def test_the_search_counterexample_for_lfu_is_locally_minimal():
    rep = fuzz_policy("LFU", 3, examples=60, seconds=30)
    assert rep.verdict == "violates" and rep.shrunk_minimal is True
    assert ratio("LFU", rep.shrunk_trace) == pytest.approx(rep.shrunk) and rep.shrunk > 3
    assert is_locally_minimal("LFU", rep.shrunk_trace, 3)


def test_a_construction_counterexample_is_shrunk_when_the_search_finds_none():
    # at k = 2 LIFO breaks the bound on the adaptive construction; with one example the search does not
    rep = fuzz_policy("LIFO", 2, examples=1, seconds=20)
    assert rep.verdict == "violates" and rep.shrunk_minimal is True and rep.shrunk_trace.T < rep.worst_trace.T
    assert is_locally_minimal("LIFO", rep.shrunk_trace, 2, k=2)


def test_a_long_counterexample_shrinks_to_a_readable_minimal_one():
    k = 3
    items = np.array([0, 1, 2] + [3, 2] * 60_000)       # LIFO faults on every request of the alternation
    noise = np.random.default_rng(1).integers(4, 10, size=items.size // 100)
    items[3::100][:noise.size] = noise                  # one request in a hundred on another item
    long = PagingTrace.unit(items)
    assert long.T > 10**5 and ratio("LIFO", long) > k
    small, complete = minimize(long, lambda tr: ratio("LIFO", tr) > k, time.monotonic() + 120)
    assert complete and small.T <= 30, small.T
    assert ratio("LIFO", small) > k and is_locally_minimal("LIFO", small, k)


def test_minimize_reports_a_cut_short_run():
    trace = PagingTrace.unit([0, 1, 2] + [3, 2] * 100)
    small, complete = minimize(trace, lambda tr: ratio("LIFO", tr) > 3, time.monotonic() - 1)
    assert not complete and small is trace


def test_removing_an_attention_step_keeps_a_valid_trace():
    tr = concat_attention(nm_warmup("random", 20, seed=3), nm_warmup("benign", 10))
    keep = np.ones(tr.T, dtype=bool)
    keep[[0, 5, 21]] = False
    out = without_steps(tr, keep)      # validated on construction: rows sum to 1, no future token
    assert out.T == tr.T - 3
    assert np.allclose(np.add.reduceat(out.weights, out.indptr[:-1]), 1.0)


def test_constructions_grow_with_the_scale_and_take_a_warm_up():
    make = policies.resolve("LRU")
    for c in constructions("rm"):
        one, four = c.built(3, make, 1), c.built(3, make, 4)
        assert four.T > 2 * one.T, c.name
        warm = rm_warmup("benign", 3, 100)
        after = c.built(3, make, 1, warm)
        assert after.T == one.T + 100 and np.array_equal(after.items[:100], warm.items)


def test_the_power_benchmark_through_its_command_line():
    # from the repository root, like every benchmark (bench/ is not an installed package)
    code, out, err = run_module("bench.fuzz_power", "--help")
    assert code == 0 and all(o in out for o in ("--seconds", "--only", "--json")), err
    code, _, err = run_module("bench.fuzz_power", "--seconds", "nan")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--seconds" in err
    code, out, err = run_module("bench.fuzz_power", "--only", "LIFO", "--seconds", "8", "--json")
    row = json.loads(out)["rows"][0]
    assert code == 0 and row["flagged"] and row["as_expected"] and row["found"] > 3, err
    assert row["first_violation_seconds"] is not None and row["first_violation_seconds"] <= row["seconds"]


@pytest.mark.parametrize("name, reach", [("LRU", None), ("LIFO", 3), ("LFU", 3)])
def test_the_climber_alone_reaches_what_the_constructions_reach(name, reach):
    """From uniform random requests, with no construction to start from: LRU's ratio near the cyclic sequence's
    at the same length (its worst case), LIFO and LFU above the bound."""
    s = Search(FuzzConfig(name, 3).checked(), {}, lambda event: None, time.monotonic() + 60)
    s.prepare()
    climber = Climber(s)
    climber.climb(160, time.monotonic() + 5)
    target = ratio(name, cyclic_k_plus_one(3, 160)) if reach is None else reach
    assert climber.value > (0.97 * target if reach is None else target), (climber.value, target)


def test_the_depth_probe_reaches_long_traces_early():
    """A plain-Python policy (no array kernel) in 12 s: the depth probe runs the adaptive construction at the
    longest length that fits, 40,960 requests on a loaded 2-core machine, where rounds of every construction and
    warm-up alone reached 5,120 (seen with DEPTH_PROBE_SHARE = 0)."""
    rep = fuzz_policy("Clock-new-referenced", 3, seconds=12)
    assert rep.verdict == "no violation found" and rep.longest_trace >= 20 * 4 * 2 ** 8, rep.as_dict()


@pytest.mark.slow
def test_at_the_default_budget_a_plain_python_policy_reaches_ten_to_the_five():
    rep = fuzz_policy("Clock-new-referenced", 3)
    assert rep.verdict == "no violation found" and rep.longest_trace >= 10 ** 5, rep.as_dict()
