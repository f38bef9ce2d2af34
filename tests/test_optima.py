"""Exact offline optima (SPEC section 3) against independent references.

* ``rm_opt`` / ``nm_opt`` (every flow backend: netsimplex, highs, networkx) equal the literal exhaustive DPs
  ``brute_rm`` / ``brute_nm``, and say so with ``certified``;
* ``belady`` equals ``rm_opt`` on unit-cost single-request traces;
* every recorded schedule is replayed through the engine (:class:`kvcore.engine.RMSimulator` /
  :class:`~kvcore.engine.NMSimulator`, which enforce capacity and the no-refetch rule) and costs what was reported;
* monotone in capacity; bad input fails with a one-line ParameterError;
* the paper's two "Belady analog" claims: the NM future-mass rule and the RM furthest-next-request rule are not
  optimal (counterexamples found by exhaustive search, checked here against the exact optimum).

Costs and attention weights are dyadic rationals (multiples of 1/8), so every sum is exact in floating point and
the comparisons are exact equalities.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.engine import NMSimulator, RMSimulator
from kvcore.errors import ParameterError
from kvcore.optima import (OptResult, belady, brute_nm, brute_rm, future_mass_heuristic, mincost, nm_opt, optimum,
                           rm_opt)
from kvcore.traces import AttentionTrace, PagingTrace, recompute_weights, rm_requests_from_attention

SOLVERS = mincost.SOLVERS


class ScheduledEvictions:
    """Engine policy that replays an offline schedule: when asked for room at step ``t`` it evicts every resident
    item whose scheduled eviction step ``s <= t`` has come, unless the item was requested after ``s`` (the engine
    only asks for room when needed, so a scheduled RM eviction may be overtaken by the item's next request; an
    optimum never schedules the eviction of an item at a step that requests it, and an NM arrival is not a request)."""

    name = "scheduled"

    def __init__(self, evictions):
        self.schedule = sorted(evictions)

    def reset(self, capacity, rng):
        self.resident, self.pending, self.next, self.last_use = set(), set(), 0, {}

    def admit(self, t, item, cost):
        self.resident.add(item)
        self.last_use[item] = t

    def hit(self, t, item, cost):
        self.last_use[item] = t

    def evict(self, t, need, protected):
        while self.next < len(self.schedule) and self.schedule[self.next][0] <= t:
            s, item = self.schedule[self.next]
            if self.last_use.get(item, -1) <= s:
                self.pending.add(item)
            self.next += 1
        victims = sorted(self.pending & self.resident)
        self.resident.difference_update(victims)
        self.pending.difference_update(victims)
        return victims

    def observe(self, t, items, weights):
        pass


def replay_rm(trace: PagingTrace, res: OptResult) -> float:
    sim = RMSimulator(ScheduledEvictions(res.evictions), res.capacity)
    for _, items, costs in trace.steps():
        sim.step(items.tolist(), costs.tolist())
    return sim.result().cost


def replay_nm(trace: AttentionTrace, res: OptResult) -> float:
    sim = NMSimulator(ScheduledEvictions(res.evictions), res.capacity)
    for t, idx, w in trace.rows():
        sim.step(idx, w)
    return sim.result().cost


# -- strategies ---------------------------------------------------------------------------------------------------

EIGHTHS = st.integers(0, 24).map(lambda n: n / 8)


@st.composite
def paging_instances(draw, max_steps=10, max_items=6, max_per_step=3, unit=False):
    """Small caches over a few more items than fit, so that capacity binds at many steps."""
    T = draw(st.integers(1, max_steps))
    n = draw(st.integers(1, max_items))
    per = 1 if unit else max_per_step
    steps = [draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=min(per, n), unique=True)) for _ in range(T)]
    costs = None if unit else [[draw(EIGHTHS) for _ in q] for q in steps]
    widest = max(len(q) for q in steps)
    h = draw(st.integers(widest, widest + 2))
    return PagingTrace.from_steps(steps, costs), h


@st.composite
def attention_instances(draw, max_steps=8):
    """Each row hands 8 units of 1/8 to tokens ``0..t`` or to the unstored residual (slot ``t + 1``)."""
    T = draw(st.integers(1, max_steps))
    indptr, idx, w, residual = [0], [], [], []
    for t in range(T):
        slots = draw(st.lists(st.integers(0, t + 1), min_size=8, max_size=8))
        counts = np.bincount(slots, minlength=t + 2)
        held = np.flatnonzero(counts[: t + 1])
        idx.extend(held.tolist())
        w.extend((counts[held] / 8).tolist())
        indptr.append(len(idx))
        residual.append(counts[t + 1] / 8)
    h = draw(st.integers(1, 3))
    return AttentionTrace(np.array(indptr), np.array(idx, dtype=np.int64), np.array(w), np.array(residual)), h


# -- against the brute-force references ---------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVERS)
@given(paging_instances())
def test_rm_opt_equals_brute_force(solver, inst):
    trace, h = inst
    ref = brute_rm(trace, h)
    res = rm_opt(trace, h, solver=solver, record=True)
    assert res.cost == ref.cost
    assert replay_rm(trace, res) == res.cost
    assert res.certified and res.gap_bound <= 1e-9


@pytest.mark.parametrize("solver", SOLVERS)
@given(attention_instances())
def test_nm_opt_equals_brute_force(solver, inst):
    trace, h = inst
    ref = brute_nm(trace, h)
    res = nm_opt(trace, h, solver=solver, record=True)
    assert res.cost == ref.cost and res.certified
    assert replay_nm(trace, res) == res.cost
    assert res.unattributed == pytest.approx(trace.residual.sum())


@given(paging_instances(max_steps=40, max_items=8, unit=True))
def test_belady_equals_flow_optimum_at_unit_cost(inst):
    trace, h = inst
    res = belady(trace, h, record=True)
    assert res.cost == rm_opt(trace, h).cost
    assert res.misses == res.cost
    assert replay_rm(trace, res) == res.cost
    assert optimum(trace, h).solver == "belady"


@given(paging_instances(max_steps=12, max_items=6))
def test_rm_opt_monotone_in_capacity(inst):
    trace, h = inst
    n_items = trace.distinct_items().size
    costs = [rm_opt(trace, c).cost for c in sorted({h, h + 1, h + 2, max(h, n_items)})]
    assert all(a >= b for a, b in zip(costs, costs[1:]))
    _, first = np.unique(trace.items, return_index=True)
    assert costs[-1] == trace.costs[first].sum()  # everything fits: only the first request of each item faults


@given(attention_instances())
def test_nm_opt_monotone_in_capacity_and_below_heuristic(inst):
    trace, h = inst
    regrets = [nm_opt(trace, c).cost for c in sorted({1, 2, 3, trace.T})]
    assert all(a >= b for a, b in zip(regrets, regrets[1:]))
    assert regrets[-1] == 0.0  # room for every token: nothing lost
    heur = future_mass_heuristic(trace, h, record=True)
    assert heur.cost >= nm_opt(trace, h).cost
    assert replay_nm(trace, heur) == heur.cost


def test_flow_backends_agree_on_a_medium_trace():
    rng = np.random.default_rng(7)
    steps = [rng.choice(30, size=rng.integers(1, 4), replace=False).tolist() for _ in range(300)]
    costs = [(rng.integers(1, 17, size=len(q)) / 8).tolist() for q in steps]
    trace = PagingTrace.from_steps(steps, costs)
    results = [rm_opt(trace, 8, solver=s, record=True) for s in SOLVERS]
    assert len({r.cost for r in results}) == 1
    assert all(r.certified and replay_rm(trace, r) == r.cost for r in results)


def test_flow_backends_agree_on_a_medium_attention_trace():
    """Generic float weights (not dyadic): exact integers of ~60-80 bits, so the network simplex rounds, verifies in
    exact arithmetic and refines; all three backends must return the same schedule cost."""
    rng = np.random.default_rng(11)
    T = 120
    a = np.tril(rng.exponential(size=(T, T)) * (rng.random((T, T)) < 0.2))
    np.fill_diagonal(a, 1.0)
    trace = AttentionTrace.from_dense(a / a.sum(axis=1, keepdims=True))
    results = [nm_opt(trace, 6, solver=s, record=True) for s in SOLVERS]
    assert len({r.cost for r in results}) == 1
    assert all(r.certified and replay_nm(trace, r) == pytest.approx(r.cost, rel=1e-12) for r in results)


# -- the dispatcher -----------------------------------------------------------------------------------------------

def test_optimum_on_attention_trace_in_rm_uses_threshold_requests():
    a = np.array([[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.75, 0, 0.25, 0], [0.5, 0.25, 0, 0.25]])
    trace = AttentionTrace.from_dense(a)
    res = optimum(trace, 2, model="rm", theta=0.3)
    assert res.cost == brute_rm(rm_requests_from_attention(trace, 0.3), 2).cost
    assert optimum(trace, 2, model="nm").cost == brute_nm(trace, 2).cost


# -- bad input ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: rm_opt(PagingTrace.unit([0, 1]), 0),
    lambda: belady(PagingTrace.unit([0, 1]), 0),
    lambda: nm_opt(AttentionTrace.from_dense(np.eye(2)), 0),
    lambda: future_mass_heuristic(AttentionTrace.from_dense(np.eye(2)), 0),
    lambda: rm_opt(PagingTrace.from_steps([[0], [1, 2, 3]]), 2),
    lambda: brute_rm(PagingTrace.from_steps([[0], [1, 2, 3]]), 2),
    lambda: belady(PagingTrace.from_steps([[0, 1]]), 2),
    lambda: rm_opt(PagingTrace.unit([0, 1]), 2, solver="glpk"),
    lambda: optimum(PagingTrace.unit([0, 1]), 2, model="nm"),
    lambda: optimum(PagingTrace.unit([0, 1]), 2, model="xm"),
    lambda: brute_rm(PagingTrace.unit(range(9)), 2),
    lambda: brute_nm(AttentionTrace.from_dense(np.eye(11)), 2),
])
def test_bad_input_is_a_one_line_parameter_error(call):
    with pytest.raises(ParameterError) as err:
        call()
    assert "\n" not in str(err.value) and str(err.value)


def test_overfull_step_is_named():
    with pytest.raises(ParameterError, match=r"step 1: 3 items requested but capacity is 2"):
        rm_opt(PagingTrace.from_steps([[0], [1, 2, 3]]), 2)


# -- the paper's "Belady analog" claims (SPEC claims nm-belady-analog and rm-belady) -------------------------------

def test_future_mass_is_not_optimal():
    """Smallest counterexample found by exhaustive search over 3-token traces (no ties in the heuristic's choices):
    keeping the token with most future mass at step 1 forfeits mass that token 2 would outbid anyway."""
    a = np.array([[1, 0, 0], [0.6, 0.4, 0], [0, 0.4, 0.6]])
    trace = AttentionTrace.from_dense(a)
    heur, opt = future_mass_heuristic(trace, 1, record=True), nm_opt(trace, 1)
    assert heur.evictions == [(1, 0), (2, 1)]
    assert heur.cost == pytest.approx(1.0) and opt.cost == pytest.approx(0.8)
    assert opt.cost == brute_nm(trace, 1).cost
    assert heur.cost > opt.cost


class FurthestNextRequest:
    """Offline rule of the paper's RM claim: on a fault evict the evictable resident item requested furthest ahead."""

    name = "furthest-next-request"

    def __init__(self, trace: PagingTrace):
        self.steps = [set(q.tolist()) for _, q, _ in trace.steps()]

    def reset(self, capacity, rng):
        self.resident = set()

    def admit(self, t, item, cost):
        self.resident.add(item)

    def hit(self, t, item, cost):
        pass

    def observe(self, t, items, weights):
        pass

    def next_request(self, t, item):
        return next((s for s in range(t, len(self.steps)) if item in self.steps[s]), len(self.steps))

    def evict(self, t, need, protected):
        victims = sorted(self.resident - protected, key=lambda i: -self.next_request(t, i))[:need]
        self.resident.difference_update(victims)
        return victims


def test_furthest_next_request_is_not_optimal_with_position_costs():
    """6 tokens, theta = 1/4, default recompute weights w_i = 1 + (i+1)/T, h = 3.  At step 3 the rule evicts token 2
    (next requested at step 5) instead of token 0 (step 4); refetching token 2 costs 3/2, token 0 only 7/6."""
    a = np.zeros((6, 6))
    np.fill_diagonal(a, 1.0)
    for t, i in [(3, 1), (4, 0), (5, 2)]:
        a[t, i], a[t, t] = 0.25, 0.75
    trace = rm_requests_from_attention(AttentionTrace.from_dense(a), 0.25)
    w = recompute_weights(6)
    sim = RMSimulator(FurthestNextRequest(trace), 3, record=True)
    for _, items, costs in trace.steps():
        sim.step(items.tolist(), costs.tolist())
    rule = sim.result()
    opt = rm_opt(trace, 3)
    assert rule.evictions[0] == (3, 2)
    assert rule.cost == w[2] and opt.cost == w[0] == brute_rm(trace, 3).cost
    assert rule.cost > opt.cost
    unit = PagingTrace(trace.items, np.ones(trace.n_requests), trace.offsets)  # unit costs: the rule is Belady
    sim = RMSimulator(FurthestNextRequest(unit), 3)
    for _, items, costs in unit.steps():
        sim.step(items.tolist(), costs.tolist())
    assert sim.result().cost == rm_opt(unit, 3).cost


def test_empty_traces_cost_nothing():
    paging = PagingTrace.unit(np.array([], dtype=np.int64))
    attention = AttentionTrace(np.array([0]), np.array([], dtype=np.int64), np.array([]))
    results = [belady(paging, 1), brute_rm(paging, 1), nm_opt(attention, 1), brute_nm(attention, 1),
               future_mass_heuristic(attention, 1)] + [f(t, 1, solver=s) for f, t in ((rm_opt, paging),
                                                                                  (nm_opt, attention)) for s in SOLVERS]
    assert [(r.cost, r.misses) for r in results] == [(0.0, 0)] * len(results)


def _next_use(items: list[int], t: int, item: int) -> int:
    """Step of ``item``'s next request after step ``t`` (``len(items)`` for never again)."""
    return next((s for s in range(t + 1, len(items)) if items[s] == item), len(items))


@given(paging_instances(max_steps=40, max_items=8, unit=True))
def test_belady_evicts_furthest_and_breaks_never_again_ties_toward_the_smaller_id(inst):
    """The tie rule of :func:`kvcore.optima.belady`'s docstring, checked eviction by eviction against a plain replay:
    the victim's next request is the furthest of the resident items', and when several resident items are never
    requested again the victim is the smallest of their ids."""
    trace, h = inst
    items = trace.items.tolist()
    evictions = dict(belady(trace, h, record=True).evictions)
    resident: set[int] = set()
    for t, p in enumerate(items):
        if p in resident:
            continue
        if len(resident) == h:
            nxt = {q: _next_use(items, t, q) for q in resident}
            furthest = max(nxt.values())
            candidates = sorted(q for q, s in nxt.items() if s == furthest)
            assert evictions[t] == candidates[0], (t, nxt, evictions[t])
            resident.remove(evictions[t])
        resident.add(p)


def test_belady_never_again_tie_on_a_hand_trace():
    """``5 3 7 1``, h = 2: at step 2 both residents (5, 3) are never requested again -> 3 goes; at step 3 (5, 7)
    -> 5 goes."""
    assert belady(PagingTrace.unit([5, 3, 7, 1]), 2, record=True).evictions == [(2, 3), (3, 5)]
