"""Exact competitive ratios of LRU and FIFO on an access graph (Borodin, Irani, Raghavan & Schieber, "Competitive
paging with locality of reference", JCSS 50, 1995; Chrobak & Noga, "LRU is better than FIFO", Algorithmica 23, 1999).

Requests are restricted to walks of a graph ``G``.  ``c_policy(G)`` is the infimum of ``c`` such that
``ALG(walk) <= c OPT(walk) + b`` for every walk (some constant ``b``).  It is computed exactly as a maximum-ratio
cycle of a finite game graph (:func:`build_game`): the policy's cache state, every offline demand-paging schedule's
cache set, and the current node.  :func:`access_graph_ratio` certifies the value from both sides -- a longest-path
fixed point proves the upper bound (:func:`longest_paths`), a tight cycle with an offline fault proves it is
attained (:func:`tight_cycle`) -- and returns a witness walk that the caller can replay through the registered
policy and Belady (:func:`witness_walk`).  Exponential in ``k`` and the graph size: for small graphs only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..errors import ParameterError
from ..traces import PagingTrace


def _lru_move(state: tuple, u: int, k: int) -> tuple[tuple, int]:
    """LRU's cache as a recency list (most recent first); returns the new list and 1 on a fault."""
    if u in state:
        return (u,) + tuple(x for x in state if x != u), 0
    return ((u,) + state)[:k], 1


def _fifo_move(state: tuple, u: int, k: int) -> tuple[tuple, int]:
    """FIFO's cache as an admission queue (oldest first); hits do not reorder it."""
    if u in state:
        return state, 0
    return (state + (u,))[-k:], 1


ONLINE_MOVES = {"LRU": _lru_move, "FIFO": _fifo_move}


@dataclass
class GameGraph:
    """The finite game whose cycles are the walks of an access graph, played by ``policy`` against every offline
    schedule at once.

    A state is ``(policy's cache state, offline cache set, current node)``; the start state has an empty cache and
    no node (the first request may be any node).  From a state, one edge per neighbour ``u`` of the current node and
    per choice of the offline schedule: keep its set on a hit, add ``u`` while it has room, else swap ``u`` for any
    resident item.  Edge labels: ``a`` = the policy's fault (0/1), ``o`` = the schedule's fault (0/1).  The offline
    side may be any demand-paging schedule; the minimum over schedules is Belady's cost, and demand paging loses
    nothing (Belady 1966), so ``max over walks (ALG - c OPT)`` equals the largest label sum ``sum(a - c o)`` over
    paths from the start state.
    """

    policy: str
    k: int
    n_nodes: int
    states: list
    src: np.ndarray
    dst: np.ndarray
    a: np.ndarray
    o: np.ndarray

    @property
    def n_states(self) -> int:
        return len(self.states)

    def node_of(self, s: int) -> int | None:
        return self.states[s][2]


def build_game(G: nx.Graph, k: int, policy: str) -> GameGraph:
    """All states reachable from the empty start (breadth-first), with their labelled edges."""
    if policy not in ONLINE_MOVES:
        raise ParameterError(f"policy = {policy!r}: the access-graph game models {sorted(ONLINE_MOVES)}")
    if k < 1:
        raise ParameterError(f"k = {k!r}: must be >= 1")
    move = ONLINE_MOVES[policy]
    nodes = sorted(int(v) for v in G.nodes)
    nbrs = {v: sorted(int(u) for u in G[v] if u != v) for v in nodes}
    start = ((), frozenset(), None)
    index = {start: 0}
    states = [start]
    src, dst, a_lab, o_lab = [], [], [], []
    queue = deque([start])
    while queue:
        s = queue.popleft()
        alg, opt, cur = s
        i = index[s]
        for u in (nodes if cur is None else nbrs[cur]):
            alg2, fa = move(alg, u, k)
            if u in opt:
                opts = [(opt, 0)]
            elif len(opt) < k:
                opts = [(opt | {u}, 1)]
            else:
                opts = [((opt - {x}) | {u}, 1) for x in opt]
            for opt2, fo in opts:
                s2 = (alg2, opt2, u)
                j = index.get(s2)
                if j is None:
                    j = index[s2] = len(states)
                    states.append(s2)
                    queue.append(s2)
                src.append(i)
                dst.append(j)
                a_lab.append(fa)
                o_lab.append(fo)
    return GameGraph(policy, k, len(nodes), states, np.asarray(src), np.asarray(dst), np.asarray(a_lab),
                     np.asarray(o_lab))


_NEG = -(2 ** 62)


@dataclass
class Certificate:
    """Outcome of :func:`longest_paths` at ``c = p/q``: ``bounded`` iff no cycle has ``sum(a) > c sum(o)``."""

    c: Fraction
    bounded: bool
    iterations: int
    values: np.ndarray | None = None      # q * max(ALG - c OPT) over paths ending in each state (bounded case)
    max_at: int | None = None              # fewest requests of a walk attaining the additive constant

    @property
    def additive(self) -> float | None:
        """``max over walks (ALG - c OPT)``: the additive constant of the bound ``ALG <= c OPT + b``."""
        return None if self.values is None else float(self.values.max()) / self.c.denominator


def longest_paths(game: GameGraph, c: Fraction) -> Certificate:
    """Exact max-plus value iteration with integer weights ``q a - p o`` (``c = p/q``).

    ``U_L(s)`` = the largest weight of a path of at most ``L`` edges from the start to ``s``.  If ``U_{L+1} = U_L``
    it is a fixed point: no walk of any length does better, so ``ALG <= c OPT + max U / q`` on every walk.  Without
    a positive cycle the fixed point is reached within ``n_states`` rounds (longest simple paths); a change in round
    ``n_states`` means the optimal path repeats a state, and the repeated cycle has positive weight, i.e. a cycle
    with ``sum a / sum o > c``: then ``c`` is below the competitive ratio."""
    p, q = c.numerator, c.denominator
    w = q * game.a.astype(np.int64) - p * game.o.astype(np.int64)
    order = np.argsort(game.dst, kind="stable")
    src, dst, w = game.src[order], game.dst[order], w[order]
    starts = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
    targets = dst[starts]
    U = np.full(game.n_states, _NEG, dtype=np.int64)
    U[0] = 0
    top, top_at = 0, 0
    for it in range(1, game.n_states + 2):
        cand = np.where(U[src] > _NEG, U[src] + w, _NEG)
        best = np.maximum.reduceat(cand, starts)
        new = U.copy()
        new[targets] = np.maximum(U[targets], best)
        if np.array_equal(new, U):
            return Certificate(c, True, it, U, top_at)
        U = new
        if U.max() > top:
            top, top_at = int(U.max()), it
    return Certificate(c, False, game.n_states + 1)


def tight_cycle(game: GameGraph, cert: Certificate) -> list[int] | None:
    """A cycle of states with ``sum a = c sum o`` and ``sum o >= 1`` (so its ratio is exactly ``c``), or None.

    At the fixed point every edge satisfies ``U(dst) >= U(src) + w``; summed around a cycle of weight 0 the slacks
    add to 0, so zero-weight cycles are exactly the cycles of the *tight* edges (slack 0).  An edge with ``o = 1``
    whose ends lie in one strongly connected component of the tight subgraph closes such a cycle."""
    if not cert.bounded:
        return None
    p, q = cert.c.numerator, cert.c.denominator
    U = cert.values
    w = q * game.a.astype(np.int64) - p * game.o.astype(np.int64)
    tight = (U[game.src] > _NEG) & (U[game.dst] == U[game.src] + w)
    ts, td = game.src[tight], game.dst[tight]
    mat = csr_matrix((np.ones(ts.size), (ts, td)), shape=(game.n_states, game.n_states))
    _, comp = connected_components(mat, directed=True, connection="strong")
    closing = np.flatnonzero((game.o[tight] == 1) & (comp[ts] == comp[td]))
    if closing.size == 0:
        return None
    e = int(closing[0])
    s0, s1 = int(ts[e]), int(td[e])
    # shortest tight path s1 -> s0 inside the component closes the cycle
    adj: dict[int, list[int]] = {}
    for x, y in zip(ts.tolist(), td.tolist()):
        if comp[x] == comp[s0] and comp[y] == comp[s0]:
            adj.setdefault(x, []).append(y)
    return [s0] + _shortest_path(adj, s1, s0)[:-1]


def _shortest_path(adj: dict[int, list[int]], source: int, target: int) -> list[int]:
    """States of a shortest path ``source -> target`` in the adjacency lists ``adj`` (breadth-first, neighbours in
    list order), both ends included."""
    prev = {source: None}
    frontier = deque([source])
    while frontier and target not in prev:
        x = frontier.popleft()
        for y in adj.get(x, ()):
            if y not in prev:
                prev[y] = x
                frontier.append(y)
    path = [target]
    while path[-1] != source:
        path.append(prev[path[-1]])
    return path[::-1]


def _path_from_start(game: GameGraph, target: int) -> list[int]:
    """States of a shortest path from the start state to ``target`` (start excluded)."""
    out: dict[int, list[int]] = {}
    for x, y in zip(game.src.tolist(), game.dst.tolist()):
        out.setdefault(x, []).append(y)
    return _shortest_path(out, 0, target)[1:]


@dataclass
class AccessGraphRatio:
    """The exact competitive ratio of ``policy`` on one access graph (with additive constant), and its witness."""

    graph: str
    policy: str
    k: int
    n_states: int
    ratio: Fraction | None                 # exact value when certified from both sides
    upper: Fraction                        # ALG <= upper * OPT + additive on every walk (certified)
    lower: Fraction                        # = ratio when certified, else the largest candidate shown too small
    additive: float                        # max over walks of ALG - upper * OPT
    prefix: list[int] = field(default_factory=list)     # walk reaching the witness cycle
    cycle: list[int] = field(default_factory=list)      # walk of the witness cycle (repeat it)
    cycle_faults: tuple[int, int] = (0, 0)              # (policy, offline schedule) faults per turn of the cycle


def _candidates(k: int, max_den: int) -> list[Fraction]:
    """0 and every fraction in ``[1, k]`` with denominator at most ``max_den``.  The ratio of LRU/FIFO lies in
    ``[1, k]`` unless no cycle makes the optimum fault (a graph of at most ``k`` nodes), when it is 0: after a
    finite warm-up nothing faults."""
    return [Fraction(0)] + sorted({Fraction(p, q) for q in range(1, max_den + 1) for p in range(q, k * q + 1)})


def access_graph_ratio(G: nx.Graph, k: int, policy: str, graph_name: str = "", max_den: int = 12,
                       guess: Fraction | None = None) -> AccessGraphRatio:
    """``c_policy(G)`` = inf of ``c`` such that ``ALG(walk) <= c OPT(walk) + b`` for all walks on ``G`` (some b).

    It is the largest ratio ``sum a / sum o`` over cycles of :func:`build_game` reachable from the start (a maximum
    ratio cycle): a cycle repeated m times gives walks with ALG/OPT -> its ratio, and with no cycle above ``c`` the
    additive constant is the longest-path value.  Search: binary search over fractions in ``[1, k]`` with
    denominator <= ``max_den`` using :func:`longest_paths` (bounded iff ``c >= c*``), starting with ``guess`` when
    given; at the smallest bounded candidate a tight cycle with ``o >= 1`` (:func:`tight_cycle`) certifies that
    value exactly.  ``ratio`` is None when no candidate is certified from below (``c*`` is then in
    ``(lower, upper]``); it is 0 on graphs where, after a warm-up, nothing faults (at most k nodes).  LRU and
    FIFO are k-competitive (Sleator & Tarjan 1985), so ``c = k`` is always bounded."""
    game = build_game(G, k, policy)
    cands = _candidates(k, max_den)
    cache: dict[Fraction, Certificate] = {}

    def test(c: Fraction) -> Certificate:
        if c not in cache:
            cache[c] = longest_paths(game, c)
        return cache[c]

    lo, hi = -1, len(cands) - 1                   # cands[hi] bounded; cands[lo] unbounded (lo = -1: none known)
    if test(cands[0]).bounded:
        hi = 0
    elif guess is not None and guess in cands:
        g = cands.index(guess)
        if test(guess).bounded:
            hi = g
            if g > 0 and not test(cands[g - 1]).bounded:
                lo = g - 1
        else:
            lo = g
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if test(cands[mid]).bounded:
            hi = mid
        else:
            lo = mid
    cert = test(cands[hi])
    cyc = tight_cycle(game, cert)
    prefix, walk, faults = [], [], (0, 0)
    if cyc is not None:
        prefix = [game.node_of(s) for s in _path_from_start(game, cyc[0])]
        walk = [game.node_of(s) for s in cyc[1:] + cyc[:1]]
        label = {(x, y): (a, o) for x, y, a, o in zip(game.src.tolist(), game.dst.tolist(), game.a.tolist(),
                                                      game.o.tolist())}
        turns = [label[(x, y)] for x, y in zip(cyc, cyc[1:] + cyc[:1])]
        faults = (sum(a for a, _ in turns), sum(o for _, o in turns))
    exact = cyc is not None or hi == 0          # c* >= 0 always, so a bound at 0 is exact
    lower = cands[hi] if exact else cands[lo]
    return AccessGraphRatio(graph_name, policy, k, game.n_states, cands[hi] if exact else None,
                            cands[hi], lower, cert.additive, prefix, walk, faults)


def witness_walk(res: AccessGraphRatio, repeats: int) -> PagingTrace:
    """The certified bad walk: the prefix, then the witness cycle ``repeats`` times."""
    seq = res.prefix + res.cycle * repeats
    return PagingTrace.unit(np.asarray(seq, dtype=np.int64), f"{res.policy} witness on {res.graph} x{repeats}")
