"""The exact min-cost flow layer of the optima (issue 13 item 6, issue 16 item 2).

* the network simplex kernel, compiled and as plain Python, against networkx's exact simplex on random networks with
  negative costs, and its potentials re-checked here as an optimality certificate (complementary slackness);
* ``exact_integers`` reproduces every double exactly;
* scale: an optimum with every cost multiplied by ``s`` costs exactly ``s`` times as much, for tiny, huge and
  subnormal ``s`` and with every backend (the issue's 1e-9 trace that lost one miss, the 1e20 trace that crashed);
* mixed magnitudes in one trace (1e-9 next to 1e20, attention weights of 1e-200 next to 1/2) against exhaustive
  references in exact rational arithmetic, so neither side rounds;
* broken solvers are caught: a kernel stopped early, a backend whose flow is not optimal.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import reduce
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.errors import TraceError
from kvcore.optima import belady, brute_rm, nm_opt, rm_opt
from kvcore.optima import mincost
from kvcore.optima.mincost import as_objects, exact_integers
from kvcore.optima.netsimplex import network_simplex, solve_integer
from kvcore.traces import AttentionTrace, PagingTrace

SOLVERS = mincost.SOLVERS


# -- the kernel on random networks ---------------------------------------------------------------------------------

@st.composite
def random_networks(draw):
    """A random multigraph with capacities, a random flow with every arc at a bound (a basic start for the kernel's
    artificial star; it fixes the supplies) and integer costs."""
    n = draw(st.integers(2, 7))
    m = draw(st.integers(1, 14))
    tail = np.array([draw(st.integers(0, n - 1)) for _ in range(m)], dtype=np.int64)
    head = np.array([draw(st.integers(0, n - 1)) for _ in range(m)], dtype=np.int64)
    keep = tail != head
    tail, head = tail[keep], head[keep]
    cap = np.array([draw(st.integers(0, 3)) for _ in range(tail.size)], dtype=np.int64)
    start = np.array([draw(st.sampled_from([0, int(c)])) for c in cap], dtype=np.int64)
    cost = np.array([draw(st.integers(-9, 9)) for _ in range(tail.size)], dtype=np.int64)
    return n, tail, head, cap, start, cost


def supplies(n, tail, head, flow):
    return np.bincount(tail, weights=flow, minlength=n).astype(np.int64) - \
        np.bincount(head, weights=flow, minlength=n).astype(np.int64)


def networkx_optimum(n, tail, head, cap, supply, cost) -> int:
    import networkx as nx

    g = nx.MultiDiGraph()
    g.add_nodes_from((v, {"demand": -int(b)}) for v, b in enumerate(supply))
    g.add_edges_from((int(u), int(v), a, {"capacity": int(c), "weight": int(w)})
                     for a, (u, v, c, w) in enumerate(zip(tail, head, cap, cost)))
    value, _ = nx.network_simplex(g)
    return int(value)


@pytest.mark.parametrize("compiled", [True, False])
@given(random_networks())
def test_kernel_is_optimal_and_certified(compiled, net):
    n, tail, head, cap, start, cost = net
    supply = supplies(n, tail, head, start)
    flow, pi, pred, order, _ = solve_integer(tail, head, cost, cap, start.copy(), np.full(n, -1, np.int64),
                                             compiled=compiled)
    assert np.array_equal(supplies(n, tail, head, flow), supply)
    assert ((flow >= 0) & (flow <= cap)).all()
    assert int(flow @ cost) == networkx_optimum(n, tail, head, cap, supply, cost)
    rc = cost + pi[tail] - pi[head]  # the certificate, checked independently of the kernel
    assert (rc[(flow == 0) & (cap > 0)] >= 0).all() and (rc[(flow == cap) & (cap > 0)] <= 0).all()
    assert (rc[(flow > 0) & (flow < cap)] == 0).all()
    assert sorted(order.tolist()) == list(range(n + 1))


def test_kernel_compiled_and_plain_agree_on_a_medium_network():
    rng = np.random.default_rng(3)
    n, m = 40, 160
    tail, head = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = tail != head
    tail, head = tail[keep], head[keep]
    cap = rng.integers(1, 5, tail.size)
    start = np.where(rng.random(tail.size) < 0.5, 0, cap)
    cost = rng.integers(-50, 50, tail.size)
    runs = [solve_integer(tail, head, cost, cap, start.copy(), np.full(n, -1, np.int64), compiled=c)
            for c in (True, False)]
    assert np.array_equal(runs[0][0], runs[1][0]) and runs[0][4] == runs[1][4]
    assert int(runs[0][0] @ cost) == networkx_optimum(n, tail, head, cap, supplies(n, tail, head, start), cost)


def test_kernel_stopped_early_is_an_error():
    n, tail, head = 3, np.array([0, 1, 0]), np.array([1, 2, 2])
    cap, cost, start = np.array([1, 1, 1]), np.array([-1, -1, 5]), np.array([0, 0, 1])
    with pytest.raises(RuntimeError, match="pivot limit"):
        solve_integer(tail, head, cost, cap, start.copy(), np.full(n, -1, np.int64), max_pivots=0)
    with pytest.raises(RuntimeError, match="strictly between its bounds"):
        solve_integer(tail, head, cost, np.array([2, 2, 2]), np.array([1, 1, 0]), np.full(n, -1, np.int64))
    assert network_simplex.py_func is not None


# -- exact integers ------------------------------------------------------------------------------------------------

@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=12))
def test_exact_integers_reproduce_every_double(values):
    ints, unit = exact_integers(np.array(values))
    assert all(Fraction(v) == int(i) * unit for v, i in zip(values, as_objects(ints).tolist()))
    assert reduce(math.gcd, [abs(int(i)) for i in as_objects(ints).tolist()]) in (0, 1)


# -- scale invariance: the 1e-9 and 1e20 traces ------------------------------------------------------------

@st.composite
def unit_traces(draw):
    T = draw(st.integers(1, 40))
    items = [draw(st.integers(0, 6)) for _ in range(T)]
    return PagingTrace.unit(items), draw(st.integers(1, 4))


SCALES = [1e-9, 1e20, 2.0 ** -1074, 1e-300, 1e300 / 64, 3.0, 0.1]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("scale", SCALES)
@given(unit_traces())
def test_uniform_cost_scales_the_optimum_exactly(solver, scale, inst):
    trace, h = inst
    unit = belady(trace, h)
    scaled = PagingTrace(trace.items, np.full(trace.n_requests, scale), trace.offsets)
    res = rm_opt(scaled, h, solver=solver, record=True)
    assert res.misses == unit.misses
    assert res.cost == scale * unit.cost  # fsum of equal doubles: the correctly rounded product
    assert res.certified and res.gap_bound < scale


@st.composite
def weighted_traces_for_rounding(draw):
    """Costs with many significant bits (odd multiples of 2**-30 up to 2**10), so a few-bit rounding loses ties."""
    T = draw(st.integers(1, 12))
    steps = [draw(st.lists(st.integers(0, 5), min_size=1, max_size=2, unique=True)) for _ in range(T)]
    costs = [[draw(st.integers(1, 2 ** 40)) * 2.0 ** -30 for _ in q] for q in steps]
    widest = max(len(q) for q in steps)
    return steps, costs, draw(st.integers(widest, widest + 1))


@st.composite
def weighted_traces(draw, max_steps=12):
    T = draw(st.integers(1, max_steps))
    steps = [draw(st.lists(st.integers(0, 5), min_size=1, max_size=2, unique=True)) for _ in range(T)]
    costs = [[draw(st.integers(0, 16)) / 8 for _ in q] for q in steps]
    widest = max(len(q) for q in steps)
    return steps, costs, draw(st.integers(widest, widest + 2))


@pytest.mark.parametrize("scale", [2.0 ** -1000, 2.0 ** -60, 2.0 ** 60, 2.0 ** 900])
@given(weighted_traces())
def test_mixed_costs_scaled_by_powers_of_two(scale, inst):
    steps, costs, h = inst
    base = PagingTrace.from_steps(steps, costs)
    scaled = PagingTrace.from_steps(steps, [[c * scale for c in q] for q in costs])
    ref = brute_rm(base, h).cost
    for solver in SOLVERS:
        res = rm_opt(scaled, h, solver=solver)
        assert res.cost == ref * scale and res.certified


def exact_brute_rm(steps, costs, h) -> Fraction:
    """Exhaustive DP in rational arithmetic (the engine's RM semantics, as :func:`brute_rm`, without rounding)."""
    table = {frozenset(): Fraction(0)}
    for q, c in zip(steps, costs):
        price = {i: Fraction(x) for i, x in zip(q, c)}
        nxt = {}
        for s, cost in table.items():
            step_cost = cost + sum(price[i] for i in set(q) - s)
            full = s | set(q)
            need = len(full) - h
            if need <= 0:
                options = [full]
            else:
                pool = sorted(s - set(q))
                options = [full - set(v) for r in range(need, len(pool) + 1) for v in combinations(pool, r)]
            for state in options:
                if step_cost < nxt.get(state, Fraction(10) ** 400):
                    nxt[state] = step_cost
        table = nxt
    return min(table.values())


@given(weighted_traces(max_steps=10), st.lists(st.sampled_from([1e-9, 1e20, 1.0, 3e-12, 7e15, 1e-300, 1e300]),
                                                 min_size=6, max_size=6))
def test_tiny_and_huge_costs_in_one_trace_against_rational_brute_force(inst, magnitude):
    steps, costs, h = inst
    mixed = [[c * magnitude[i] for i, c in zip(q, cs)] for q, cs in zip(steps, costs)]
    ref = exact_brute_rm(steps, mixed, h)
    for solver in SOLVERS:
        res = rm_opt(PagingTrace.from_steps(steps, mixed), h, solver=solver, record=True)
        assert res.certified
        assert res.cost == float(ref)  # the optimal schedule's exact cost, correctly rounded


def exact_brute_nm(trace: AttentionTrace, h: int) -> Fraction:
    table = {frozenset(): Fraction(0)}
    for t, idx, w in trace.rows():
        row = [(i, Fraction(x)) for i, x in zip(idx.tolist(), w.tolist()) if x > 0]
        nxt = {}
        for r, regret in table.items():
            full = r | {t}
            if len(full) <= h:
                options = [full]
            else:
                options = [full - set(v) for k in range(len(full) - h, len(full) + 1)
                           for v in combinations(sorted(full), k)]
            for state in options:
                value = regret + sum((x for i, x in row if i not in state), Fraction(0))
                if value < nxt.get(state, Fraction(10) ** 400):
                    nxt[state] = value
        table = nxt
    return min(table.values())


@st.composite
def wide_range_attention(draw, max_steps=7):
    """Rows mixing ordinary weights with ones of 1e-200..1e-9: the exact scale has hundreds of bits, far beyond int64,
    so the network simplex must round, verify in exact integers and refine."""
    T = draw(st.integers(1, max_steps))
    rows = []
    for t in range(T):
        tiny = draw(st.lists(st.tuples(st.integers(0, t), st.sampled_from([1e-200, 3e-120, 1e-9, 2.5e-30])),
                             max_size=3, unique_by=lambda x: x[0]))
        entries = {i: x for i, x in tiny}
        big = draw(st.integers(0, t))
        entries[big] = entries.get(big, 0.0) + 1.0 - sum(x for i, x in tiny if i != big) - entries.get(big, 0.0)
        rows.append(sorted(entries.items()))
    return AttentionTrace.from_rows(rows), draw(st.integers(1, 3))


@given(wide_range_attention())
def test_nm_with_weights_spanning_hundreds_of_binary_orders(inst):
    trace, h = inst
    ref = exact_brute_nm(trace, h)
    for solver in SOLVERS:
        res = nm_opt(trace, h, solver=solver)
        assert res.certified and res.cost == float(ref)


def test_costs_whose_total_overflows_never_reach_the_optimum():
    """Every finite cost is exactly representable; only a total beyond the float range is not, and the trace itself
    refuses it with a one-line error before any optimum runs."""
    with pytest.raises(TraceError, match="largest float") as err:
        PagingTrace.from_steps([[0], [1], [0], [1]], [[1e308], [1e308], [1e308], [1e308]])
    assert "\n" not in str(err.value)
    trace = PagingTrace.from_steps([[0], [1], [0], [1]], [[1e307], [1e307], [1e307], [1e307]])
    assert rm_opt(trace, 1).cost == 4e307


# -- broken solvers are caught -------------------------------------------------------------------------------------

def test_a_backend_returning_a_suboptimal_flow_is_not_certified(monkeypatch):
    """A kernel that returns its starting flow untouched (and potentials of zero) fails the exact verification of
    every refinement round, so the optimum raises instead of returning a wrong number."""
    def lazy_kernel(tail, head, cost, cap, flow, tree_arc, compiled=True, block=None, max_pivots=-1):
        n = tree_arc.size
        return flow, np.zeros(n + 1, np.int64), np.append(np.arange(tail.size, tail.size + n), -1), \
            np.append(n, np.arange(n)), 0

    monkeypatch.setattr(mincost, "solve_integer", lazy_kernel)
    monkeypatch.setattr(mincost, "_MAX_ROUNDS", 3)
    trace = PagingTrace.from_steps([[0], [1], [0], [2], [1], [0]], [[1], [2], [3], [1], [2], [3]])
    with pytest.raises(RuntimeError, match="not certified"):
        rm_opt(trace, 2, solver="netsimplex")


@pytest.mark.parametrize("bits", [3, 6, 12])
@given(weighted_traces_for_rounding())
def test_rounding_and_refinement_rounds_end_exact(bits, inst):
    """With the overflow-safe range shrunk to a few bits every solve rounds its costs, so the exact verification and
    the refinement rounds decide every answer; it must still equal networkx's exact optimum and be certified."""
    steps, costs, h = inst
    trace = PagingTrace.from_steps(steps, costs)
    ref = rm_opt(trace, h, solver="networkx")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mincost, "cost_bits", lambda n: bits)
        res = rm_opt(trace, h, solver="netsimplex", record=True)
    assert res.cost == ref.cost and res.certified
