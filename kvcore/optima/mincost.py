"""Min-cost flow on the time-ordered networks of the RM and NM optima (SPEC section 3), with several backends.

A :class:`FlowNetwork` is a list of arcs ``tail -> head`` with integer bounds ``[lower, cap]`` and float costs, and
an integer supply per node (positive: flow enters there).  :func:`solve` returns an integral flow of minimum cost.
Both optima build networks whose node-arc incidence matrix is totally unimodular (every column has one ``+1`` and
one ``-1``), so with integer bounds and supplies every vertex of the LP is integral and a simplex method returns an
integral optimum (Ahuja, Magnanti & Orlin, *Network Flows*, Prentice Hall 1993, ch. 9 and 11).

Backends
    ``"highs"``     HiGHS dual simplex through :func:`scipy.optimize.linprog` (``method="highs-ds"``) on the sparse
                    incidence matrix.  The answer is a simplex vertex, so it is integral up to HiGHS' primal
                    feasibility tolerance (1e-7); it is rounded, and the rounded flow is checked exactly (integer
                    bounds and conservation) before use.  Optimality is certified a posteriori: for the dual values
                    ``y`` HiGHS returns, weak LP duality gives, for every feasible flow ``z``,
                    ``c.x - c.z <= sum_{rc_a < 0} (-rc_a)(cap_a - x_a) + sum_{rc_a > 0} rc_a (x_a - lower_a)`` with
                    reduced costs ``rc = c - y_tail + y_head``.  That right-hand side is reported as ``gap_bound``;
                    it is the only slack in the answer (of the order of the dual feasibility tolerance 1e-7 times the
                    number of arcs with a violated reduced cost, and usually exactly 0).
    ``"networkx"``  :func:`networkx.network_simplex` on exactly scaled integer costs.  Every double is an integer
                    multiple of a power of two, so multiplying all costs by the largest denominator of their exact
                    ratios gives Python integers (unbounded) with the same order and ratios; the pivots then make no
                    rounding error at all and the answer is exactly optimal (``gap_bound`` 0).  This is needed, not
                    cosmetic: on float costs such as ``uniform(1, 2)`` networkx's simplex was seen not to terminate
                    (an RM trace of 300 steps ran for over 60 s; the same trace with integer costs takes 0.1 s).

Choice by measurement (2-core machine; wall seconds of the solve alone on the bench workloads of
``bench/optimum_child.py``).  HiGHS is the default.  RM, T = 10^4, h = 100: HiGHS 0.65 s, networkx 11 s.  RM,
T = 10^5 (Zipf(1) over 10^4 items, costs 1..8), h = 1,000: HiGHS 13.8 s; networkx did not finish in 600 s.  NM with 32
entries per row: T = 1,000, h = 64 HiGHS 1.4 s, networkx 27 s; T = 20,000, h = 1,024 (1.3 M arcs) HiGHS 106 s.
HiGHS' dual simplex prices with devex instead of its default (dual steepest edge): same optimum, RM T = 10^5
7.4 s instead of 13.8 s, NM T = 5,000 / h = 256 7.9 s instead of 9.9 s, NM T = 20,000 82 s instead of 106 s, and
RM T = 10^6 / h = 1,000 (2 M arcs) finishes in 411 s at 3.3 GB peak where the default did not finish in 1,500 s
(dantzig pricing: 82 s at NM T = 5,000; presolve off: 54 s there; interior point: no gain).

Tried and not included, all exact and all slower where it matters:
* OR-tools' cost-scaling push-relabel (``SimpleMinCostFlow``, integer costs): RM T = 10^5 103 s (14x slower than
  devex HiGHS), NM T = 5,000 2.8 s (faster), NM T = 20,000 88 s (slower than devex HiGHS): a 30 MB dependency that
  loses at both of the largest sizes.
* Successive shortest paths inserting one arc at a time (Dijkstra with potentials, compiled with numba): equal to
  HiGHS on every instance compared and 17x faster at RM T = 2,000, but each insertion explores about 5 h nodes (the
  zero-reduced-cost plateaus of free slots), so RM T = 10^5 took 140 s and NM T = 1,000 39 s.  One full shortest
  path per slot (classic SSP) needs ``h`` Dijkstra runs of 0.4-0.6 s each on the largest networks: 400-600 s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError

SOLVERS = ("highs", "networkx")
_INTEGRALITY_TOL = 1e-6


@dataclass(frozen=True)
class FlowNetwork:
    """Arcs ``tail[a] -> head[a]`` with flow bounds ``[lower[a], cap[a]]`` (integers) and ``cost[a]`` per unit."""

    n_nodes: int
    tail: np.ndarray
    head: np.ndarray
    lower: np.ndarray
    cap: np.ndarray
    cost: np.ndarray
    supply: np.ndarray

    @property
    def n_arcs(self) -> int:
        return int(self.tail.size)


@dataclass(frozen=True)
class FlowSolution:
    flow: np.ndarray
    solver: str
    gap_bound: float


def check_solver(solver: str) -> str:
    if solver not in SOLVERS:
        raise ParameterError(f"solver = {solver!r}: must be one of {SOLVERS}")
    return solver


def solve(net: FlowNetwork, solver: str = "highs") -> FlowSolution:
    """A minimum-cost integral flow of ``net`` (see module docstring for what each backend guarantees)."""
    check_solver(solver)
    if net.n_arcs == 0:
        flow = np.zeros(0, dtype=np.int64)
        _check_feasible(net, flow, solver)
        return FlowSolution(flow, solver, 0.0)
    if solver == "highs":
        return _solve_highs(net)
    return _solve_networkx(net)


def _check_feasible(net: FlowNetwork, flow: np.ndarray, solver: str) -> None:
    """Exact integer check of bounds and conservation: a backend's answer is never trusted blindly."""
    if (flow < net.lower).any() or (flow > net.cap).any():
        raise RuntimeError(f"min-cost flow backend {solver!r} returned a flow outside the arc bounds")
    balance = np.bincount(net.tail, weights=flow, minlength=net.n_nodes).astype(np.int64) - \
        np.bincount(net.head, weights=flow, minlength=net.n_nodes).astype(np.int64)
    if not np.array_equal(balance, net.supply):
        raise RuntimeError(f"min-cost flow backend {solver!r} returned a flow that violates conservation")


def _incidence(net: FlowNetwork) -> sp.csc_matrix:
    m = net.n_arcs
    rows = np.concatenate([net.tail, net.head])
    cols = np.concatenate([np.arange(m), np.arange(m)])
    vals = np.concatenate([np.ones(m), -np.ones(m)])
    return sp.csc_matrix((vals, (rows, cols)), shape=(net.n_nodes, m))


def _solve_highs(net: FlowNetwork) -> FlowSolution:
    from scipy.optimize import linprog

    res = linprog(net.cost, A_eq=_incidence(net), b_eq=net.supply.astype(np.float64),
                  bounds=np.column_stack([net.lower, net.cap]).astype(np.float64), method="highs-ds",
                  options={"simplex_dual_edge_weight_strategy": "devex"})  # measured faster, see module docstring
    if res.status != 0:
        # the networks built here always admit a flow (the line alone carries it), so this is a solver failure
        raise RuntimeError(f"HiGHS failed on the min-cost flow: {res.message}")
    x = res.x
    flow = np.rint(x).astype(np.int64)
    if np.abs(x - flow).max() > _INTEGRALITY_TOL:
        raise RuntimeError("HiGHS returned a non-integral flow (not a vertex); cannot certify the optimum")
    _check_feasible(net, flow, "highs")
    y = res.eqlin.marginals
    rc = net.cost - y[net.tail] + y[net.head]
    gap = float(np.sum(np.where(rc < 0, -rc * (net.cap - flow), 0.0))
                + np.sum(np.where(rc > 0, rc * (flow - net.lower), 0.0)))
    return FlowSolution(flow, "highs", gap)


def _solve_networkx(net: FlowNetwork) -> FlowSolution:
    import networkx as nx

    # networkx has no lower bounds: route each lower bound through as fixed flow and shift the supplies
    lower = net.lower
    demand = -(net.supply - np.bincount(net.tail, weights=lower, minlength=net.n_nodes).astype(np.int64)
               + np.bincount(net.head, weights=lower, minlength=net.n_nodes).astype(np.int64))
    ratios = [c.as_integer_ratio() for c in net.cost.tolist()]
    scale = max((den for _, den in ratios), default=1)
    weights = [num * (scale // den) for num, den in ratios]
    g = nx.MultiDiGraph()
    g.add_nodes_from((v, {"demand": int(d)}) for v, d in enumerate(demand.tolist()))
    g.add_edges_from((u, v, a, {"capacity": c, "weight": w}) for a, (u, v, c, w) in
                     enumerate(zip(net.tail.tolist(), net.head.tolist(), (net.cap - lower).tolist(), weights)))
    _, flow_dict = nx.network_simplex(g)
    flow = lower.astype(np.int64).copy()
    for u, out in flow_dict.items():
        for v, by_key in out.items():
            for a, f in by_key.items():
                flow[a] += int(f)
    _check_feasible(net, flow, "networkx")
    return FlowSolution(flow, "networkx", 0.0)
