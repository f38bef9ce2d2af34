"""Access graphs (paper Sections 2.3 and 8; SPEC section 5; Borodin, Irani, Raghavan & Schieber, JCSS 1995;
Chrobak & Noga, "LRU is better than FIFO", Algorithmica 1999).

When requests must follow the edges of a graph G, a policy's competitive ratio ``c_A(G)`` is the least ``c`` with
``ALG <= c OPT + b`` on every walk.  It is computed exactly as the maximum ratio (policy faults / optimum faults)
over the cycles of a finite game graph that pairs the policy's cache state with every offline schedule
(``kvcore.optima.access_graph.access_graph_ratio``): an upper certificate (a fixed point of exact integer max-plus
value iteration, giving the additive constant b) and a lower certificate (a cycle of exactly that ratio, replayed
as an explicit walk through the registered policy and Belady).  Stated values checked: path LRU 1, FIFO (k+1)/2;
cycle of N >= k+1 nodes LRU (N-1)/(N-k), FIFO k; star with k+1 leaves LRU k-1; and c_LRU(G) <= c_FIFO(G).
"""

from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

import policies
from adversary import adversarial_walk, grid_access_graph, tree_access_graph
from adversary.strategies import access_graphs
from kvcore.engine import run
from kvcore.optima import belady
from kvcore.traces import PagingTrace
from kvcore.optima.access_graph import access_graph_ratio, build_game, longest_paths, witness_walk
from theorems.results.practice import access_graph_table


def test_stated_values_are_exact_for_k_2_and_3():
    table = access_graph_table(ks=(2, 3), path_extra=2, cycle_extra=(1, 2))
    assert table.holds, table.explain()
    for r in table.rows:
        if r.bound is None:
            continue
        # the replayed witness walk approaches the exact ratio from below as it is repeated
        (_, _, _, r20), (_, _, _, r80) = r.params["replay"]
        assert r20 <= r80 <= r.ratio + 1e-12, (r.workload, r.policy, r.params["replay"])
        assert r80 >= r.ratio * (1 - 0.05), (r.workload, r.policy, r.params["replay"])


@pytest.mark.slow
def test_stated_values_are_exact_for_k_4():
    table = access_graph_table(ks=(4,), path_extra=1, cycle_extra=(0, 1))
    assert table.holds, table.explain()


def _max_excess_by_enumeration(G, k, policy, c: Fraction, L: int) -> float:
    """max over ALL walks of at most L requests of ALG - c OPT, with ALG from the registered policy and OPT from
    Belady: an independent evaluation of the quantity the game's value iteration bounds."""
    best = 0.0
    nodes = sorted(G.nodes)
    for start in nodes:
        walks = [[start]]
        for _ in range(L):
            for w in walks:
                tr = PagingTrace.unit(np.asarray(w))
                best = max(best, run(policies.make(policy), tr, k, "rm").cost - float(c) * belady(tr, k).cost)
            walks = [w + [u] for w in walks for u in sorted(G[w[-1]])]
    return best


@pytest.mark.parametrize("kind,policy", [("path", "FIFO"), ("cycle", "LRU"), ("cycle", "FIFO"), ("star", "LRU")])
def test_game_value_equals_exhaustive_enumeration(kind, policy):
    """For c = the exact ratio, the game's additive constant is the true max of ALG - c OPT over all walks; the
    longest optimal path it needs is short, so enumerating every walk up to that length must reach it exactly."""
    k = 2
    G = {"path": nx.path_graph(4), "cycle": nx.cycle_graph(4), "star": nx.star_graph(3)}[kind]
    res = access_graph_ratio(G, k, policy, kind)
    cert = longest_paths(build_game(G, k, policy), res.upper)
    L = 9
    assert cert.max_at <= L, "the maximum needs longer walks than enumerated"
    assert _max_excess_by_enumeration(G, k, policy, res.upper, L) == pytest.approx(cert.additive, abs=1e-9)


def test_a_smaller_ratio_is_not_an_upper_bound():
    """Just below the exact value the game has a positive cycle: ALG - c OPT grows without bound."""
    G = nx.cycle_graph(5)
    for policy, exact in (("LRU", Fraction(2)), ("FIFO", Fraction(3))):
        game = build_game(G, 3, policy)
        assert longest_paths(game, exact).bounded
        assert not longest_paths(game, exact - Fraction(1, 12)).bounded


def test_witness_walk_alg_minus_c_opt_grows_below_the_ratio():
    """Replayed through the registered LRU and Belady, the star witness walk pays (k-1) OPT up to a constant, so
    for any c < k-1 the excess ALG - c OPT grows linearly with the number of repetitions."""
    k = 3
    res = access_graph_ratio(nx.star_graph(k + 1), k, "LRU", "star")
    assert res.ratio == k - 1
    excess = []
    for m in (10, 20, 40):
        tr = witness_walk(res, m)
        excess.append(run(policies.make("LRU"), tr, k, "rm").cost - (k - 1 - 0.25) * belady(tr, k).cost)
    assert excess[0] < excess[1] < excess[2]


@settings(max_examples=25)
@given(G=access_graphs(max_nodes=6))
def test_lru_never_worse_than_fifo_on_generated_graphs(G):
    """Chrobak & Noga 1999: c_LRU(G) <= c_FIFO(G) for every access graph (exact values, k = 2)."""
    lru = access_graph_ratio(G, 2, "LRU")
    fifo = access_graph_ratio(G, 2, "FIFO")
    if lru.ratio is not None and fifo.ratio is not None:
        assert lru.ratio <= fifo.ratio, (sorted(G.edges), lru.ratio, fifo.ratio)
    else:  # not certified exactly: c_LRU <= lru.upper and c_FIFO > fifo.lower
        assert lru.upper <= fifo.lower, (sorted(G.edges), lru, fifo)


def _lru_le_fifo(graphs, k):
    for name, G in graphs:
        lru, fifo = access_graph_ratio(G, k, "LRU", name), access_graph_ratio(G, k, "FIFO", name)
        assert lru.ratio is not None and fifo.ratio is not None and lru.ratio <= fifo.ratio, (name, lru, fifo)


def test_lru_never_worse_than_fifo_k3():
    _lru_le_fifo((("cycle 5", nx.cycle_graph(5)), ("path 6", nx.path_graph(6))), 3)


@pytest.mark.slow
def test_lru_never_worse_than_fifo_k3_grid_and_tree():
    _lru_le_fifo((("grid 2x3", grid_access_graph(2, 3)), ("binary tree h=2", tree_access_graph(2, 2))), 3)


def test_adversarial_walk_is_valid_and_below_the_exact_ratio():
    """The one-step-lookahead adversary of ``adversary.access_graphs`` produces a walk on the graph whose ratio
    can never exceed the certified upper bound (up to its additive constant)."""
    for G, name in ((nx.cycle_graph(5), "cycle 5"), (nx.star_graph(4), "star 4")):
        for policy in ("LRU", "FIFO"):
            res = access_graph_ratio(G, 3, policy, name)
            tr = adversarial_walk(policies.make(policy), G, 3, 400)
            alg = run(policies.make(policy), tr, 3, "rm").cost
            assert alg <= float(res.upper) * belady(tr, 3).cost + res.additive + 1e-9
