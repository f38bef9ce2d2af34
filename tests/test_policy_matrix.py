"""One matrix over every registered policy and every model it declares (issue 2 acceptance tests).

The cases are read from ``policies.all_policies()`` at collection time, so a policy added later by one line in
``policies/__init__.py`` is covered without touching this file.  Per case: the policy runs on generated traces
under the checked engine without a contract violation, the same seed gives the same run, a deterministic policy's
run does not depend on the seed, its cost respects bounds known independently of the policy, and it never beats
the exact optimum (``kvcore.optima.optimum``).  Traces are small and the example count is a quarter of the
profile's (10 under ``ci``) because the matrix runs for every policy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policies
from kvcore.engine import MODELS, NMSimulator, RMSimulator, run
from kvcore.traces import AttentionTrace, PagingTrace

CASES = [pytest.param(info.name, model, id=f"{info.name}-{model}")
         for info in policies.all_policies() for model in info.models]
NAMES = [info.name for info in policies.all_policies()]
EXAMPLES = max(5, settings.default.max_examples // 4)
THETA = 0.5  # RM requests from attention: at most 1/THETA earlier tokens plus the arrival per step
COSTS = [0.0, 0.5, 1.0, 2.0, 3.5]  # exact binary fractions, so cost sums compare without rounding slack


@st.composite
def paging_cases(draw):
    """(capacity, trace): several distinct requests per step (at most the capacity), per-request costs."""
    k = draw(st.integers(1, 4))
    n_items = draw(st.integers(1, k + 3))
    steps = draw(st.lists(st.lists(st.integers(0, n_items - 1), min_size=1, max_size=k, unique=True),
                          min_size=1, max_size=25))
    costs = [[draw(st.sampled_from(COSTS)) for _ in q] for q in steps]
    return k, PagingTrace.from_steps(steps, costs)


@st.composite
def attention_cases(draw, min_k=1):
    """(capacity, trace): row t puts integer-proportional mass on a subset of tokens 0..t that contains t."""
    k = draw(st.integers(min_k, min_k + 3))
    T = draw(st.integers(1, 18))
    rows = []
    for t in range(T):
        w = np.array(draw(st.lists(st.integers(0, 9), min_size=t + 1, max_size=t + 1)), dtype=float)
        w[t] += 1.0
        rows.append({i: x for i, x in enumerate(w / w.sum()) if x > 0})
    return k, AttentionTrace.from_rows(rows)


def _cases_for(model):
    return paging_cases() if model == "rm" else attention_cases()


def _cold_cost(trace: PagingTrace) -> float:
    """Cost every RM policy pays: both start empty, so each item's first request faults at that request's cost."""
    _, first = np.unique(trace.items, return_index=True)
    return float(trace.costs[first].sum())


# -- engine runs: contract, seeds, independent bounds -----------------------------------------------------------------


@pytest.mark.parametrize("name,model", CASES)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_runs_under_the_contract_and_is_seed_reproducible(name, model, data):
    k, trace = data.draw(_cases_for(model))
    seed = data.draw(st.integers(0, 2**31 - 1))
    info = policies.get(name)
    first = run(policies.make(name), trace, k, model=model, seed=seed, record=True)
    again = run(policies.make(name), trace, k, model=model, seed=seed, record=True)
    assert (again.evictions, again.cost, again.misses) == (first.evictions, first.cost, first.misses)
    if info.deterministic:
        other = run(policies.make(name), trace, k, model=model, seed=seed ^ 0x5EED, record=True)
        assert other.evictions == first.evictions
    if model == "rm":
        assert _cold_cost(trace) <= first.cost <= float(trace.costs.sum())
        assert first.requests == trace.n_requests
    else:
        assert -1e-9 <= first.cost <= trace.total_mass() + 1e-9
        if k >= trace.T:
            assert first.cost == 0.0 and not first.evictions  # everything fits: nothing may be evicted


@pytest.mark.parametrize("name", [n for n in NAMES if "rm" in policies.get(n).models])
@settings(max_examples=EXAMPLES)
@given(case=attention_cases(min_k=3))
def test_rm_on_attention_traces_with_observation(name, case):
    # the RM run of an attention trace also feeds attention rows to the policy (observe) under the contract
    k, trace = case
    a = run(policies.make(name), trace, k, model="rm", seed=7, theta=THETA, record=True)
    b = run(policies.make(name), trace, k, model="rm", seed=7, theta=THETA, record=True)
    assert a.evictions == b.evictions and a.cost == b.cost


# -- exact optimum -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,model", CASES)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_no_policy_beats_the_exact_optimum(name, model, data):
    from kvcore.optima import optimum

    k, trace = data.draw(_cases_for(model))
    alg = run(policies.make(name), trace, k, model=model, seed=data.draw(st.integers(0, 1000)))
    opt = optimum(trace, k, model=model)
    assert alg.cost >= opt.cost - 1e-9 * (1.0 + abs(opt.cost)), (alg.cost, opt.cost)


# -- registry metadata ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_registry_metadata_is_complete(name):
    info = policies.get(name)
    assert info.name == info.cls.name and isinstance(info.name, str) and info.name
    assert isinstance(info.citation, str) and len(info.citation) > 10
    assert isinstance(info.deterministic, bool)
    assert info.models and set(info.models) <= set(MODELS)
    assert info.summary, "the class docstring's first line is the registry summary"
    fields = {f.name for f in dataclasses.fields(info.cls)}
    assert set(info.params) == fields, f"every parameter needs a default: {sorted(fields - set(info.params))}"
    assert isinstance(policies.make(name), info.cls)
    assert isinstance(policies.make(name.upper()), info.cls)  # names are case-insensitive


@pytest.mark.parametrize("name", [n for n in NAMES if policies.get(n).cls.persistable])
def test_persistable_policies_export_and_import_state(name):
    model = policies.get(name).models[-1]
    pol = policies.make(name)
    if model == "rm":
        sim = RMSimulator(pol, 2)
        for q in ([0], [1], [0], [2]):
            sim.step(q)
    else:
        sim = NMSimulator(pol, 2)
        for t in range(4):
            sim.step(np.arange(t + 1), np.full(t + 1, 1.0 / (t + 1)))
    item = min(sim.resident)
    state = pol.export_state(item)
    pol.import_state(sim.t, item, state)
    assert pol.export_state(item) is not None
