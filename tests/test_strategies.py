"""Hypothesis strategies (adversary/strategies.py): valid kvcore traces, and shrinking to minimal examples."""

import numpy as np
from hypothesis import Phase, find, given, settings

from adversary import persistence_holds, walk_follows_edges
from adversary.persistence import zipf_weights
from adversary.strategies import (ZIPF_EXPONENTS, access_graph_walks, attention_row_specs, paging_traces,
                                  persistent_traces, row_from_spec, shifted_zipf_traces, sparse_attention_traces,
                                  zipf_row_from_spec, zipf_row_specs)
from kvcore.traces import ROW_SUM_TOL, AttentionTrace, PagingTrace

RHO, W, TAU = 0.5, 3, 0.3
# find() only needs generation and shrinking; the explain phase re-runs the minimal example many times
FIND = settings(phases=(Phase.generate, Phase.shrink), database=None)


def row_sums(trace: AttentionTrace) -> np.ndarray:
    return np.add.reduceat(trace.weights, trace.indptr[:-1]) + trace.residual


@given(paging_traces(max_items=5, max_steps=25))
def test_unit_paging_traces(trace):
    assert isinstance(trace, PagingTrace) and trace.is_unit_single
    assert 1 <= trace.T <= 25 and trace.items.max() < 5


@given(paging_traces(max_items=6, max_per_step=3, weighted=True))
def test_weighted_multi_request_paging_traces(trace):
    assert all(1 <= len(items) <= 3 and len(set(items.tolist())) == len(items) for _, items, _ in trace.steps())
    assert np.all((trace.costs >= 1) & (trace.costs <= 9) & (trace.costs == np.round(trace.costs)))


@given(sparse_attention_traces(max_T=15, max_support=4))
def test_sparse_attention_traces(trace):
    assert np.all(np.abs(row_sums(trace) - 1) <= ROW_SUM_TOL)
    assert np.all(np.diff(trace.indptr) <= 4) and np.all(np.diff(trace.indptr) >= 1)


@given(shifted_zipf_traces(max_T=15))
def test_zipf_rows_follow_one_zipf_law(trace):
    for _, idx, w in trace.rows():
        ranked = np.sort(w)[::-1]
        assert any(np.allclose(ranked, zipf_weights(w.size, s)) for s in ZIPF_EXPONENTS)
    assert np.all(np.abs(row_sums(trace) - 1) <= ROW_SUM_TOL)


@given(persistent_traces(RHO, W, TAU, max_T=15))
def test_persistent_traces_are_persistent(trace):
    assert persistence_holds(trace, RHO, W, TAU)
    assert np.all(np.abs(row_sums(trace) - 1) <= ROW_SUM_TOL)


@given(access_graph_walks(max_nodes=7, max_steps=20))
def test_walks_follow_edges(graph_and_walk):
    G, walk = graph_and_walk
    assert walk_follows_edges(G, walk) and 1 <= walk.T <= 20


# -- shrinking: find() returns the simplest example of a property --------------------------------------------------

def test_paging_trace_shrinks_to_minimal():
    tr = find(paging_traces(), lambda t: t.T >= 3, settings=FIND)
    assert tr.items.tolist() == [0, 0, 0]
    tr = find(paging_traces(max_per_step=3, weighted=True), lambda t: t.n_requests >= 2, settings=FIND)
    # one item over two steps is simpler (fewer items drawn first) than two items in one step
    assert tr.T == 2 and tr.items.tolist() == [0, 0] and tr.costs.tolist() == [1.0, 1.0]
    tr = find(paging_traces(), lambda t: t.distinct_items().size >= 2, settings=FIND)
    assert tr.items.tolist() == [0, 1]


def test_attention_trace_shrinks_to_minimal():
    tr = find(sparse_attention_traces(), lambda t: t.T >= 3, settings=FIND)
    assert tr.T == 3 and tr.indices.tolist() == [0, 0, 0] and tr.weights.tolist() == [1.0, 1.0, 1.0]
    tr = find(sparse_attention_traces(), lambda t: t.nnz > t.T, settings=FIND)
    assert tr.T == 2 and tr.indices.tolist() == [0, 0, 1] and np.allclose(tr.weights, [1, 0.5, 0.5])


def test_persistent_trace_with_a_heavy_old_token_shrinks_to_minimal():
    def heavy_old(t):
        return any(np.any((idx < row) & (w >= TAU)) for row, idx, w in t.rows())
    tr = find(persistent_traces(RHO, W, TAU), heavy_old, settings=FIND)
    assert tr.T == 2 and tr.indices.tolist() == [0, 0]


def test_walk_shrinks_to_minimal():
    G, w = find(access_graph_walks(), lambda gw: gw[1].T >= 3, settings=FIND)
    assert G.number_of_nodes() == 2 and w.items.tolist() == [0, 1, 0]


@settings(max_examples=20)
@given(attention_row_specs(3, 9), zipf_row_specs(3, 9))
def test_row_building_blocks(spec, zspec):
    for t in (0, 4, 9):
        for low in (0, min(t, 2)):
            r, q = row_from_spec(t, spec, low), zipf_row_from_spec(t, zspec, low)
            for row in (r, q):
                assert row and all(low <= i <= t for i in row) and abs(sum(row.values()) - 1) < 1e-12
