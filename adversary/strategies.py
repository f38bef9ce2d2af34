"""Hypothesis strategies for kvcore traces (issue 6): small building blocks combined with ``st.composite``,
``.map`` and ``.flatmap``, so that failures shrink toward short traces, few items and simple weights.

Shrink targets: item ids and tokens shrink toward 0, counts toward their minimum, raw weights toward 1 (weights are
positive integers normalized per row, so a shrunk row is uniform over its support), Zipf exponents toward 0,
graphs toward a short path.  Every strategy yields a trace that passed the kvcore validators.
"""

from __future__ import annotations

from collections import deque

import networkx as nx
import numpy as np
from hypothesis import strategies as st

from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace, PagingTrace

from ._build import attention_from_rows
from .access_graphs import (cycle_access_graph, grid_access_graph, path_access_graph, random_access_graph,
                            star_access_graph, tree_access_graph)
from .persistence import cut_unchained, enforce_persistence, zipf_weights

ZIPF_EXPONENTS = (0.0, 0.5, 1.0, 1.5, 2.0)

# -- paging ------------------------------------------------------------------------------------------------------------


def fault_costs(max_cost: int = 9) -> st.SearchStrategy[float]:
    """A positive fault cost, an integer in ``[1, max_cost]`` as a float (shrinks to 1)."""
    return st.integers(1, max_cost).map(float)


def request_sets(n_items: int, max_per_step: int) -> st.SearchStrategy[tuple[int, ...]]:
    """One step's requests: a non-empty set of distinct items from ``0..n_items-1``, sorted."""
    return st.sets(st.integers(0, n_items - 1), min_size=1,
                   max_size=max(1, min(max_per_step, n_items))).map(lambda s: tuple(sorted(s)))


@st.composite
def paging_traces(draw, *, max_items: int = 6, min_steps: int = 1, max_steps: int = 30, max_per_step: int = 1,
                  weighted: bool = False) -> PagingTrace:
    """Paging traces over at most ``max_items`` items: one request per step (``max_per_step = 1``, the default) or
    several; unit costs, or per-request costs from :func:`fault_costs` when ``weighted``."""
    n = draw(st.integers(1, max_items))
    steps = draw(st.lists(request_sets(n, max_per_step), min_size=min_steps, max_size=max_steps))
    costs = [draw(st.lists(fault_costs(), min_size=len(q), max_size=len(q))) for q in steps] if weighted else None
    return PagingTrace.from_steps(steps, costs, source="hypothesis paging trace")


def repeated_motif_traces(n_items: int, max_motifs: int = 4, max_motif_len: int = 3,
                          max_repeat: int = 16) -> st.SearchStrategy[PagingTrace]:
    """Unit paging traces written as a few short motifs, each repeated: ``(m_1)^{r_1} (m_2)^{r_2} ...``.

    The classical lower-bound sequences all have this shape (a cyclic scan, LFU's priming runs then alternation,
    LIFO's ping-pong), so a targeted search can reach them by climbing repeat counts, yet nothing here names them.
    Shrinks toward one short motif repeated once.
    """
    motif = st.lists(st.integers(0, n_items - 1), min_size=1, max_size=max_motif_len)
    return st.lists(st.tuples(motif, st.integers(1, max_repeat)), min_size=1, max_size=max_motifs).map(
        lambda parts: PagingTrace.unit(np.asarray([i for m, r in parts for _ in range(r) for i in m], dtype=np.int64),
                                       "hypothesis motif trace"))


def fixed_item_costs(trace: PagingTrace) -> PagingTrace:
    """The same requests with every item's fault cost fixed to the cost of its first request.

    Weighted caching in Young's sense (Landlord, Greedy-Dual, Balance) gives each *item* one cost; with a cost drawn
    per request the ``k/(k-h+1)`` bound is false (an 11-request counterexample is in theorems/test_thm3_gda.py).
    """
    first: dict[int, float] = {}
    for i, c in zip(trace.items.tolist(), trace.costs.tolist()):
        first.setdefault(i, c)
    return PagingTrace(trace.items, np.array([first[i] for i in trace.items.tolist()]), trace.offsets, trace.source)


def item_cost_paging_traces(*, max_items: int = 6, min_steps: int = 1, max_steps: int = 30,
                            max_per_step: int = 1) -> st.SearchStrategy[PagingTrace]:
    """Weighted paging traces in which each item has one fault cost (:func:`fixed_item_costs`)."""
    return paging_traces(max_items=max_items, min_steps=min_steps, max_steps=max_steps, max_per_step=max_per_step,
                         weighted=True).map(fixed_item_costs)


# -- attention ---------------------------------------------------------------------------------------------------------
# A row is drawn as a *spec* independent of its step, then realized at step t (tokens above t, or below a shift's
# lower bound, are left out).  Traces are lists of specs, so shrinking can delete whole rows and shorten traces.

RowSpec = list[tuple[int, int]]
ZipfSpec = tuple[list[int], float]


def attention_row_specs(max_support: int = 4, max_token: int = 19) -> st.SearchStrategy[RowSpec]:
    """A sparse row spec: up to ``max_support`` pairs ``(token, raw weight)`` with distinct tokens in
    ``[0, max_token]`` and integer raw weights in ``[1, 9]`` (shrinks to ``[(0, 1)]``)."""
    return st.lists(st.tuples(st.integers(0, max_token), st.integers(1, 9)), min_size=1, max_size=max_support,
                    unique_by=lambda p: p[0])


def zipf_row_specs(max_support: int = 4, max_token: int = 19) -> st.SearchStrategy[ZipfSpec]:
    """A Zipf row spec: up to ``max_support`` distinct tokens in rank order and an exponent from ``ZIPF_EXPONENTS``
    (shrinks to ``([0], 0.0)``)."""
    return st.tuples(st.lists(st.integers(0, max_token), min_size=1, max_size=max_support, unique=True),
                     st.sampled_from(ZIPF_EXPONENTS))


def row_from_spec(t: int, spec: RowSpec, low: int = 0) -> dict[int, float]:
    """Row ``t`` of a spec: its pairs with ``low <= token <= t``, raw weights normalized to sum 1; all mass on
    token ``low`` if no pair qualifies (``low <= t`` is the caller's promise)."""
    kept = [(i, w) for i, w in spec if low <= i <= t] or [(low, 1)]
    total = float(sum(w for _, w in kept))
    return {i: w / total for i, w in kept}


def zipf_row_from_spec(t: int, spec: ZipfSpec, low: int = 0) -> dict[int, float]:
    """Row ``t`` of a Zipf spec: the ranked tokens with ``low <= token <= t`` (token ``low`` if none), weighted by
    :func:`adversary.persistence.zipf_weights` in rank order."""
    ranked = [i for i in spec[0] if low <= i <= t] or [low]
    return dict(zip(ranked, zipf_weights(len(ranked), spec[1]).tolist()))


def sparse_attention_traces(*, min_T: int = 1, max_T: int = 20,
                            max_support: int = 4) -> st.SearchStrategy[AttentionTrace]:
    """Attention traces with sparse rows (at most ``max_support`` entries each), every row summing to 1."""
    return st.lists(attention_row_specs(max_support, max_T - 1), min_size=min_T, max_size=max_T).map(
        lambda specs: attention_from_rows([row_from_spec(t, sp) for t, sp in enumerate(specs)],
                                          "hypothesis attention trace"))


def _repeated_suffix(prefix: list[RowSpec], suffix: RowSpec, lengths: tuple[int, ...]) -> tuple[AttentionTrace, ...]:
    rows = [row_from_spec(t, sp) for t, sp in enumerate(prefix)]
    n = len(rows)
    tail = [row_from_spec(n + j, suffix) for j in range(max(lengths))]
    return tuple(attention_from_rows(rows + tail[:L], f"hypothesis prefix + suffix x{L}") for L in lengths)


def repeated_suffix_families(*, min_prefix: int = 1, max_prefix: int = 12, max_support: int = 4,
                             suffix_lengths: tuple[int, ...] = (8, 16)) -> st.SearchStrategy[tuple[AttentionTrace, ...]]:
    """Families of traces sharing a sparse prefix and repeating one suffix row spec ``L`` times, one trace per ``L``
    in ``suffix_lengths``: the shape of decoy-and-sleeper and of a topic shift without fixing either, so regret
    growth with the suffix length can be searched for.  The suffix spec points into the prefix (at most 2 tokens)."""
    return st.tuples(st.lists(attention_row_specs(max_support, max_prefix - 1), min_size=min_prefix,
                              max_size=max_prefix),
                     attention_row_specs(2, max_prefix - 1)).map(
        lambda a: _repeated_suffix(a[0], a[1], tuple(suffix_lengths)))


def _shifted(specs: list[ZipfSpec], shift: int) -> AttentionTrace:
    rows = [zipf_row_from_spec(t, sp, low=shift if t >= shift else 0) for t, sp in enumerate(specs)]
    return attention_from_rows(rows, f"hypothesis zipf trace (shift at {shift})")


def shifted_zipf_traces(*, min_T: int = 1, max_T: int = 20,
                        max_support: int = 4) -> st.SearchStrategy[AttentionTrace]:
    """Zipf rows with one topic shift: from a drawn step ``b`` on, rows only use tokens ``>= b`` (the heavy set
    moves to the new topic's tokens; ``b = 0`` or ``b >= T`` means no shift; shrinks toward no shift)."""
    return st.tuples(st.lists(zipf_row_specs(max_support, max_T - 1), min_size=min_T, max_size=max_T),
                     st.integers(0, max_T)).map(lambda a: _shifted(*a))


def persistent_traces(rho: float, W: int, tau: float, *, min_T: int = 1, max_T: int = 20,
                      max_support: int = 4) -> st.SearchStrategy[AttentionTrace]:
    """``(rho, W)``-persistent traces at threshold ``tau``: :func:`shifted_zipf_traces` mapped through the
    windowed-persistence rule :func:`adversary.persistence.enforce_persistence` (needs ``0 < rho < 1``)."""
    return shifted_zipf_traces(min_T=min_T, max_T=max_T, max_support=max_support).map(
        lambda tr: enforce_persistence(tr, rho, W, tau))


# -- access graphs -----------------------------------------------------------------------------------------------------


def access_graphs(max_nodes: int = 8) -> st.SearchStrategy[nx.Graph]:
    """Connected graphs with at least two nodes: path, cycle, star, grid, tree, or random (shrinks to a 2-path)."""
    m = max(3, max_nodes)
    return st.one_of(
        st.integers(2, m).map(path_access_graph),
        st.integers(3, m).map(cycle_access_graph),
        st.integers(1, m - 1).map(star_access_graph),
        st.tuples(st.integers(1, 3), st.integers(2, 3)).map(lambda rc: grid_access_graph(*rc)),
        st.tuples(st.integers(1, 2), st.integers(1, 2)).map(lambda bh: tree_access_graph(*bh)),
        st.tuples(st.integers(2, m), st.sampled_from((0.0, 0.2, 0.5)), st.integers(0, 2**16)).map(
            lambda a: random_access_graph(*a)),
    )


@st.composite
def walks_on(draw, G: nx.Graph, *, min_steps: int = 1, max_steps: int = 30) -> PagingTrace:
    """A walk on ``G``: a start node, then per step the index (modulo the degree) of the neighbour to move to, in
    sorted neighbour order.  Shrinks toward starting at the lowest node and always taking the first neighbour."""
    nodes = sorted(int(v) for v in G.nodes)
    v = nodes[draw(st.integers(0, len(nodes) - 1))]
    moves = draw(st.lists(st.integers(0, max(G.degree(u) for u in nodes) - 1), min_size=max(0, min_steps - 1),
                          max_size=max(0, max_steps - 1)))
    seq = [v]
    for j in moves:
        nbrs = sorted(int(u) for u in G[v])
        v = nbrs[j % len(nbrs)]
        seq.append(v)
    return PagingTrace.unit(np.asarray(seq, dtype=np.int64), "hypothesis access-graph walk")


def access_graph_walks(max_nodes: int = 8, *, min_steps: int = 1,
                       max_steps: int = 30) -> st.SearchStrategy[tuple[nx.Graph, PagingTrace]]:
    """Pairs ``(G, walk)``: a graph from :func:`access_graphs` and a walk on it from :func:`walks_on`."""
    return access_graphs(max_nodes).flatmap(
        lambda G: walks_on(G, min_steps=min_steps, max_steps=max_steps).map(lambda w: (G, w)))


# -- Theorem 4's corrected premise (paper Section 7; issue 14) ------------------------------------------------------


def within_theorem4_premise(trace: AttentionTrace, rho: float, W: int, tau: float, budget: int) -> AttentionTrace:
    """Rewrite ``trace`` so that it satisfies Theorem 4's corrected premise with a heavy-set budget, by capping.

    The premise (``theorems/test_thm4_persistence.py``): chain persistence at ``(rho, W, tau)`` --
    :func:`adversary.persistence_violations` with ``chain=True`` is empty -- and the warm sets
    ``H_s(rho tau)`` of any ``W`` consecutive rows have a union of at most ``budget`` tokens
    (:func:`adversary.observed_union_max`; ``budget = k - 1`` for a cache of ``k``).  One pass, row by row:

    1. an earlier token's warm entry (``>= rho tau``) whose chain from its arrival is broken is cut to ``rho tau / 2``;
    2. warm entries of tokens not warm in the previous ``W - 1`` rows are kept, heaviest first (ties: lower id),
       while the window's union stays within ``budget``; the others are cut to ``rho tau / 2``;
    3. the mass removed goes to a token already in the window's union, so the row still sums to 1 and no union
       grows: the row's heaviest kept warm token, else the most recently warm token of the window, else (empty
       window) the arriving token.

    Every warm entry is then chained (steps 1 and 3 only touch chained tokens), hence every heavy one.  Needs
    ``budget >= 1``.
    """
    if budget < 1:
        raise ParameterError(f"budget = {budget}: Theorem 4's union must fit at least one token (k >= 2)")
    cut = rho * tau
    chained: dict[int, int] = {}   # token -> last warm step of its unbroken chain
    window: deque[set[int]] = deque(maxlen=W - 1)  # warm sets of the previous W - 1 rows
    rows = []
    for t, idx, w in trace.rows():
        row = dict(zip(idx.tolist(), w.tolist()))
        excess = cut_unchained(row, t, chained, cut, W)
        recent: set[int] = set().union(*window)
        new = sorted((i for i, x in row.items() if x >= cut and i not in recent), key=lambda i: (-row[i], i))
        for i in new[max(0, budget - len(recent)):]:
            excess += row[i] - cut / 2
            row[i] = cut / 2
        if excess > 0.0:
            warm = [i for i, x in row.items() if x >= cut]
            if warm:
                to = max(warm, key=lambda i: (row[i], -i))
            elif recent:
                to = max(recent, key=lambda i: (chained[i], -i))
            else:
                to = t
            row[to] = row.get(to, 0.0) + excess
        for i, x in row.items():
            if x >= cut:
                chained[i] = t
        window.append({i for i, x in row.items() if x >= cut})
        rows.append(row)
    return attention_from_rows(rows, f"{trace.source} (Theorem 4 premise rho={rho:g}, W={W}, tau={tau:g}, "
                                     f"union <= {budget})")


def theorem4_premise_traces(k: int, rho: float, W: int, tau: float, *, min_T: int = 1, max_T: int = 20,
                            max_support: int = 4) -> st.SearchStrategy[AttentionTrace]:
    """Traces inside Theorem 4's corrected premise for a cache of ``k``: :func:`shifted_zipf_traces` (Zipf rows
    with a topic shift) mapped through :func:`within_theorem4_premise` with ``budget = k - 1``."""
    return shifted_zipf_traces(min_T=min_T, max_T=max_T, max_support=max_support).map(
        lambda tr: within_theorem4_premise(tr, rho, W, tau, k - 1))
