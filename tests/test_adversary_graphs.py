"""Access-graph walks (adversary/access_graphs.py): walks only follow edges; the adversarial walk faults."""

import networkx as nx
import numpy as np
import pytest

from adversary import (adversarial_walk, cycle_access_graph, grid_access_graph, path_access_graph,
                       random_access_graph, random_walk, star_access_graph, tree_access_graph, walk_follows_edges)
from kvcore.engine import run_rm
from kvcore.errors import ParameterError
from kvcore.traces import PagingTrace
from policies import make

GRAPHS = {
    "path": path_access_graph(7),
    "cycle": cycle_access_graph(6),
    "star": star_access_graph(5),
    "tree": tree_access_graph(2, 3),
    "grid": grid_access_graph(3, 4),
    "random": random_access_graph(12, 0.15, seed=3),
}


def test_constructors_have_the_spec_shapes():
    k = 4
    star = star_access_graph(k + 1)
    assert star.number_of_nodes() == k + 2 and star.degree(0) == k + 1
    cyc = cycle_access_graph(k + 1)
    assert all(d == 2 for _, d in cyc.degree()) and nx.is_connected(cyc)
    assert sorted(grid_access_graph(2, 3).edges) == [(0, 1), (0, 3), (1, 2), (1, 4), (2, 5), (3, 4), (4, 5)]
    assert tree_access_graph(2, 2).number_of_nodes() == 7
    for seed in range(5):
        g = random_access_graph(15, 0.1, seed=seed)
        assert nx.is_connected(g) and sorted(g.nodes) == list(range(15))
    assert nx.utils.graphs_equal(random_access_graph(10, 0.3, seed=1), random_access_graph(10, 0.3, seed=1))


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_random_walks_follow_edges_and_are_seeded(kind):
    G = GRAPHS[kind]
    w = random_walk(G, 200, seed=5)
    assert walk_follows_edges(G, w)
    assert np.array_equal(w.items, random_walk(G, 200, seed=5).items)
    assert not np.array_equal(w.items, random_walk(G, 200, seed=6).items)


@pytest.mark.parametrize("kind", sorted(GRAPHS))
@pytest.mark.parametrize("name", ["LRU", "FIFO", "Random"])
def test_adversarial_walks_follow_edges(kind, name):
    G = GRAPHS[kind]
    w = adversarial_walk(make(name), G, 3, 80, seed=2)
    assert walk_follows_edges(G, w)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("extra", [1, 2])
def test_adversarial_walk_on_a_cycle_makes_lru_fault_every_step(k, extra):
    # on a cycle of N >= k+1 nodes the walk keeps going one way and LRU misses every request
    G = cycle_access_graph(k + extra)
    w = adversarial_walk(make("LRU"), G, k, 60)
    assert run_rm(make("LRU"), w, k).misses == 60


def test_adversarial_walk_on_a_star_faults_on_every_leaf():
    k = 4
    G = star_access_graph(k + 1)
    w = adversarial_walk(make("LRU"), G, k, 61)
    leaves = int((w.items != 0).sum())
    res = run_rm(make("LRU"), w, k, record=True)
    assert res.misses == leaves + 1  # every leaf visit plus the cold centre


def test_walk_checker_rejects_non_walks():
    G = path_access_graph(4)
    assert walk_follows_edges(G, PagingTrace.unit([0, 1, 2, 1]))
    assert not walk_follows_edges(G, PagingTrace.unit([0, 2]))
    assert not walk_follows_edges(G, PagingTrace.unit([0, 0]))
    assert not walk_follows_edges(G, PagingTrace.unit([3, 4]))
    assert not walk_follows_edges(G, PagingTrace.from_steps([[0, 1]]))


def test_bad_graphs_are_one_line_errors():
    with pytest.raises(ParameterError, match="no neighbour"):
        random_walk(nx.empty_graph(1), 3)
    with pytest.raises(ParameterError, match="start = 9"):
        random_walk(path_access_graph(3), 3, start=9)
    with pytest.raises(ParameterError, match="non-negative ints"):
        random_walk(nx.path_graph(["a", "b"]), 3)
