"""Exact min-cost flow for the RM and NM optima (SPEC section 3): exact integer costs, three backends, a certificate.

A :class:`FlowNetwork` has arcs ``tail -> head`` with integer bounds ``[lower, cap]``, an integer supply per node
(positive: flow enters there), a feasible starting flow, and costs held *exactly*: ``cost`` are integers (int64, or
wide integers in int64 limbs, :class:`~kvcore.optima.limbs.Limbs`, when they do not fit) and the true cost of arc
``a`` is ``cost[a] * cost_unit``.  Every finite double is an integer times a power of two, so
:func:`exact_integers` turns any valid fault costs or attention weights into such integers without rounding (their
gcd divided out into the unit), and sums of them (the NM network's prefix masses) stay exact.  The cost of any
integral flow is then an integer number of units, and a flow whose cost is provably less than one unit above a lower
bound on the optimum is exactly optimal.

:func:`solve` returns an integral flow with that proof: ``gap_bound``, an upper bound on ``cost(flow) - OPT`` from
LP duality evaluated in exact integer arithmetic, always below one unit, which forces ``cost(flow) = OPT`` (a
backend that cannot prove that raises instead of returning; the optima report it as ``certified``).  Both optima
build networks whose node-arc incidence matrix is totally unimodular (every column one ``+1`` and one ``-1``), so with
integer bounds and supplies the LP has integral optimal vertices (Ahuja, Magnanti & Orlin, *Network Flows*, Prentice
Hall 1993, ch. 9 and 11).

Backends
    ``"netsimplex"`` (default)  the primal network simplex of :mod:`kvcore.optima.netsimplex` on int64 costs.  When
                    the exact integers fit the overflow-safe range ``2**cost_bits(n)`` they are used as they are and
                    the final integer potentials are the certificate (gap 0, checked once more in int64).  Otherwise
                    (attention weights carry up to 53 significant bits at many binary exponents) the costs are
                    rounded to that range, solved, and the answer is verified in exact wide integers (int64
                    limbs, :mod:`kvcore.optima.limbs`): potentials recomputed along the final tree from the exact
                    costs, then the sign of every arc's exact reduced cost.  If a near tie was resolved the wrong way
                    by the rounding, the exact reduced costs (an equivalent cost vector) are rounded at a finer scale
                    and the simplex continues from the same tree; each round gains ``cost_bits(n) - 2 bitlen(n)``
                    bits and the last one is exact, so it always ends certified.
    ``"highs"``     HiGHS dual simplex (devex pricing) through :func:`scipy.optimize.linprog` on the sparse
                    incidence matrix, with costs scaled by a power of two to at most 1 in magnitude (HiGHS' tolerances
                    are absolute: unscaled costs of 1e-9 were solved as if they were all equal to 0, and costs of
                    1e20 made it fail).  The rounded vertex is checked exactly (integrality, bounds, conservation);
                    HiGHS' duals ``y`` (doubles, hence exact dyadic rationals) give the weak-duality bound
                    ``sum_{rc<0} (-rc)(cap - x) + sum_{rc>0} rc (x - lower)`` with ``rc = c - y_tail + y_head``,
                    evaluated exactly.  Below one unit the answer is certified; otherwise the exact network simplex
                    solves the network again (reported as ``"highs+netsimplex"``).
    ``"networkx"``  :func:`networkx.network_simplex` on the exact integers (Python integers, unbounded): exact with
                    no tolerance, certified by construction; slow.  It is needed on exact integers: on float costs
                    such as ``uniform(1, 2)`` it was seen not to terminate.

Measurements (2-core machine shared with other jobs, load 5-9 throughout, so CPU seconds of the solving process
are quoted; ``python -m bench --skip vs-lcs e2e memory startup mrc engine nm`` reports wall and CPU seconds and peak
RSS of each optimum in its own process, and runs the pre-exact HiGHS path as ``baseline`` in the same run;
docs/performance.md has one run's table):

* What won.  The primal network simplex on the *contracted* NM network (one token node per token instead of a chain
  node per entry, :mod:`kvcore.optima.nm_flow`), nodes numbered in time order, arcs priced node by node (NM) or by
  head time (RM), blocks of ``0.1 sqrt(m)`` arcs.  One benchmark run, ours against the pre-exact HiGHS path, CPU
  seconds (wall) and peak RSS: NM T = 20,000 / h = 1,024 (32 entries per row) 7.1 s (10.2 s) and 474 MB against
  87 s (111 s) and 1.8 GB: 12.3x; NM T = 5,000 / h = 256 1.0 s against 8.5 s: 8.7x; RM T = 10^5 / h = 1,000 4.6 s
  against 9.2 s: 2.0x; RM T = 10^6 173 s (236 s) and 548 MB against 457 s (610 s) and 3.2 GB: 2.6x.  Same costs
  throughout.  The NM time includes ~1.5 s of network building and exact verification.
* What did not.  The same simplex on the chain network (T + 1 + nnz nodes): NM T = 5,000 21-33 s wall against 22.7 s
  for HiGHS in the same conditions (trees deep along the 640 k chain nodes, 99 % degenerate pivots); contracting the
  chains made it 10x faster.  Nodes numbered line first, tokens after: 1.7x slower than time order (cache misses
  along tree paths).  Pricing order at NM T = 5,000: construction order (line, take, exit arcs) 1.0 s, by head 2x
  slower, by tail node 0.44 s; at RM T = 10^5: construction order 7.1 s, by tail 5.6 s, by head 4.4-4.8 s.  Block
  sizes 0.1 / 0.3 / 1.0 sqrt(m): NM T = 20,000 5.9 / 6.6 / 8.8 s, RM T = 10^5 4.4 / 4.9 / 5.5 s CPU.  Warm starts:
  the future-mass heuristic's schedule as starting flow (basis: the free line arcs plus each token hung by its take
  or first exit arc) needed 231 k pivots against 209 k from the artificial star at NM T = 5,000 (the heuristic is
  20 % off in retained mass, and the pivots that repair the duals are needed anyway); the whole line as the starting
  tree, 454 k against 251 k.  Successive shortest paths (Dijkstra with potentials, stopping at the sink) on the
  contracted network: NM T = 20,000 75 s wall (each of the 1,024 rounds settles ~37 k of the 40 k nodes); RM
  T = 10^5 68 s wall against 23 s for the simplex.  Redundant cost-0 "express" arcs over the RM line (to shorten tree
  paths): 7.0-7.5 s against 7.7 s CPU.  Dropping RM gap arcs that provably need not be kept (``>= h - |Q_t|`` cheaper
  nested gaps across one step): at most 7.5 % of the long gaps qualify on the bench trace, not pursued.
* RM gains less, and misses issue 16's 60 s at T = 10^6 (173 s CPU).  The RM network is a single time line with a
  gap arc per pair of consecutive requests, so every simplex cycle follows long stretches of the line (at T = 10^5
  each pivot climbs ~1,000 tree nodes and shifts ~1,450 potentials), and the NM contraction has no RM counterpart
  (each gap is an independent choice).  Pricing by span (shorter gaps first) was tried: 8.4 s against 4.5 s.
* Issue 30 (RM, T = 10^6 under 60 s), tried and not adopted (bench trace, h = 1,000, CPU seconds, the simplex
  measured in the same session).  Insertion in head order: gaps join the network by right endpoint and each is
  followed by the cheapest cycle through it (a shortest path from its head back to its tail in the residual network,
  reduced costs, searched only when the new arc's reduced cost is negative and only up to that bound), the
  successive-shortest-path scheme of Carlisle & Lloyd (Discrete Applied Math. 1995).  Exact (same costs as the
  simplex), but 8.3 s against 5.8 s at T = 10^5 and 61 s against 31 s at 3 x 10^5.  What it showed: (i) 94 % of
  insertions need no search (77,007 of 81,769 at 10^5): the gap has room at every step and equal potentials at both
  ends, so the line itself is a zero-reduced-cost path; (ii) of the rest, 97 % close through a zero-reduced-cost
  path, found by a best-first search toward the tail that still visits 9,400 nodes per search at 10^5 and 13,600 at
  3 x 10^5 (the duals are degenerate: almost every step has price 0, so the zero plateau spans most of the gap);
  (iii) 0.14 % need the Dijkstra step, which settles the whole plateau (56 k nodes at 10^5, 137 k at 3 x 10^5).
  A search that treats runs of the line as one unit (range trees over room and potentials) is what remains; not
  built.  What met the goal instead: the same simplex on halves of the time line, each merge warm-started from
  the halves' optimal bases (:mod:`kvcore.optima.time_split`, the RM default since).  Dominance (3,000 sampled gaps at 10^5): a gap is in some optimum when at each of its steps fewer than the
  free slots are covered by gaps not containing it at no higher cost (25 % of gaps qualify), and in none when at
  some step at least the free slots are covered by nested gaps of no lower cost (5.4 %): too few to remove line
  nodes.  The line as the simplex's starting tree: 1.12 M pivots, 28 s, against 344 k and 4.9 s from the star.
* Exactness: the NM weights' exact integers have ~80-100 bits, the simplex runs once on rounded costs and
  refinement rounds happen on near ties only (tests force them by shrinking the int64 range).  With the exact
  integers as Python integers in object arrays, the exact parts (prefix masses, rounding, potentials, every reduced
  cost) took ~1 s at NM T = 20,000 / 32 entries per row, but 2.6 of 3.5 s per solve on complete rows at T = 2,000
  (2 x 10^6 exit arcs, issue 30); in int64 limbs (:mod:`kvcore.optima.limbs`) the same solve takes 1.2-1.3 s of CPU,
  0.6-0.9 s of it the simplex, with the same flow (a real head's four budgets: 11 s -> 5.2 s, identical schedules).
* Earlier, with HiGHS as the only fast backend: devex pricing measured 1.25-1.9x faster than HiGHS' default dual
  steepest edge (RM T = 10^6 finished in 411 s at 3.3 GB where the default did not in 1,500 s); OR-tools' cost
  scaling push-relabel lost at both large sizes (RM T = 10^5 103 s, NM T = 20,000 88 s); a numba successive shortest
  path solver inserting one arc at a time explored ~5 h nodes per insertion (RM T = 10^5 140 s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError
from .limbs import Limbs, reduced_costs, tree_potentials, width_for
from .netsimplex import cost_bits, solve_integer, solve_integer_columns

SOLVERS = ("netsimplex", "highs", "networkx")
DEFAULT_SOLVER = "netsimplex"
_INTEGRALITY_TOL = 1e-6
_MAX_ROUNDS = 200
COLUMNS_PER_TAIL = 16  # arcs priced in per tail node and round (FlowNetwork.columns; tuned on real NM heads)


@dataclass(frozen=True)
class FlowNetwork:
    """Arcs ``tail[a] -> head[a]``, integer bounds ``[lower[a], cap[a]]``, exact costs ``cost[a] * cost_unit``
    (``cost`` int64 or :class:`~kvcore.optima.limbs.Limbs`), node ``supply``, and a feasible flow ``start``.

    ``scan_order`` (a permutation of the arcs, optional) is the order in which the network simplex prices them; it
    changes nothing but speed (measured: NM arcs grouped by tail node, RM arcs by head time, 1.6-2.3x faster than
    the construction order).  ``columns`` (a bool per arc, optional) are the arcs the network simplex starts from;
    the others are priced in as needed (:func:`kvcore.optima.netsimplex.solve_integer_columns`): the same optimum,
    faster where few of many arcs can matter."""

    n_nodes: int
    tail: np.ndarray
    head: np.ndarray
    lower: np.ndarray
    cap: np.ndarray
    cost: np.ndarray
    cost_unit: Fraction
    supply: np.ndarray
    start: np.ndarray
    scan_order: np.ndarray | None = None
    columns: np.ndarray | None = None

    @property
    def n_arcs(self) -> int:
        return int(self.tail.size)


@dataclass(frozen=True)
class FlowSolution:
    """``flow`` (int64 per arc), proven optimal: ``gap_bound`` (float, cost units) is below one unit (module
    docstring); a backend that cannot prove it raises instead of returning."""

    flow: np.ndarray
    solver: str
    gap_bound: float


def check_solver(solver: str) -> str:
    if solver not in SOLVERS:
        raise ParameterError(f"solver = {solver!r}: must be one of {SOLVERS}")
    return solver


def exact_integers(values: np.ndarray) -> tuple[np.ndarray, Fraction]:
    """``(ints, unit)`` with ``values == ints * unit`` exactly, ``ints`` coprime integers and ``unit`` a positive
    rational (``g * 2**-e``).

    ``values`` must be finite doubles.  ``ints`` is int64 when every entry fits in 62 bits, else
    :class:`~kvcore.optima.limbs.Limbs`.  Vectorized: ``frexp`` gives a 53-bit integer mantissa and an exponent per
    value, trailing zero bits move into the exponent, the smallest exponent becomes the common scale ``2**-e``, and
    the greatest common divisor ``g`` is divided out (equal costs become 1: HiGHS' tolerances then cannot blur them,
    and the network simplex needs no rounding).  Every mantissa is then odd and some value has no shift, so ``g`` is
    the gcd of the odd mantissas (int64)."""
    values = np.asarray(values, dtype=np.float64)
    nz = values != 0
    if not nz.any():
        return np.zeros(values.size, np.int64), Fraction(1)
    sign, odd, lsb = dyadic(values[nz])
    e = int(-lsb.min())
    shift = lsb + e  # >= 0
    top = int((shift + np.frexp(odd.astype(np.float64))[1]).max())  # frexp's exponent is the bit length (< 2**53)
    # every odd mantissa is odd and some shift is 0, so the gcd of the integers is the gcd of the odd mantissas
    g = int(np.gcd.reduce(odd))
    odd //= g
    if top <= 62:
        ints = np.zeros(values.size, np.int64)
        ints[nz] = sign * (odd << shift)
        return ints, Fraction(g) / Fraction(2) ** e
    big = Limbs.scaled(sign, odd, shift, width_for(top))
    d = np.zeros((values.size, big.width), np.int64)
    d[nz] = big.d
    return Limbs(d), Fraction(g) / Fraction(2) ** e


def dyadic(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sign, odd, lsb)`` with ``values == sign * odd * 2**lsb`` exactly, ``odd`` an odd int64 below ``2**53``:
    each nonzero finite double's integer mantissa with its trailing zero bits moved into the exponent."""
    frac, ex = np.frexp(np.abs(values))
    mant = np.ldexp(frac, 53).astype(np.int64)  # exact: frac has at most 53 significant bits
    low = mant & -mant
    tz = np.round(np.log2(low.astype(np.float64))).astype(np.int64)  # low is a power of two: log2 is exact
    return np.sign(values).astype(np.int64), mant >> tz, ex.astype(np.int64) - 53 + tz


def bit_length(ints: np.ndarray) -> int:
    """Bits of the largest magnitude in an int64 or object integer array or :class:`Limbs`."""
    if isinstance(ints, Limbs):
        return ints.bit_length()
    if ints.size == 0:
        return 0
    if ints.dtype == object:
        return max(abs(int(x)) for x in (ints.max(), ints.min())).bit_length()
    return max(abs(int(ints.max())), abs(int(ints.min()))).bit_length()


def as_objects(ints: np.ndarray) -> np.ndarray:
    """The same integers as an object array of Python integers (exact arithmetic without overflow)."""
    if isinstance(ints, Limbs):
        return ints.to_objects()
    return ints if ints.dtype == object else ints.astype(object)


def solve(net: FlowNetwork, solver: str = DEFAULT_SOLVER) -> FlowSolution:
    """A minimum-cost integral flow of ``net`` with its certificate (see module docstring)."""
    check_solver(solver)
    if net.n_arcs == 0:
        flow = np.zeros(0, dtype=np.int64)
        _check_feasible(net, flow, solver)
        return FlowSolution(flow, solver, 0.0)
    if solver == "highs":
        return _solve_highs(net)
    if solver == "networkx":
        return _solve_networkx(net)
    return solve_netsimplex(net)[0]


def _net_outflow(net: FlowNetwork, flow: np.ndarray) -> np.ndarray:
    """Per node: flow out minus flow in (conservation holds when this equals ``supply``)."""
    return np.bincount(net.tail, weights=flow, minlength=net.n_nodes).astype(np.int64) - \
        np.bincount(net.head, weights=flow, minlength=net.n_nodes).astype(np.int64)


def _check_feasible(net: FlowNetwork, flow: np.ndarray, solver: str) -> None:
    """Exact integer check of bounds and conservation: a backend's answer is never trusted blindly."""
    if (flow < net.lower).any() or (flow > net.cap).any():
        raise RuntimeError(f"min-cost flow backend {solver!r} returned a flow outside the arc bounds")
    if not np.array_equal(_net_outflow(net, flow), net.supply):
        raise RuntimeError(f"min-cost flow backend {solver!r} returned a flow that violates conservation")


def duality_gap(rc: np.ndarray, flow: np.ndarray, lower: np.ndarray, cap: np.ndarray) -> int:
    """Exact weak-duality bound on ``cost(flow) - OPT`` for exact integer reduced costs ``rc`` (any dual values):
    ``sum_{rc<0} (-rc)(cap - flow) + sum_{rc>0} rc (flow - lower)`` (0 iff complementary slackness holds)."""
    neg = np.flatnonzero(rc < 0)
    pos = np.flatnonzero(rc > 0)
    slack_up = (cap[neg] - flow[neg]).astype(object)
    slack_down = (flow[pos] - lower[pos]).astype(object)
    return int(np.dot(-rc[neg].astype(object), slack_up)) + int(np.dot(rc[pos].astype(object), slack_down))


def complementary_slack(sign: np.ndarray, flow: np.ndarray, cap: np.ndarray) -> bool:
    """True when the reduced costs of signs ``sign`` certify ``flow`` (lower bounds 0): no arc with ``rc < 0`` below
    its capacity and none with ``rc > 0`` above 0 -- exactly when :func:`duality_gap` is 0."""
    return not (((sign < 0) & (flow < cap)) | ((sign > 0) & (flow > 0))).any()


@dataclass(frozen=True)
class ScannedCosts:
    """What the network simplex derives from a network's arcs, costs and scan order alone (not its bounds, supplies
    or starting flow): arcs in scan order, the exact costs in that order (int64 or limbs wide enough for any reduced
    cost), their bit length, and the first round's int64 costs.  Solving one network at several capacities
    (:func:`kvcore.optima.capacity_curve.optimum_curve`, cold) computes it once."""

    order: np.ndarray
    position: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    exact: object
    top: int
    bits: int
    width: int
    first: np.ndarray


def scanned_costs(net: FlowNetwork) -> ScannedCosts:
    order = np.arange(net.n_arcs) if net.scan_order is None else net.scan_order
    exact = net.cost[order]
    bits = cost_bits(net.n_nodes)
    top = bit_length(exact)
    # the certificate in exact limbs wide enough for any reduced cost: |pi| < n 2**top, |rc| < (2 n + 1) 2**top
    width = width_for(top + (2 * net.n_nodes + 1).bit_length())
    if isinstance(exact, Limbs) or top > bits:
        exact = Limbs.of(exact, width)
    position = np.empty(net.n_arcs, np.int64)
    position[order] = np.arange(net.n_arcs)
    first = exact.shift_round(max(0, top - bits), 1 << bits) if isinstance(exact, Limbs) else exact
    return ScannedCosts(order, position, net.tail[order], net.head[order], exact, top, bits, width, first)


def solve_netsimplex(net: FlowNetwork, tree_arc: np.ndarray | None = None, scanned: ScannedCosts | None = None
                     ) -> tuple[FlowSolution, np.ndarray]:
    """The exact network simplex from ``net.start``, and the final spanning tree (one arc per node, -1 for a node
    hung from the root).  ``tree_arc`` (same form) is the starting tree: a strongly feasible tree that holds every arc
    strictly between its bounds in ``net.start`` -- a previous solve's final tree stays one when arcs carrying flow
    at their upper bound are appended (:mod:`kvcore.optima.capacity_curve` re-solves that way), or at flow 0, their
    lower bound (:mod:`kvcore.optima.priced` prices exits in that way).  ``scanned``: :func:`scanned_costs` of a
    network with the same arcs, costs and scan order (computed here when not given)."""
    sol, tree, _ = solve_netsimplex_duals(net, tree_arc, scanned)
    return sol, tree


def solve_netsimplex_duals(net: FlowNetwork, tree_arc: np.ndarray | None = None,
                           scanned: ScannedCosts | None = None) -> tuple[FlowSolution, np.ndarray, np.ndarray]:
    """:func:`solve_netsimplex` and its certificate: the exact node potentials ``pi`` (int64 or
    :class:`~kvcore.optima.limbs.Limbs`, in units of ``net.cost_unit``, one per node and the simplex's root last;
    :func:`as_objects` makes them Python integers) with ``cost[a] + pi[tail[a]] - pi[head[a]]`` satisfying
    complementary slackness with the returned flow on every arc of ``net``."""
    sc = scanned_costs(net) if scanned is None else scanned
    order, tail, head, exact, bits, width = sc.order, sc.tail, sc.head, sc.exact, sc.bits, sc.width
    cap = (net.cap - net.lower)[order].astype(np.int64)
    flow = (net.start - net.lower)[order].astype(np.int64)
    tree = np.full(net.n_nodes, -1, np.int64) if tree_arc is None else \
        np.where(tree_arc >= 0, sc.position[np.maximum(tree_arc, 0)], -1)
    active = None if net.columns is None else net.columns[order]
    reduced = exact  # the costs of the current round: exact reduced costs w.r.t. the previous round's potentials
    k = max(0, sc.top - bits)
    gain = max(1, bits - 2 * net.n_nodes.bit_length())
    for rounds in range(_MAX_ROUNDS):
        costs = sc.first if rounds == 0 else reduced.shift_round(k, 1 << bits) if isinstance(reduced, Limbs) \
            else reduced
        if active is None:
            flow, pi, pred, preorder, _pivots = solve_integer(tail, head, costs, cap, flow, tree)
        else:
            flow, pi, pred, preorder, _pivots = solve_integer_columns(tail, head, costs, cap, flow, tree, active,
                                                                      COLUMNS_PER_TAIL)
        if isinstance(exact, Limbs):  # potentials recomputed exactly along the final tree
            pot = tree_potentials(exact, tail, head, pred, preorder, exact.width)
            sign = reduced_costs(exact, pot, tail, head, store=False)[1]
        else:  # the kernel ran on the exact costs: its int64 potentials are the certificate
            sign = np.sign(exact + pi[tail] - pi[head])
        if complementary_slack(sign, flow, cap):
            out = np.empty(net.n_arcs, np.int64)
            out[order] = flow + net.lower[order]
            _check_feasible(net, out, "netsimplex")
            final = pred[:-1]
            duals = pot if isinstance(exact, Limbs) else pi
            return FlowSolution(out, "netsimplex", 0.0), np.where(final < net.n_arcs, order[np.minimum(
                final, net.n_arcs - 1)], -1), duals
        if isinstance(exact, Limbs):
            # a near tie went the wrong way: the next round starts from the exact reduced costs, an equivalent cost
            # vector, rounded at a finer scale
            reduced = reduced_costs(exact, pot, tail, head)[0]
            k = max(0, k - gain)
        else:  # exact int64 costs and no certificate (only a broken kernel does that): go on in exact limbs
            exact = reduced = Limbs.of(exact, width)
        tree = np.where(pred[:-1] < net.n_arcs, pred[:-1], -1)
    raise RuntimeError(f"network simplex: not certified after {_MAX_ROUNDS} refinement rounds")


def _incidence(net: FlowNetwork) -> sp.csc_matrix:
    m = net.n_arcs
    rows = np.concatenate([net.tail, net.head])
    cols = np.concatenate([np.arange(m), np.arange(m)])
    vals = np.concatenate([np.ones(m), -np.ones(m)])
    return sp.csc_matrix((vals, (rows, cols)), shape=(net.n_nodes, m))


def _solve_highs(net: FlowNetwork) -> FlowSolution:
    from scipy.optimize import linprog

    top = bit_length(net.cost)
    # costs scaled by 2**-top into [-1, 1] (shifted to at most 62 bits first: an integer of 1,100+ bits has no float);
    # rounding here only perturbs what HiGHS optimizes, never the certificate below
    drop = max(0, top - 62)
    plain = isinstance(net.cost, np.ndarray) and net.cost.dtype == np.int64
    scaled = np.ldexp(net.cost.astype(np.float64) if plain and not drop
                      else np.array([float(c >> drop) for c in as_objects(net.cost).tolist()]), drop - top)
    res = linprog(scaled, A_eq=_incidence(net), b_eq=net.supply.astype(np.float64),
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
    # Exact certificate.  HiGHS solved the costs c * 2**-top (c: the network's coprime integers); scaled back by
    # 2**top its duals are Y = y * 2**top, and y, a vector of doubles, is exactly y_int * g / 2**e.  With
    # D = 2**max(0, e - top) every reduced cost c - Y_tail + Y_head times D is an integer, so is the gap times D.
    y_int, y_unit = exact_integers(res.eqlin.marginals)
    e = y_unit.denominator.bit_length() - 1  # the denominator is a power of two
    scale_c = 1 << max(0, e - top)
    y_units = as_objects(y_int) * (y_unit.numerator << max(0, top - e))
    rc = as_objects(net.cost) * scale_c - y_units[net.tail] + y_units[net.head]
    gap = duality_gap(rc, flow, net.lower, net.cap)
    if gap < scale_c:  # below one cost unit: no integral flow is cheaper
        return FlowSolution(flow, "highs", float(Fraction(gap, scale_c) * net.cost_unit))
    fallback = solve_netsimplex(net)[0]
    return FlowSolution(fallback.flow, "highs+netsimplex", fallback.gap_bound)


def _solve_networkx(net: FlowNetwork) -> FlowSolution:
    import networkx as nx

    # networkx has no lower bounds: route each lower bound through as fixed flow and shift the supplies
    lower = net.lower
    demand = _net_outflow(net, lower) - net.supply
    weights = as_objects(net.cost).tolist()
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
