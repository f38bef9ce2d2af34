"""Policies declare what they promise (registry metadata, :mod:`policies.registry`), and the suite selects policies
by those declarations, never by a hand list: a newly registered policy that declares a bound is checked against it
with no other edit.  Declarations that the engine can check are checked here for every registered policy."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policies
from adversary.strategies import paging_traces, sparse_attention_traces
from kvcore.engine import NMSimulator, RMSimulator
from policies.base import Policy
from policies.fifo import FIFO
from policies.lru import LRU
from policies.registry import REGISTRY, register
from verify.fuzz import fuzz_policy
from theorems.results.classic import eq8_table, full_cache_policies, upper_bound_policies


def test_a_new_policy_declaring_a_bound_is_checked_against_it(registered, tmp_path):
    @dataclass
    class ThrowawayFIFO(FIFO):
        """FIFO under another name."""
        name = "Throwaway-FIFO"

    @dataclass
    class ThrowawayMRU(LRU):
        """Evicts the most recently used item but claims Sleator-Tarjan's bound."""
        name = "Throwaway-MRU"

        def victim(self, t, protected):
            return next(i for i in reversed(self._order) if i not in protected)

    registered(ThrowawayFIFO)
    registered(ThrowawayMRU)
    # the selections the theorem modules parametrize over (at collection, so a policy registered in
    # policies/__init__.py is collected with no other edit)
    assert {"Throwaway-FIFO", "Throwaway-MRU"} <= set(upper_bound_policies())
    assert {"Throwaway-FIFO", "Throwaway-MRU"} <= set(full_cache_policies())
    table = eq8_table(ks=(2, 3), T=120, seeds=1)
    assert {r.policy for r in table.rows} >= {"Throwaway-FIFO", "Throwaway-MRU"} and table.holds
    # and the fuzzer checks each against the bound it declares: the honest one passes, the one that breaks its
    # promise is caught
    honest = fuzz_policy("Throwaway-FIFO", 2, examples=30, seconds=5, out_dir=tmp_path)
    broken = fuzz_policy("Throwaway-MRU", 2, examples=60, seconds=20, out_dir=tmp_path)
    assert honest.bound_name.startswith("k/(k-h+1)") and not honest.violation
    assert broken.bound_name.startswith("k/(k-h+1)") and broken.violation and broken.worst > 2


@pytest.mark.parametrize("declaration, problem", [
    ({"guarantee": "k^2"}, "guarantee"),            # not a bound the toolkit knows
    ({"guarantee": "2H_k-1"}, "deterministic"),     # an expectation bound on a deterministic policy
    ({"signal": "vibes"}, "signal"),
])
def test_declarations_are_validated_at_registration(declaration, problem):
    bad = dataclass(type("BadDeclaration", (Policy,), {"name": "Bad-Declaration", **declaration}))
    with pytest.raises(TypeError, match=problem):
        register(bad)
    assert "bad-declaration" not in REGISTRY


def test_selection_by_metadata_rejects_unknown_keys():
    from kvcore.errors import ParameterError

    with pytest.raises(ParameterError, match="unknown metadata"):
        policies.all_policies(promised="k")


LAZY_RM = [i.name for i in policies.all_policies("rm") if i.lazy]
LAZY_NM = [i.name for i in policies.all_policies("nm") if i.lazy]


@pytest.mark.parametrize("name", LAZY_RM)
@settings(max_examples=15)
@given(trace=paging_traces(max_items=7, max_steps=40), k=st.integers(1, 4))
def test_a_lazy_policy_keeps_its_rm_cache_full(name, trace, k):
    """Declared ``lazy``: it evicts only what a fault needs, so after every step it holds min(k, distinct items
    requested so far) items."""
    sim = RMSimulator(policies.make(name), k)
    seen = set()
    for _, items, costs in trace.steps():
        sim.step(items.tolist(), costs.tolist())
        seen.update(items.tolist())
        assert len(sim.resident) == min(k, len(seen)), (name, sim.t)


@pytest.mark.parametrize("name", LAZY_NM)
@settings(max_examples=15)
@given(trace=sparse_attention_traces(max_T=30, max_support=4), k=st.integers(1, 5))
def test_a_lazy_policy_keeps_its_nm_cache_full(name, trace, k):
    sim = NMSimulator(policies.make(name), k)
    for t, idx, w in trace.rows():
        sim.step(idx, w)
        assert len(sim.resident) == min(k, t + 1), (name, t)


def test_fwf_is_declared_not_lazy_and_is_not():
    assert not policies.get("FWF").lazy and "FWF" not in full_cache_policies()
