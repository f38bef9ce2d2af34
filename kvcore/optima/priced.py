"""The coupled and static optima of many heads on complete rows by pricing: a network that never holds every exit.

Problem (SPEC section 3, NM with several heads sharing memory; paper §8, §11).  ``H`` traces of ``T`` steps, each
given as complete rows ``a_h[t, i]`` (every ``i <= t``).  The NM network of :mod:`kvcore.optima.nm_flow` has one
exit arc per positive entry -- token ``i`` of head ``h`` resident from ``i`` through ``t``, cost
``-P_h(i, t) = -(a_h[i, i] + ... + a_h[t, i])`` -- so complete rows give ``H T (T + 1) / 2`` exits (179 M at 90
heads x 2,000 steps: beyond memory).  Two networks, both min-cost flows with an integral optimum (node-arc incidence
matrix, Ahuja, Magnanti & Orlin, *Network Flows*, 1993, ch. 9):

* ``coupled``: every head's token nodes hang off one line of ``B`` units (:mod:`kvcore.optima.coupled`):
  ``sum_h |R_{h,t}| <= B`` at every step;
* ``static``: one line per head, fed from a source ``S`` holding ``B`` units by an arc ``S -> L^h_0`` and drained
  by ``L^h_T -> D``; the ``k_h`` units through head ``h`` bound its resident set at every step, and the flow chooses
  the split ``sum_h k_h = B`` itself.  Its optimum is the exact static allocation's ``min sum_h OPT_h(k_h)`` with no
  convexity assumed (:mod:`kvcore.optima.allocation` reaches it through the curves).  With the rows held the
  static optimum is solved head by head instead: one-head ``coupled`` solves at each head's share, the split
  certified by the exchange condition on their exact regrets (:mod:`kvcore.optima.static_split`; needle-2000-d50,
  K = 128: 82 s against the one network's 183 s, the same optimum).

Pricing (column generation; Gilmore & Gomory, *Operations Research* 1961; Ahuja et al. §11.6's candidate lists).
The first network is a restriction of the complete one (some exits, each with its *complete* prefix cost; not a
truncation of the rows).  By default (``start="dual"``) the rows are held in memory and it holds the exits within
``NEAR / T`` of each token's best interval at slot prices near the Lagrangian dual's optimum, found from the rows
alone before any flow (:mod:`kvcore.optima.dual_start`); with ``start="top"`` (or rows too large to hold,
``HOLD_BYTES``) the exits of each row's ``top`` heaviest entries.  Measured on needle-2000-d50 (SmolLM2, 90 heads x
1,996 steps, K = 128, CPU s): the coupled optimum certified in 3 rounds and 44 s from the dual start, where from the
top 8 entries two rounds took 188 s with a lower bound 4,937 below the optimum (issue 52).  Each
network is solved exactly with its potentials (:func:`kvcore.optima.mincost.solve_netsimplex_duals`).  Then every
omitted exit is priced from the rows, head by head: ``rc_h(i, t) = -P_h(i, t) + pi(tau_{h,i}) - pi(L_{t+1})``.
Exits that price out (``rc < 0``) enter, at most ``per_item`` per token and round, the most negative first, at flow
0 (the previous tree stays strongly feasible and the simplex continues from it), and the network is solved again;
it stops when none does.  An omitted arc carries no flow, so ``rc >= 0`` on every omitted exit is complementary
slackness on the complete network: the flow is the complete network's optimum (Ahuja et al. Thm. 9.4).  With
``drop``, exits that cannot help (no flow, out of the tree, reduced cost clearly positive) leave the network again
after each round that strictly improved the solution: they are priced again with the omitted ones, so the
certificate is the same, and as the networks at the drops have strictly better optima none repeats and the rounds
end (on needle-400-d10 the network stayed near 71 k exits instead of growing to 1.65 M).  The two passes over
each head's rows are compiled (:mod:`kvcore.optima.pricing`).

Exactness.  Every weight is a double, so every prefix mass is an integer multiple of ``2**lsb`` (``lsb`` the
least significant bit of any entry of any head); the network's costs are those integers in int64 limbs
(:mod:`kvcore.optima.limbs`), summed exactly, and the simplex certifies its flow on them in exact arithmetic.  The
pricing runs in doubles on the prefix sums ``numpy.cumsum`` forms: for non-negative terms each is within
``(T - 1) u P`` of the true one (``u = 2**-53``; Higham, *Accuracy and Stability of Numerical Algorithms*, 2002,
§4.2), the potentials are rounded once and the two subtractions once each, so the computed reduced cost is within
``tol = (T + 4) 2**-52 (P + |pi(tau)| + |pi(L)|)`` of the exact one.  An exit enters when its computed reduced cost
is below ``+tol`` (so every exit that might price out is in the network, where the exact certificate covers it); the
result is certified when every omitted exit's computed reduced cost is at least ``tol``: its exact reduced cost is
then ``>= 0``.  :func:`kvcore.optima.lagrangian.verify` re-checks a result on small instances with every reduced
cost in exact rationals.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable

import numpy as np

from ..errors import ParameterError
from .dual_start import HOLD_BYTES, HeldRows, dual_prices, near_exits
from .lagrangian import maximise_dual, static_bound
from .limbs import Limbs, width_for
from .mincost import as_objects, dyadic, solve_netsimplex_duals
from .pricing import exact_prefix, price_head
from .priced_layout import Exits, Layout
from .static_split import exchange_split

KINDS = ("coupled", "static")
STARTS = ("dual", "top")
NEAR = 0.4  # the first network holds the exits within NEAR / T of their token's best at the start prices
TOP = 32  # exits per row the network starts from (the rows' heaviest entries)
PER_ITEM = 8  # exits priced in per token and round, the most negative first
MAX_ROUNDS = 1000  # a safety stop: each round adds at least one exit of finitely many
# dual evaluations after an uncertified stop (static: per head and capacity, on the head's rows held); a coupled one
# recomputes every head's rows (about 4 s at 2,000 tokens x 90 heads), and on needle-400-d10 (K = 128) and -d50
# (K = 64) from the top-32 solve 20 of them reached what 50 did
DUAL_EVALUATIONS = 20


@dataclass(frozen=True)
class Certificate:
    """What was checked: ``rounds`` solves; the network started from ``initial_exits`` exits of the
    ``complete_exits`` (every positive entry), ``added_exits`` were priced in and ``dropped_exits`` left again
    (out of the tree, no flow, reduced cost clearly positive: :func:`_droppable`); in the last round every one of the
    ``omitted_exits`` others was priced and the least ``rc - tol`` among them is ``margin`` (``>= 0``: each exact
    reduced cost is ``>= 0``, module docstring); ``certified`` when that holds and the simplex's exact
    complementary slackness held on the network.  ``lower_bound``: the best Lagrangian lower bound on the
    complete-row optimum any round's potentials gave (:func:`price_head`; equal to the optimum up to rounding once
    certified), and when stopped uncertified the climbed Lagrangian bound if higher (``dual_evaluations`` dual
    evaluations: :func:`kvcore.optima.lagrangian.maximise_dual` for ``coupled``,
    :func:`kvcore.optima.lagrangian.static_bound` for ``static``; 0: not climbed).  ``start``: what chose the first
    network's exits, in words (``"dual prices: ..."`` or ``"top M"``, :func:`priced_optimum`)."""

    rounds: int
    initial_exits: int
    added_exits: int
    dropped_exits: int
    complete_exits: int
    omitted_exits: int
    margin: float
    certified: bool
    lower_bound: float
    dual_evaluations: int = 0
    start: str = ""
    exchange: dict | None = None

    def as_dict(self) -> dict:
        return {"method": "pricing: every omitted exit's reduced cost from the flow's exact potentials, in doubles, "
                          "accepted at >= tol = (T + 4) 2^-52 (P + |pi_item| + |pi_line|)",
                "rounds": self.rounds, "initial_exits": self.initial_exits, "added_exits": self.added_exits,
                "dropped_exits": self.dropped_exits,
                "complete_exits": self.complete_exits, "omitted_exits": self.omitted_exits,
                "margin": self.margin, "certified": self.certified, "lower_bound": self.lower_bound,
                "dual_evaluations": self.dual_evaluations, "start": self.start,
                **({} if self.exchange is None else {"exchange": self.exchange})}


@dataclass(frozen=True)
class PricedResult:
    """The optimum of :func:`priced_optimum`: ``drops[h, i]`` the step head ``h`` drops token ``i`` (one after its
    last retained entry, on arrival when none is; ``T``: kept to the end), ``slots`` the static split (``None`` for
    ``coupled``), the regret exactly (``exact_regret``, a Fraction of attention mass) and per head correctly rounded,
    the exact potentials of the line nodes ``line_potentials`` ``(lines, T + 1)`` and the token nodes
    ``item_potentials`` ``(H, T)`` (``None`` where a token has no positive entry), in mass units (Fractions), and
    the :class:`Certificate`."""

    kind: str
    budget: int
    drops: np.ndarray
    slots: list[int] | None
    exact_regret: Fraction
    per_head: list[float]
    line_potentials: list[list[Fraction]]
    item_potentials: list[list[Fraction | None]]
    certificate: Certificate

    @property
    def regret(self) -> float:
        return float(self.exact_regret)


def _limbs_float(x: Limbs) -> np.ndarray:
    """The integers of ``x`` as doubles (each limb exact in a double; the sum of the few scaled limbs rounds within a
    few ulps)."""
    return sum(x.d[:, j].astype(np.float64) * 2.0 ** (31 * j) for j in range(x.width))


def _droppable(layout, exits: Exits, flow: np.ndarray, tree: np.ndarray, nodes: np.ndarray, lsb: int
               ) -> np.ndarray:
    """Per exit in the network (block order): carries no flow, is not a tree arc, and its reduced cost is clearly
    positive (above ``2**-40`` of its terms' size) -- a column that may leave the network: the flow and the tree
    stay as they are, and it is priced again with the omitted ones, so the certificate is unchanged."""
    in_tree = np.zeros(flow.size, dtype=bool)
    in_tree[tree[tree >= 0]] = True
    parts = [np.zeros(0, dtype=bool)]
    for h, tok, step, prefix in exits.blocks:
        P = np.ldexp(_limbs_float(prefix), lsb)
        p_item = nodes[layout.node_of[h][tok]]
        p_line = nodes[layout.line_node[layout.line_of(h), step + 1]]
        rc = -P + p_item - p_line
        parts.append(rc > 2.0 ** -40 * (P + np.abs(p_item) + np.abs(p_line)))
    n = layout.n_fixed
    return np.concatenate(parts) & (flow[n:] == 0) & ~in_tree[n:]


def _positive(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(token, step, weight)`` of the positive entries at or left of the diagonal, by token, then step."""
    tok, step = np.nonzero(np.triu(a.T) > 0)
    return tok, step, a[step, tok]


def _initial_exits(a: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """The exits of each row's ``top`` heaviest positive entries and each token's last positive entry (kept to the
    end), by token, then step.  Without the last ones the heaviest entries of each row leave few tokens a late
    exit, so the first network's line need not bind: on needle-2000-d50 at K = 128 from 8 entries per row its
    potentials were flat and its Lagrangian bound 0, with them 5,886; on needle-400-d10 from 8 per row the
    certificate took 21 rounds instead of 23 at the same CPU time (measured, issue 52)."""
    T = a.shape[0]
    low = np.tril(a)
    positive = low > 0
    if top < T:
        keep = np.zeros((T, T), dtype=bool)
        part = np.argpartition(-low, top - 1, axis=1)[:, :top]
        keep[np.arange(T)[:, None], part] = True
        keep &= positive
        last = T - 1 - np.argmax(positive[::-1], axis=0)
        has = positive.any(axis=0)
        keep[last[has], np.flatnonzero(has)] = True
    else:
        keep = positive
    tok, step = np.nonzero(keep.T)
    return tok.astype(np.int64), step.astype(np.int64)


def priced_optimum(rows: Callable[[int], np.ndarray], n_heads: int, T: int, budget: int, kind: str = "coupled",
                   top: int = TOP, per_item: int = PER_ITEM, max_rounds: int = MAX_ROUNDS,
                   skip: Callable | None = None, say: Callable[[str], None] | None = None, drop: bool = True,
                   dual_evaluations: int = DUAL_EVALUATIONS, start: str = "dual",
                   prices: np.ndarray | None = None) -> PricedResult:
    """The exact ``kind`` optimum (module docstring) of ``n_heads`` heads with ``budget`` slots in all.

    ``rows(h)`` returns head ``h``'s complete rows as a dense ``(T, T)`` float64 array (``a[t, i]``, ``i <= t``;
    entries above the diagonal are ignored); with ``start="dual"`` it is called once per head and the rows are held
    (``H T (T + 1) / 2`` doubles), otherwise once per head and round, so they need not be held.
    ``max_rounds``: solves at most; a result stopped before no exit prices out is not certified, and its
    ``certificate.lower_bound`` (the best of the rounds' Lagrangian bounds, :func:`price_head`) with its exact regret
    (an upper bound: a feasible schedule's complete-row regret) brackets the optimum -- ``max_rounds=1`` is a solve
    on the ``top`` heaviest entries per row with the gap it leaves.  A result stopped so also climbs the
    Lagrangian dual from its last prices -- ``coupled``: at most ``dual_evaluations`` passes over the rows
    (:func:`kvcore.optima.lagrangian.maximise_dual`, the regret as its target); ``static``: each head's own dual,
    that many passes at each of several capacities around its share (:func:`kvcore.optima.lagrangian.static_bound`);
    ``<= 1``: not climbed -- and keeps the higher bound.  ``skip``: see :func:`price_head` (tests only).
    ``say``: receives one line of progress per round.  ``drop``: exits that cannot help leave the network between
    rounds (:func:`_droppable`; the same optimum, a smaller network).  ``start``: ``"dual"`` (default) or ``"top"``,
    what chooses the first network's exits (module docstring); the optimum and its certificate do not depend on it,
    only the rounds do.  ``prices`` ``(lines, T)``: slot prices to choose the first network's exits from instead of
    the dual's (``start="dual"``, ``coupled``).  ``static`` with the rows held is solved head by head
    (:mod:`kvcore.optima.static_split`; ``max_rounds`` then bounds each one-head solve)."""
    n_heads, T, budget = int(n_heads), int(T), int(budget)
    if kind not in KINDS:
        raise ParameterError(f"kind = {kind!r}: must be one of {KINDS}")
    if start not in STARTS:
        raise ParameterError(f"start = {start!r}: must be one of {STARTS}")
    if n_heads < 1 or T < 1:
        raise ParameterError(f"{n_heads} heads of {T} steps: need at least one of each")
    if budget < 0 or top < 1 or per_item < 1:  # no slots at all: the static split may give a head none
        raise ParameterError(f"budget {budget}, top {top}, per_item {per_item}: need budget >= 0 and the others >= 1")
    if kind == "static" and budget > n_heads * T:
        raise ParameterError(f"budget {budget} exceeds {n_heads} heads x {T} steps (a static split holds at most T "
                             "per head)")
    held = HeldRows(n_heads, T) if start == "dual" and HeldRows.size(n_heads, T) <= HOLD_BYTES else None
    info, initial = _first_pass(rows, n_heads, T, held, top)
    options = dict(per_item=per_item, max_rounds=max_rounds, skip=skip, say=say, drop=drop)
    if held is not None and kind == "static":
        return _static(info, budget, options, dual_evaluations)
    if held is None:
        started = f"top {top}"
    else:
        started, initial = _dual_start(held, budget, prices)
    res, line_pot = _solve(info, kind, budget, initial, started, **options)
    return res if res.certificate.certified else _climbed(res, info.read, line_pot, dual_evaluations)


@dataclass
class _Rows:
    """What the first pass over the rows learnt: ``read(h)`` head ``h``'s checked dense rows, each head's tokens
    with a positive entry and count of positive entries, the common unit ``2**lsb``, the rows held (``None``: read
    from the caller's function each time) and each head's exact total mass in that unit (filled by the first
    solve: a one-head solve of the static split reuses it)."""

    read: Callable[[int], np.ndarray]
    T: int
    tokens: list[np.ndarray]
    positive: list[int]
    lsb: int
    held: HeldRows | None
    totals: list[int]


def _first_pass(rows: Callable, n_heads: int, T: int, held: HeldRows | None, top: int
                ) -> tuple[_Rows, list[tuple[np.ndarray, np.ndarray]]]:
    """Pass 1: the rows checked (and held, or each row's ``top`` heaviest exits noted for the first network)."""
    tokens, initial, lsb, positive = [], [], None, []
    for h in range(n_heads):
        a = one = _checked(rows(h), T, h)
        tok, step, w = _positive(a)
        positive.append(int(tok.size))
        if w.size:
            low = int(dyadic(w)[2].min())
            lsb = low if lsb is None else min(lsb, low)
        tokens.append(np.unique(tok))
        if held is None:
            initial.append(_initial_exits(a, top))
        else:
            held.hold(h, a)
    if held is None:
        def read(h: int) -> np.ndarray:  # made again on every read, so checked again
            return _checked(rows(h), T, h)
    else:  # the rows are checked and held: every later pass reads them from memory (one head: as they are)
        read = (lambda h: one) if n_heads == 1 else held.dense
    return _Rows(read, T, tokens, positive, 0 if lsb is None else lsb, held, []), initial


def _solve(info: _Rows, kind: str, budget: int, initial: list, started: str, per_item: int, max_rounds: int,
           skip, say, drop: bool) -> tuple[PricedResult, np.ndarray]:
    """The pricing rounds (module docstring) from the exits ``initial`` (per head ``(token, step)``); the result and
    the last line potentials as doubles."""
    n_heads, T, lsb, read, tokens = len(info.tokens), info.T, info.lsb, info.read, info.tokens
    width = width_for((T + 1).bit_length() + 1 - lsb) + 1  # no prefix mass exceeds T; a limb for the kernel's carry
    exits, totals = Exits(), info.totals
    for h in range(n_heads):  # pass 2: their exact prefix masses and each head's exact total (every column to T - 1)
        a = read(h)
        exits.add(h, *initial[h], exact_prefix(a, lsb, width, *initial[h]))
        if len(totals) == h:
            full = exact_prefix(a, lsb, width, tokens[h], np.full(tokens[h].size, T - 1, np.int64))
            totals.append(int(sum(full.to_objects().tolist())))
    n_initial = exits.size
    layout = Layout(kind, tokens, T, budget)
    rounds, tree, flow, bounds, n_added, n_dropped, best = 0, None, None, [], 0, 0, None
    unit_total = float(sum(Fraction(t) for t in totals) * Fraction(2) ** lsb)
    while True:
        rounds += 1
        sol, tree, duals = solve_netsimplex_duals(layout.network(exits, flow), tree)
        flow, pi = sol.flow, as_objects(duals)[:layout.n_nodes]
        nodes, line_pot, item_pot = layout.potentials(pi, lsb)
        retained = layout.retained(exits, flow)
        if drop and (best is None or retained > best):
            # columns leave only after a strict improvement: the networks at the drops have strictly better optima,
            # so none repeats and the rounds end (each adds an exit)
            best = retained
            gone = _droppable(layout, exits, flow, tree, nodes, lsb)
            if gone.any():
                tree, flow = layout.without(exits, ~gone, tree, flow)
                n_dropped += int(gone.sum())
        omitted, margin, added = 0, float("inf"), []
        fixed, slack = layout.fixed_term(nodes)
        bound = unit_total + fixed
        for h in range(n_heads):
            a = read(h)
            got = price_head(a, exits.of(h), line_pot[layout.line_of(h)], item_pot[h], per_item, skip)
            omitted, margin = omitted + got.omitted, min(margin, got.margin)
            bound, slack = bound + got.bound_term, slack + got.bound_slack
            if got.token.size:
                added.append((h, got.token, got.step, exact_prefix(a, lsb, width, got.token, got.step)))
        bounds.append(bound - slack - (T + 4) * 2.0 ** -52 * unit_total)
        if say is not None:
            say(f"pricing round {rounds}: {exits.size:,} exits in the network ({n_dropped:,} dropped so far), "
                f"{sum(b[1].size for b in added):,} price in; lower bound {bounds[-1]:.6f}")
        if not added or rounds == max_rounds:
            break
        for block in added:
            exits.add(*block)
            n_added += block[1].size
    certified = not added and margin >= 0
    cert = Certificate(rounds, n_initial, n_added, n_dropped, sum(info.positive), omitted, margin, certified,
                       max(bounds), start=started)
    res = PricedResult(kind, budget, *layout.read(exits, totals, flow, pi, lsb), cert)
    return res, line_pot


def _climbed(res: PricedResult, read: Callable, line_pot, dual_evaluations: int) -> PricedResult:
    """An uncertified result with the climbed Lagrangian bound when higher (:func:`priced_optimum`)."""
    if dual_evaluations <= 1:
        return res
    cert = res.certificate
    if res.kind == "coupled":  # climb the dual from the last prices, the regret as the target: a tighter bound
        dual = maximise_dual(read, len(res.per_head), line_pot, res.budget, "coupled", res.regret, dual_evaluations)
        lower, climbed = dual.bound, dual.evaluations
    else:  # the static dual climbs badly: per head, at capacities around its share (static_bound)
        lower, climbed = static_bound(read, line_pot, res.budget, res.slots, res.per_head, dual_evaluations)
    return replace(res, certificate=replace(cert, lower_bound=max(cert.lower_bound, lower),
                                            dual_evaluations=climbed))


def _static(info: _Rows, budget: int, options: dict, dual_evaluations: int) -> PricedResult:
    """The ``static`` optimum head by head (:func:`kvcore.optima.static_split.exchange_split`): each one-head
    solve the ``coupled`` rounds of :func:`_solve` on the head's rows, reusing what the first pass learnt of them;
    the certificate sums the solves' rounds and exits (``margin``: the least of them) and records the exchange
    condition.  Stopped uncertified (a one-head solve reached ``max_rounds``), its lower bound is only what the
    climbed per-head duals give (:func:`kvcore.optima.lagrangian.static_bound`; 0 when not climbed): the one-head
    bounds at one split bound that split, not every split."""
    held, T = info.held, info.T
    one = [_Rows(info.read, T, [tok], [n], info.lsb, held.head(h), [])
           for h, (tok, n) in enumerate(zip(info.tokens, info.positive))]

    say, quiet = options["say"], dict(options, say=None)  # the split reports its steps, not each solve's rounds

    def solve(h: int, k: int, prices: np.ndarray) -> PricedResult:
        a = held.dense(h)
        initial = near_exits(one[h].held, prices[None, :], np.zeros(1, np.int64), NEAR / T)
        return _solve(replace(one[h], read=lambda _: a), "coupled", k, initial, "given prices", **quiet)[0]

    got = exchange_split(held, budget, solve, say)
    certs = [r.certificate for r in got.solved]
    regret = sum((r.exact_regret for r in got.results), Fraction(0))
    exchange = {"moves": got.moves, "exact_moves": got.exact_moves, "one_head_solves": len(got.solved),
                "largest_gain": None if got.gain is None else float(got.gain),
                "least_loss": None if got.loss is None else float(got.loss)}
    cert = Certificate(sum(c.rounds for c in certs), sum(c.initial_exits for c in certs),
                       sum(c.added_exits for c in certs), sum(c.dropped_exits for c in certs), sum(info.positive),
                       sum(r.certificate.omitted_exits for r in got.results), min(c.margin for c in certs),
                       got.certified, float(regret) if got.certified else 0.0, start=(
                           f"dual prices: {got.evaluations} evaluations of the Lagrangian dual (coupled, then per "
                           "head); the split by exchange"), exchange=exchange)
    res = PricedResult("static", budget, np.stack([r.drops[0] for r in got.results]), [int(x) for x in got.slots],
                       regret, [r.per_head[0] for r in got.results],
                       [r.line_potentials[0] for r in got.results], [r.item_potentials[0] for r in got.results], cert)
    if got.certified:
        return res
    line_pot = np.array([[float(x) for x in line] for line in res.line_potentials])
    return _climbed(res, held.dense, line_pot, dual_evaluations)


def _dual_start(held: HeldRows, budget: int, prices: np.ndarray | None = None
                ) -> tuple[str, list[tuple[np.ndarray, np.ndarray]]]:
    """The ``coupled`` network's first exits, near each token's best exit at slot prices near the dual's optimum
    (:mod:`kvcore.optima.dual_start`) or at the given ``prices`` ``(1, T)``, and what was done, in words."""
    H = held.packed.shape[0]
    if prices is None:
        lam, used = dual_prices(held, np.array([float(budget)]), np.zeros(H, np.int64))
        started = f"dual prices: {used} evaluations of the Lagrangian dual"
    else:
        lam, started = np.asarray(prices, dtype=np.float64), "given prices"
    return started, near_exits(held, lam, np.zeros(H, np.int64), NEAR / held.T)


def _checked(a, T: int, h: int) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.shape != (T, T):
        raise ParameterError(f"head {h}: rows of shape {a.shape}, expected ({T}, {T})")
    low = np.tril(a)
    if not np.isfinite(low).all() or (low < 0).any():
        t, i = (int(x) for x in np.argwhere(~np.isfinite(low) | (low < 0))[0])
        raise ParameterError(f"head {h}: step {t}: the weight of token {i} is negative or not finite: {a[t, i]}")
    return a


__all__ = ["Certificate", "KINDS", "PricedResult", "priced_optimum"]
