"""Mutation test: the suite must catch a deliberately wrong policy.

``EvictsMostRecent`` is LRU with its ordering reversed (it evicts the most recently used item, i.e. MRU).  MRU is
not competitive (on ``0 1 2 1 2 1 2 ...`` with k = 2 it faults on every request after the first two while OPT
faults once), so every result that holds for LRU must fail for it: the Eq. 8 upper bound, the phase argument, and
the fuzzer must report a violation without being told the sequence.
"""

from dataclasses import dataclass
from pathlib import Path

from kvcore.formulas import landlord_bound
from kvcore.traces import PagingTrace
from policies.lru import LRU
from verify.fuzz import fuzz_policy
from theorems.results.classic import phase_argument_rows
from theorems.tables import evaluate


@dataclass
class EvictsMostRecent(LRU):
    """LRU with the wrong end of the recency order."""

    name = "LRU-mutant"

    def victim(self, t, protected):
        for item in reversed(self._order):
            if item not in protected:
                return item
        raise RuntimeError("no evictable item")


PING_PONG = PagingTrace.unit([0, 1] + [2, 1] * 20)


def test_mutant_breaks_eq8():
    row = evaluate("eq8", EvictsMostRecent(), PING_PONG, 2, bound=landlord_bound(2, 2))
    assert row.holds is False and row.ratio > 10


def test_lru_itself_passes_the_same_check():
    row = evaluate("eq8", LRU(), PING_PONG, 2, bound=landlord_bound(2, 2))
    assert row.holds is True


def test_mutant_breaks_the_phase_argument():
    assert phase_argument_rows(EvictsMostRecent, PING_PONG, 2, "ping-pong").holds is False
    assert phase_argument_rows(LRU, PING_PONG, 2, "ping-pong").holds is True


def test_fuzzer_finds_the_mutant(tmp_path):
    # as a user's module:Class, so it runs isolated in its own process like any user policy
    rep = fuzz_policy("theorems.test_mutation:EvictsMostRecent", 2, examples=30, seconds=30, out_dir=tmp_path)
    assert rep.verdict == "violates" and rep.worst > 2 and 2 < rep.shrunk <= rep.worst
    assert rep.trace_file and rep.trace_file.endswith("-worst.npy") and Path(rep.trace_file).exists()
    assert Path(rep.trace_file.replace("-worst.npy", "-shrunk.npy")).exists()


def test_fuzzer_passes_lru_itself():
    rep = fuzz_policy("LRU", 2, examples=30, seconds=5)   # a sound policy spends its whole budget
    assert rep.verdict == "no violation found" and rep.worst <= 2
