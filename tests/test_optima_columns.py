"""The NM optimum by column generation (issue 30): the same exact optimum from a few exits per step.

The network simplex starts from the ``EXIT_COLUMNS`` heaviest exits of every step
(:func:`kvcore.optima.nm_flow.heaviest`, ``FlowNetwork.columns``) and prices the others in
(:func:`kvcore.optima.netsimplex.solve_integer_columns`).  References: the same solver on every arc from the start
(columns off), the exhaustive DP :func:`kvcore.optima.brute_nm`, and for the counting sorts and the per-step
selection NumPy's stable sorts and a plain sort per group.  The column counts are shrunk to 1-2 here so that dense
rows of a few steps need several pricing rounds.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.optima import brute_nm, mincost, netsimplex, nm_flow, nm_opt
from kvcore.optima.capacity_curve import entries_of, optimum_curve
from kvcore.optima.nm_flow import by_tail_then_head, heaviest, interval_network, stable_order
from kvcore.traces import AttentionTrace

OFF = 10 ** 9  # more exits per step than any test trace has: every arc from the start, no column generation


def dense_trace(rows: list[list[int]]) -> AttentionTrace:
    """Every earlier token stored in every row, weights ``k / 2**10`` (exact sums), the rest of the row residual."""
    T = len(rows)
    w = [np.array(r[:t + 1], dtype=np.float64) / 2 ** 10 for t, r in enumerate(rows)]
    return AttentionTrace(np.concatenate([[0], np.cumsum(np.arange(1, T + 1))]).astype(np.int64),
                          np.concatenate([np.arange(t + 1) for t in range(T)]).astype(np.int64),
                          np.concatenate(w), 1.0 - np.array([x.sum() for x in w]))


@st.composite
def dense_instances(draw, max_steps: int = 9):
    T = draw(st.integers(2, max_steps))
    rows = [draw(st.lists(st.integers(1, 64), min_size=T, max_size=T)) for _ in range(T)]
    return dense_trace(rows), draw(st.integers(1, 3))


def with_columns(monkeypatch, per_step: int, per_tail: int) -> None:
    monkeypatch.setattr(nm_flow, "EXIT_COLUMNS", per_step)
    monkeypatch.setattr(mincost, "COLUMNS_PER_TAIL", per_tail)


@given(keys=st.lists(st.integers(0, 6), max_size=40), heads=st.lists(st.integers(0, 6), max_size=40))
def test_counting_sorts_equal_numpy(keys, heads):
    k = np.array(keys, dtype=np.int64)
    order, start = stable_order(k, 7)
    assert order.tolist() == np.argsort(k, kind="stable").tolist()
    assert start.tolist() == [0] + np.cumsum(np.bincount(k, minlength=7)).tolist()
    n = min(len(keys), len(heads))
    tail, head = k[:n], np.array(heads[:n], dtype=np.int64)
    assert by_tail_then_head(tail, head, 7).tolist() == np.lexsort((head, tail)).tolist()


@given(group=st.lists(st.integers(0, 4), max_size=30), data=st.data(), per=st.integers(1, 4))
def test_heaviest_marks_each_groups_top_entries(group, data, per):
    g = np.array(group, dtype=np.int64)
    w = np.array(data.draw(st.lists(st.integers(1, 5), min_size=g.size, max_size=g.size)), dtype=np.float64)
    expected = []
    for e in range(g.size):
        mine = sorted(w[g == g[e]], reverse=True)
        expected.append(len(mine) <= per or w[e] >= mine[per - 1])  # ties at the threshold count
    assert heaviest(g, w, 5, per).tolist() == expected


@pytest.mark.parametrize("per_step,per_tail", [(1, 1), (2, 1), (1, 3)])
@given(inst=dense_instances())
def test_columns_give_the_exact_optimum(per_step, per_tail, inst):
    trace, h = inst
    with pytest.MonkeyPatch.context() as patch:
        with_columns(patch, OFF, per_tail)
        full = nm_opt(trace, h, record=True)
    with pytest.MonkeyPatch.context() as patch:
        with_columns(patch, per_step, per_tail)
        cols = nm_opt(trace, h, record=True)
    assert cols.certified and cols.cost == full.cost
    if trace.T <= 8:
        assert cols.cost == pytest.approx(brute_nm(trace, h).cost, abs=1e-12)


@given(inst=dense_instances(max_steps=12))
def test_curve_with_columns_equals_curve_without(inst):
    trace, _ = inst
    caps = [1, 2, 4]

    def curve(per_step):
        with pytest.MonkeyPatch.context() as patch:
            with_columns(patch, per_step, 1)
            e = entries_of([trace, trace])  # two heads on one line: columns grouped per (step, head)
            return [float(e.weight[p.lost].sum()) for p in optimum_curve(e, caps, warm=False)]

    assert curve(1) == pytest.approx(curve(OFF), abs=1e-12)


def network_of(trace: AttentionTrace, h: int, per_step: int):
    e = entries_of([trace])
    net = interval_network(e.T, e.arrival, e.item, e.step, e.exact, e.unit, h,
                           heaviest(e.step, e.weight, e.T, per_step))
    order = net.scan_order
    return net, order, np.asarray(net.cost[order], dtype=np.int64)


def objective(net, order, cost, active):
    """Cost of the network simplex's optimum on the ``active`` arcs only (scan order)."""
    flow, *_ = netsimplex.solve_integer(net.tail[order][active], net.head[order][active], cost[active],
                                        net.cap[order][active], net.start[order][active].copy(),
                                        np.full(net.n_nodes, -1, np.int64))
    return int((cost[active] * flow).sum())


@pytest.mark.parametrize("compiled", [True, False])
def test_priced_in_arcs_matter_and_the_plain_loop_equals_the_compiled_one(compiled):
    """On a trace where the heaviest exit of each step is not enough (the restricted optimum is strictly worse:
    pricing has work to do), the loop reaches the full network's optimum, compiled and as plain Python."""
    rng = np.random.default_rng(3)
    trace = dense_trace(rng.integers(1, 64, size=(14, 14)).tolist())
    net, order, cost = network_of(trace, 3, 1)
    start = net.columns[order]
    full = objective(net, order, cost, np.ones(net.n_arcs, dtype=bool))
    assert objective(net, order, cost, start) > full
    flow, pi, pred, _, _ = netsimplex.solve_integer_columns(
        net.tail[order], net.head[order], cost, net.cap[order], net.start[order].copy(),
        np.full(net.n_nodes, -1, np.int64), start, 1, compiled=compiled)
    assert int((cost * flow).sum()) == full
    rc = cost + pi[net.tail[order]] - pi[net.head[order]]
    assert not ((rc < 0) & (flow < net.cap[order])).any() and not ((rc > 0) & (flow > 0)).any()
    tree = pred[:-1]
    assert ((tree < 0) | (tree >= net.n_arcs) | (rc[np.clip(tree, 0, net.n_arcs - 1)] == 0)).all()
