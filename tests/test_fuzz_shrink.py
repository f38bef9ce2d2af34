"""Shrinking that ends (issue 50 item 4): a counterexample of 10^5 requests -- a warm-up, then a period repeated --
is shrunk by its structure (the period's fewest repeats, the warm-up removed) and then by delta debugging to a
locally minimal trace, within a budget of seconds; the fuzzer's report says how, and whether it is minimal."""

from __future__ import annotations

import time

import numpy as np

import policies
from adversary import second_chance_breaker
from adversary.lower_bounds import SECOND_CHANCE_PERIOD
from kvcore.measure import measure
from kvcore.traces import PagingTrace
from verify.fuzz import fuzz_policy
from verify.shrink import minimize, periodic_tail, structured, without_steps

CLOCK = policies.resolve("Clock-new-unreferenced")
WARM = 10_000


def above_3(trace) -> bool:
    return measure(CLOCK, trace, 3).ratio > 3 * (1 + 1e-9)


def deep_counterexample() -> PagingTrace:
    """10,000 random requests over 5 items (a warm-up on which Clock is within 3), then the 25-request period
    repeated 3,600 times: 10^5 requests, above 3."""
    warm = np.random.default_rng(0).integers(0, 5, size=WARM)
    return PagingTrace.unit(np.concatenate([warm, second_chance_breaker(3600).items]))


def test_a_periodic_tail_is_recognised():
    items = deep_counterexample().items
    assert periodic_tail(items) == (WARM + _first_aligned(items), len(SECOND_CHANCE_PERIOD))


def _first_aligned(items) -> int:
    """How far the repeating tail reaches back into the warm-up by chance (the warm-up's last requests may match
    the period's): found independently, request by request."""
    p, start = len(SECOND_CHANCE_PERIOD), WARM
    while start > 0 and items[start - 1] == items[start - 1 + p]:
        start -= 1
    return start - WARM


def test_a_deep_counterexample_shrinks_to_a_locally_minimal_trace_within_its_budget():
    trace = deep_counterexample()
    assert above_3(trace)
    t0 = time.monotonic()
    smaller, how = structured(trace, above_3, t0 + 60)
    small, complete = minimize(smaller, above_3, t0 + 60)
    assert complete and time.monotonic() - t0 < 60 and above_3(small)
    assert "period repeated" in how[0] and small.T < 400, (how, small.T)
    for t in range(small.T):                        # locally minimal, checked here step by step
        keep = np.ones(small.T, dtype=bool)
        keep[t] = False
        assert not above_3(without_steps(small, keep))


def test_the_report_says_how_the_counterexample_was_shrunk():
    rep = fuzz_policy("Clock-new-unreferenced", 3, seconds=20)
    assert rep.verdict == "violates" and rep.shrunk_how, rep.as_dict()
    assert rep.shrunk_how[-1].startswith("delta debugging: " + ("locally minimal" if rep.shrunk_minimal else "cut"))
    assert rep.as_dict()["shrunk_how"] == rep.shrunk_how and rep.shrink_seconds > 0
