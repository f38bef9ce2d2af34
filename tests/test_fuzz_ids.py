"""Item ids as part of the fuzzer's search space (issue 50 item 1): :mod:`adversary.relabel` renames a trace's items
one-to-one, and a policy whose flaw is keyed on id values -- a residue, a threshold -- is found; with relabelling
turned off (the fuzzer's ids ``0 ... 3k`` only) the same budget passes it."""

from __future__ import annotations

import numpy as np
import pytest

import policies
from adversary import relabel
from adversary.lower_bounds import uniform_k_plus_one
from kvcore.measure import measure
from verify.fuzz import fuzz_policy

STICKY, LARGE = "bench.power_policies:StickyResidue", "bench.power_policies:LargeIdMRU"


@pytest.mark.parametrize("family", relabel.ID_FAMILIES)
def test_renaming_is_one_to_one_and_keeps_what_ignores_ids(family):
    trace = uniform_k_plus_one(3, 200, seed=1)
    renamed = relabel.relabel(trace, family, seed=7)
    old, new = trace.items.tolist(), renamed.items.tolist()
    assert len(set(zip(old, new))) == len(set(old)) == len(set(new))     # a bijection between the two alphabets
    assert set(new).isdisjoint(range(4)) or family == "large"
    lru = [measure(policies.resolve("LRU"), tr, 3) for tr in (trace, renamed)]
    assert lru[0].costs == lru[1].costs and lru[0].opt_cost == lru[1].opt_cost


def test_the_families_give_the_values_they_promise():
    rng = np.random.default_rng(0)
    large = relabel.new_ids(400, "large", rng)
    assert large.min() < 2 ** 10 and large.max() > 2 ** 50            # small and large side by side
    sparse = relabel.new_ids(400, "sparse", rng)
    assert (np.diff(sparse) > 0).all() and 500 < np.diff(sparse).mean() < 2000
    hits = 0
    for seed in range(50):
        ids = relabel.new_ids(40, "residue", np.random.default_rng(seed))
        hits += max(np.bincount(ids % m).max() for m in range(2, 17)) >= 20   # half share one residue
    assert hits == 50


@pytest.mark.parametrize("target, keyed", [(STICKY, lambda ids: (ids % 16 == 11).any()),
                                           (LARGE, lambda ids: (ids >= 10 ** 6).any())])
def test_a_flaw_keyed_on_id_values_is_found(target, keyed):
    """Found in 8 s (and at the default 60 s, by bench.fuzz_power); its counterexample, shrunk too, has the ids its
    flaw is keyed on."""
    rep = fuzz_policy(target, 3, seconds=8)
    assert rep.verdict == "violates", rep.as_dict()
    assert keyed(rep.worst_trace.items) and keyed(rep.shrunk_trace.items)


def test_a_flaw_on_large_ids_needs_the_renaming(monkeypatch):
    """The control: with no id family the fuzzer passes LargeIdMRU in the same budget -- ids of 10^6 and more are out
    of reach of the constructions, the search and the warm-ups, which is what issue 50 found.  (A residue flaw is
    not out of reach: the warm-ups' ids run into the hundreds, and StickyResidue is also found after one.)"""
    monkeypatch.setattr(relabel, "ID_FAMILIES", ())
    control = fuzz_policy(LARGE, 3, seconds=8)
    assert control.verdict == "no violation found", control.as_dict()
