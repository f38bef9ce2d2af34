"""Access-graph workloads: request sequences that are walks on a graph (Borodin, Irani, Raghavan, Schieber,
"Competitive paging with locality of reference", JCSS 1995; paper Sections 2.3 and 8; SPEC section 5).

Nodes are items, labelled ``0..n-1`` by the constructors here.  A walk moves along one edge per step (it never
stays put: a repeated request is a hit for every policy and carries no information).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from kvcore.engine import RMSimulator, make_rng
from kvcore.errors import ParameterError
from kvcore.numbers import integer, is_integer, real
from kvcore.traces import PagingTrace


# -- graph constructors ------------------------------------------------------------------------------------------------


def path_access_graph(n: int) -> nx.Graph:
    """Path ``0 - 1 - ... - n-1`` (SPEC section 5: LRU's ratio is 1 on a path, FIFO's ``(k+1)/2``)."""
    return nx.path_graph(integer(n, "n", 1))


def cycle_access_graph(n: int) -> nx.Graph:
    """Cycle on ``n >= 3`` nodes (SPEC section 5 uses ``N >= k+1``: LRU's ratio ``(N-1)/(N-k)``, FIFO's ``k``)."""
    return nx.cycle_graph(integer(n, "n", 3))


def star_access_graph(leaves: int) -> nx.Graph:
    """Star with centre 0 and leaves ``1..leaves`` (SPEC section 5 uses ``k+1`` leaves: LRU's ratio ``k-1``)."""
    return nx.star_graph(integer(leaves, "leaves", 1))


def tree_access_graph(branching: int, height: int) -> nx.Graph:
    """Complete ``branching``-ary tree of the given height, root 0, nodes numbered breadth-first."""
    return nx.balanced_tree(integer(branching, "branching", 1), integer(height, "height", 0))


def grid_access_graph(rows: int, cols: int) -> nx.Graph:
    """``rows x cols`` grid; node ``(r, c)`` is numbered ``r * cols + c``."""
    rows, cols = integer(rows, "rows", 1), integer(cols, "cols", 1)
    g = nx.grid_2d_graph(rows, cols)
    return nx.relabel_nodes(g, {(r, c): r * cols + c for r, c in g.nodes})


def random_access_graph(n: int, extra_edge_prob: float, seed: int | np.random.Generator | None = 0) -> nx.Graph:
    """Connected random graph: a uniformly random labelled tree on ``n`` nodes (so every node is reachable), plus
    every other pair joined independently with probability ``extra_edge_prob``.  Same seed, same graph."""
    n = integer(n, "n", 1)
    p = real(extra_edge_prob, "extra_edge_prob", 0.0, 1.0)
    rng = make_rng(seed)
    g = nx.random_labeled_tree(n, seed=int(rng.integers(2**32)))
    if p > 0:
        iu, ju = np.triu_indices(n, 1)
        pick = rng.random(iu.size) < p
        g.add_edges_from(zip(iu[pick].tolist(), ju[pick].tolist()))
    return g


# -- walks -----------------------------------------------------------------------------------------------------------


def _check_graph(G: nx.Graph) -> None:
    if G.number_of_nodes() == 0:
        raise ParameterError("access graph has no nodes")
    bad = [v for v in G.nodes if not is_integer(v) or v < 0]
    if bad:
        raise ParameterError(f"access graph node {bad[0]!r}: nodes must be non-negative ints (item ids)")
    if G.is_directed():
        raise ParameterError("access graph must be undirected")


def _start_node(G: nx.Graph, start: int | None, rng: np.random.Generator) -> int:
    if start is None:
        return int(rng.choice(sorted(G.nodes)))
    if start not in G:
        raise ParameterError(f"start = {start!r}: not a node of the access graph")
    return int(start)


def _neighbours(G: nx.Graph, v: int) -> list[int]:
    nbrs = sorted(int(u) for u in G[v] if u != v)
    if not nbrs:
        raise ParameterError(f"access graph node {v} has no neighbour: a walk cannot leave it")
    return nbrs


def random_walk(G: nx.Graph, T: int, seed: int | np.random.Generator | None = 0,
                start: int | None = None) -> PagingTrace:
    """Seeded simple random walk of ``T`` requests: start at ``start`` (default: a uniformly random node), then
    each step moves to a uniformly random neighbour of the current node (Borodin et al., JCSS 1995)."""
    _check_graph(G)
    T = integer(T, "T", 0)
    rng = make_rng(seed)
    seq = np.empty(T, dtype=np.int64)
    v = _start_node(G, start, rng)
    for t in range(T):
        if t:
            nbrs = _neighbours(G, v)
            v = nbrs[int(rng.integers(len(nbrs)))]
        seq[t] = v
    return PagingTrace.unit(seq, f"random_walk(n={G.number_of_nodes()}, T={T})")


def _distance_to_missing(G: nx.Graph, missing: set[int]) -> dict[int, int]:
    """Hop distance from every node to the nearest node of ``missing`` (multi-source BFS)."""
    dist = {v: 0 for v in missing}
    frontier = list(missing)
    while frontier:
        nxt = []
        for v in frontier:
            for u in G[v]:
                if u not in dist:
                    dist[u] = dist[v] + 1
                    nxt.append(u)
        frontier = nxt
    return dist


def adversarial_walk(policy, G: nx.Graph, k: int, T: int, seed: int | np.random.Generator | None = 0,
                     start: int = 0) -> PagingTrace:
    """A walk that drives ``policy`` (cache ``k``, through :class:`kvcore.engine.RMSimulator`, public interface
    only) into as many faults as a one-step-lookahead adversary can, restricted to the graph's edges.

    Rule (adaptive adversary of Borodin et al., JCSS 1995, with a stated tie-break): request ``start`` first.  From
    node ``v``, among ``v``'s neighbours:

    1. if some neighbour is not resident, request one of them; among those, the one with the most non-resident
       neighbours of its own (so the walk can keep faulting after this step); ties to the lowest id;
    2. otherwise move toward the nearest non-resident node: the neighbour with the smallest hop distance to any
       non-resident node; ties to the lowest id (if every node is resident, the lowest-id neighbour).

    Every step of kind 1 is a fault of ``policy``.  The returned unit-cost trace replays the run with the same
    ``seed`` and can be scored against the exact optimum with any cache size.
    """
    _check_graph(G)
    k = integer(k, "k", 1)
    T = integer(T, "T", 0)
    v = _start_node(G, start, make_rng(0))
    sim = RMSimulator(policy, k, seed)
    nodes = [int(u) for u in G.nodes]
    seq = np.empty(T, dtype=np.int64)
    for t in range(T):
        if t:
            nbrs = _neighbours(G, v)
            faulting = [u for u in nbrs if not sim.is_resident(u)]
            if faulting:
                v = min(faulting, key=lambda u: (-sum(1 for x in G[u] if x != u and not sim.is_resident(x)), u))
            else:
                missing = {u for u in nodes if not sim.is_resident(u)}
                dist = _distance_to_missing(G, missing) if missing else {}
                v = min(nbrs, key=lambda u: (dist.get(u, len(nodes)), u))
        seq[t] = v
        sim.step([v])
    return PagingTrace.unit(seq, f"adversarial_walk(n={G.number_of_nodes()}, k={k}, T={T}, policy={sim.name})")


def walk_follows_edges(G: nx.Graph, trace: PagingTrace) -> bool:
    """True iff ``trace`` requests one item per step and every two consecutive requests are joined by an edge."""
    items = trace.items.tolist()
    return (trace.n_requests == trace.T and all(i in G for i in items)
            and all(G.has_edge(a, b) for a, b in zip(items, items[1:])))
