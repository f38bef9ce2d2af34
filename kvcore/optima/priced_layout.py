"""The networks :mod:`kvcore.optima.priced` solves: node numbering, fixed arcs, the network on the current exits,
potentials, the Lagrangian bound's fixed part, and the result read back from a flow (module docstring of
:mod:`kvcore.optima.priced` for the two networks, ``coupled`` and ``static``)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .limbs import Limbs, join
from .mincost import FlowNetwork
from .nm_flow import by_tail_then_head


class Exits:
    """Exits in the network, in blocks of ``(head, token, step, prefix)`` in the order they entered (a previous
    flow and tree keep their arc indices when blocks are appended); ``prefix``: the exact ``P(i, t)`` as
    :class:`Limbs` in units of ``2**lsb``."""

    def __init__(self):
        self.blocks: list[tuple[int, np.ndarray, np.ndarray, Limbs]] = []

    def add(self, h: int, token: np.ndarray, step: np.ndarray, prefix: Limbs) -> None:
        if token.size:
            self.blocks.append((h, token, step, prefix))

    def of(self, h: int) -> tuple[np.ndarray, np.ndarray]:
        """Head ``h``'s exits ``(token, step)``."""
        mine = [(t, s) for g, t, s, _ in self.blocks if g == h]
        if not mine:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate([t for t, _ in mine]), np.concatenate([s for _, s in mine])

    @property
    def size(self) -> int:
        return sum(t.size for _, t, _, _ in self.blocks)

    def keep(self, mask: np.ndarray) -> None:
        """Keep the exits ``mask`` marks (one bool per exit, in block order)."""
        out, at = [], 0
        for h, t, s, p in self.blocks:
            m = mask[at:at + t.size]
            at += t.size
            if m.any():
                out.append((h, t[m], s[m], p[m]))
        self.blocks = out


class Layout:
    """Node numbering and fixed arcs of the ``coupled`` or ``static`` network (module docstring), nodes in time
    order (the simplex walks its tree along time, :mod:`kvcore.optima.nm_flow`): ``S``, then per step every line's
    node and the tokens arriving then, then ``D`` (``S`` and ``D`` for ``static`` only)."""

    def __init__(self, kind: str, tokens: list[np.ndarray], T: int, budget: int):
        self.kind, self.T, self.budget, self.H = kind, T, budget, len(tokens)
        self.lines = 1 if kind == "coupled" else self.H
        L = self.lines
        # sort keys: (time, kind, index); line node (l, t): (t, 0, l), token (h, i): (i, 1, h), S: (-1), D: (T + 1)
        item_head = np.concatenate([np.full(tok.size, h, np.int64) for h, tok in enumerate(tokens)])
        item_tok = np.concatenate(tokens).astype(np.int64)
        n_line = L * (T + 1)
        time = np.concatenate([np.tile(np.arange(T + 1), L), item_tok])
        sub = np.concatenate([np.zeros(n_line, np.int64), np.ones(item_tok.size, np.int64)])
        idx = np.concatenate([np.repeat(np.arange(L), T + 1), item_head])
        extra = 2 if kind == "static" else 0
        order = np.lexsort((idx, sub, time))
        node = np.empty(order.size, np.int64)
        node[order] = np.arange(order.size) + (1 if extra else 0)
        self.n_nodes = order.size + extra
        self.line_node = node[:n_line].reshape(L, T + 1)
        self.item_node = [node[n_line:][item_head == h] for h in range(self.H)]
        self.item_head, self.item_tok = item_head, item_tok
        cap_line = budget  # static: more than T slots on one head are never used, and B keeps the start at bounds
        tail = [self.line_node[:, :-1].ravel()]
        head = [self.line_node[:, 1:].ravel()]
        cap = [np.full(L * T, cap_line, np.int64)]
        supply = np.zeros(self.n_nodes, np.int64)
        if kind == "coupled":
            start = [np.full(T, budget, np.int64)]
            supply[self.line_node[0, 0]] += budget
            supply[self.line_node[0, T]] -= budget
        else:
            S, D = 0, self.n_nodes - 1
            # the start: all B units along head 0's line, every arc at a bound (the simplex needs no starting tree)
            split = np.zeros(L, np.int64)
            split[0] = budget
            start = [np.repeat(split, T)]
            tail += [np.full(L, S), self.line_node[:, T]]
            head += [self.line_node[:, 0], np.full(L, D)]
            cap += [np.full(2 * L, cap_line, np.int64)]
            start += [split, split]
            supply[S], supply[D] = budget, -budget
        n_fixed_before_take = sum(x.size for x in tail)
        tail.append(self.line_node[self.line_of(item_head), item_tok])
        head.append(np.concatenate(self.item_node))
        cap.append(np.ones(item_tok.size, np.int64))
        start.append(np.zeros(item_tok.size, np.int64))
        self.tail, self.head = np.concatenate(tail), np.concatenate(head)
        self.cap, self.start, self.supply = np.concatenate(cap), np.concatenate(start), supply
        self.n_fixed = self.tail.size
        self.source_arcs = slice(L * T, L * T + L) if kind == "static" else None
        assert n_fixed_before_take + item_tok.size == self.n_fixed
        # each head's token -> node index (for exits), -1 where a token has no node
        self.node_of = []
        for h, tok in enumerate(tokens):
            m = np.full(T, -1, np.int64)
            m[tok] = self.item_node[h]
            self.node_of.append(m)

    def line_of(self, h):
        return 0 if self.kind == "coupled" else h

    def network(self, exits: Exits, flow: np.ndarray | None) -> FlowNetwork:
        """The network on the current exits (fixed arcs first, then the exit blocks in order of entry); ``flow``:
        the previous solve's, the exits added since at 0."""
        none = np.zeros(0, np.int64)  # a first network may hold no exit (a head with no slot, the prices high)
        ex_t = np.concatenate([self.node_of[h][t] for h, t, _, _ in exits.blocks] + [none])
        ex_h = np.concatenate([self.line_node[self.line_of(h), s + 1] for h, _, s, _ in exits.blocks] + [none])
        width = max((p.width for *_, p in exits.blocks), default=1)
        ex_c = -Limbs(np.concatenate([p.widened(width).d for *_, p in exits.blocks] + [np.zeros((0, width), np.int64)]))
        tail = np.concatenate([self.tail, ex_t])
        head = np.concatenate([self.head, ex_h])
        m = tail.size
        start = np.zeros(m, np.int64)
        if flow is None:
            start[:self.n_fixed] = self.start
        else:
            start[:flow.size] = flow
        return FlowNetwork(self.n_nodes, tail, head, np.zeros(m, np.int64),
                           np.concatenate([self.cap, np.ones(ex_t.size, np.int64)]),
                           join([np.zeros(self.n_fixed, np.int64), ex_c]), Fraction(1), self.supply.copy(), start,
                           scan_order=by_tail_then_head(tail, head, self.n_nodes))

    def potentials(self, pi: np.ndarray, lsb: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """Every node's, the line ``(lines, T + 1)`` and per-head token potentials ``(T,)`` as doubles in mass units
        (NaN: no node); ``pi`` the exact ones in units of ``2**lsb``."""
        as_float = np.ldexp(np.array([float(p) for p in pi.tolist()]), lsb)  # each rounded once: |err| <= u |pi|
        items = []
        for h in range(self.H):
            x = np.full(self.T, np.nan)
            ok = self.node_of[h] >= 0
            x[ok] = as_float[self.node_of[h][ok]]
            items.append(x)
        return as_float, as_float[self.line_node], items

    def fixed_term(self, pi: np.ndarray) -> tuple[float, float]:
        """The Lagrangian bound's part from the supplies and the line, source and sink arcs (every fixed arc but the
        take arcs, whose reduced costs the tokens' terms include): ``-sum_v pi_v b_v + sum_a min(0, rc_a) cap_a``
        (cost 0 on each, so ``rc_a = pi_tail - pi_head``), and an allowance for its rounding: an arc whose computed
        ``rc`` is within ``4 u (|pi_tail| + |pi_head|)`` of 0 may have either sign, so it adds that times its
        capacity; the sum adds ``(n + 2) u`` times its terms' magnitudes."""
        n = self.n_fixed - self.item_tok.size
        pt, ph = pi[self.tail[:n]], pi[self.head[:n]]
        rc, err = pt - ph, 4 * 2.0 ** -53 * (np.abs(pt) + np.abs(ph))
        near = rc < err
        terms = np.minimum(rc[near], 0.0) * self.cap[:n][near]
        supply = float(-(pi * self.supply).sum())
        slack = float((self.cap[:n][near] * err[near]).sum()) + (n + 2) * 2.0 ** -53 * (
            float(np.abs(terms).sum()) + float(np.abs(pi * self.supply).sum()))
        return supply + float(terms.sum()), slack

    def retained(self, exits: Exits, flow: np.ndarray) -> int:
        """The exact retained mass of ``flow`` (units of ``2**lsb``): the prefix masses of the used exits."""
        total, at = 0, self.n_fixed
        for _, tok, _, prefix in exits.blocks:
            used = np.flatnonzero(flow[at:at + tok.size] == 1)
            at += tok.size
            total += int(sum(prefix[used].to_objects().tolist()))
        return total

    def without(self, exits: Exits, keep: np.ndarray, tree: np.ndarray, flow: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """Drop the exits ``keep`` does not mark (none in ``tree`` or carrying flow) and renumber ``tree`` and
        ``flow`` to the smaller network (fixed arcs keep their indices)."""
        exits.keep(keep)
        index = np.concatenate([np.arange(self.n_fixed), self.n_fixed + np.cumsum(keep) - 1])
        index[self.n_fixed:][~keep] = -1
        return np.where(tree >= 0, index[np.maximum(tree, 0)], -1), np.concatenate(
            [flow[:self.n_fixed], flow[self.n_fixed:][keep]])

    def read(self, exits: Exits, totals: list[int], flow: np.ndarray, pi: np.ndarray, lsb: int):
        """What ``flow`` and the exact potentials ``pi`` (units of ``2**lsb``) say, as the fields of
        :class:`kvcore.optima.priced.PricedResult`: ``(drops, slots, exact regret, per-head regrets, line
        potentials, token potentials)``."""
        unit = Fraction(2) ** lsb
        drops = np.tile(np.arange(self.T, dtype=np.int64), (self.H, 1))
        kept = [0] * self.H
        at = self.n_fixed
        for h, tok, step, prefix in exits.blocks:
            used = np.flatnonzero(flow[at:at + tok.size] == 1)
            at += tok.size
            drops[h, tok[used]] = step[used] + 1
            kept[h] += int(sum(prefix[used].to_objects().tolist()))
        regrets = [Fraction(total - k) * unit for total, k in zip(totals, kept)]
        slots = None if self.source_arcs is None else _capped(flow[self.source_arcs], self.T)
        exact = [Fraction(int(p)) * unit for p in pi.tolist()]
        lines = [[exact[v] for v in row] for row in self.line_node.tolist()]
        items = [[exact[v] if v >= 0 else None for v in self.node_of[h].tolist()] for h in range(self.H)]
        return drops, slots, sum(regrets, Fraction(0)), [float(r) for r in regrets], lines, items


def _capped(units: np.ndarray, T: int) -> list[int]:
    """The static flow's units per head as slots of at most ``T`` each, the same total: a head holds at most its
    ``T`` tokens, so units beyond ``T`` change nothing, and moved to heads below ``T`` they keep the schedule
    feasible and the regret the same (more slots never lose; the total is at most ``H T``, checked on input)."""
    k = np.minimum(units, T)
    excess = int(units.sum() - k.sum())
    for h in range(k.size):
        give = min(excess, T - int(k[h]))
        k[h] += give
        excess -= give
    return k.tolist()


__all__ = ["Layout"]
