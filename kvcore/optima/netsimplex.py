"""Primal network simplex on integer costs, compiled with numba: the exact default backend of the flow optima.

Problem: arcs ``a = tail[a] -> head[a]`` with integer capacity ``cap[a] >= 0`` (lower bounds already shifted to 0)
and integer cost ``cost[a]``; a feasible starting flow ``flow`` is given (the optima always have one: every slot
idle on the line).  The kernel pivots it to a minimum-cost flow and leaves the proof of optimality behind: integer
node potentials ``pi`` with reduced costs ``rc[a] = cost[a] + pi[tail[a]] - pi[head[a]]`` that satisfy
complementary slackness (``rc >= 0`` where ``flow = 0``, ``rc <= 0`` where ``flow = cap``, ``rc = 0`` in between),
which is the LP-duality certificate that no feasible flow is cheaper (Ahuja, Magnanti & Orlin, *Network Flows*,
Prentice Hall 1993, Thm. 9.4).  All arithmetic is on int64, so there is no tolerance anywhere; the caller keeps
``|cost| <= 2**cost_bits(n)`` so that no potential or reduced cost can overflow.

The method (Dantzig's primal network simplex as presented by Ahuja, Magnanti & Orlin, ch. 11):

* basis: a spanning tree of the nodes plus an artificial root ``n``; node ``v`` without a real tree arc hangs from
  the root by an artificial arc ``v -> root`` of cost 0 that carries no flow.  The starting tree is ``tree_arc``
  (one real arc per node or -1); it must contain every arc whose flow is strictly between its bounds.  Artificial
  arcs are never priced, and a cycle through the root always meets one of them with zero residual capacity, so they
  never carry flow;
* strongly feasible trees and Cunningham's leaving-arc rule (the last blocking arc met when the cycle is walked in
  the direction of the flow change from its apex; Cunningham, Math. Programming 1976) rule out cycling through
  degenerate pivots;
* block search pricing (the default rule of the LEMON library; Kovacs, Optimization Methods & Software 2015): arcs
  are scanned cyclically in blocks of ``block`` arcs and the most negative ``state * rc`` of the first block that
  has one enters;
* tree storage: parent, tree arc and its orientation, preorder ``thread`` (doubly linked), subtree ``size`` and the
  last node of each subtree in preorder.  The apex of the cycle is found by climbing from the smaller subtree, and
  the same climb finds the leaving arc; the moving subtree is re-rooted by splicing the preorder segments along its
  stem, so only the stem and the two paths to the apex are touched, and the potentials are shifted on whichever side
  of the cut is smaller (their common offset is re-zeroed if it drifts past ``2**60``).

Measured on the NM optimum at T = 20,000 / h = 1,024 (module :mod:`kvcore.optima.mincost` has the comparison with
HiGHS): 1.1 M pivots (96 % degenerate), each scanning ~110 arcs, climbing ~400 tree nodes and shifting ~200
potentials, ~5 us per pivot.  Without numba the same function runs as plain Python, only for small networks (the
tests check both).
"""

from __future__ import annotations

import numpy as np

from ..kernels import Kernel

TREE, AT_LOWER, AT_UPPER = 0, 1, -1
OK, BAD_TREE, NOT_STRONGLY_FEASIBLE, FREE_ARC_OUTSIDE_TREE, ITERATION_LIMIT = 0, 1, 2, 3, 4
STATUS_TEXT = {BAD_TREE: "the starting tree is not a spanning tree",
               NOT_STRONGLY_FEASIBLE: "the starting tree is not strongly feasible",
               FREE_ARC_OUTSIDE_TREE: "an arc strictly between its bounds is outside the starting tree",
               ITERATION_LIMIT: "pivot limit reached"}


def cost_bits(n_nodes: int) -> int:
    """Largest ``b`` such that costs with ``|cost| <= 2**b`` keep every potential (a path sum of at most ``n`` costs)
    and every reduced cost below ``2**61`` in magnitude: ``b = 60 - bitlen(2 n + 1)``."""
    return 60 - (2 * n_nodes + 1).bit_length()


def _network_simplex(tail, head, cost, cap, flow, tree_arc, block, max_pivots, pi, pred, order):
    m = tail.size
    n = tree_arc.size
    N = n + 1
    root = n
    state = np.empty(m, np.int8)
    for a in range(m):
        state[a] = AT_LOWER if flow[a] == 0 else AT_UPPER
    parent = np.empty(N, np.int64)
    up = np.zeros(N, np.int8)  # 1: the tree arc points from the node to its parent
    thread = np.empty(N, np.int64)
    rev = np.empty(N, np.int64)
    size = np.ones(N, np.int64)
    last = np.empty(N, np.int64)
    parent[root] = -1
    pred[root] = -1
    for v in range(n):
        a = tree_arc[v]
        if a < 0:
            parent[v] = root
            pred[v] = m + v  # artificial arc v -> root
            up[v] = 1
            continue
        state[a] = TREE
        pred[v] = a
        if tail[a] == v:
            parent[v] = head[a]
            up[v] = 1
            if flow[a] >= cap[a]:
                return NOT_STRONGLY_FEASIBLE, 0
        else:
            parent[v] = tail[a]
            up[v] = -1
            if flow[a] <= 0:
                return NOT_STRONGLY_FEASIBLE, 0
    for a in range(m):
        if state[a] != TREE and 0 < flow[a] < cap[a]:
            return FREE_ARC_OUTSIDE_TREE, 0
    # preorder by an explicit stack over children lists
    start = np.zeros(N + 1, np.int64)
    for v in range(n):
        start[parent[v] + 1] += 1
    for v in range(N):
        start[v + 1] += start[v]
    fill = start[:N].copy()
    child = np.empty(max(n, 1), np.int64)
    for v in range(n):
        p = parent[v]
        child[fill[p]] = v
        fill[p] += 1
    stack = np.empty(N, np.int64)
    stack[0] = root
    depth_top = 1
    k = 0
    while depth_top > 0:
        depth_top -= 1
        v = stack[depth_top]
        order[k] = v
        k += 1
        for q in range(start[v], start[v + 1]):
            stack[depth_top] = child[q]
            depth_top += 1
    if k != N:
        return BAD_TREE, 0
    pi[root] = 0
    for i in range(N):
        v = order[i]
        w = order[i + 1] if i + 1 < N else root
        thread[v] = w
        rev[w] = v
        if v != root:
            a = pred[v]
            if a >= m:
                pi[v] = pi[root]
            elif up[v] == 1:
                pi[v] = pi[parent[v]] - cost[a]
            else:
                pi[v] = pi[parent[v]] + cost[a]
    for i in range(N - 1, 0, -1):
        v = order[i]
        size[parent[v]] += size[v]
    for i in range(N):
        v = order[i]
        last[v] = order[i + size[v] - 1]

    stem = np.empty(N, np.int64)
    stem_last = np.empty(N, np.int64)
    stem_rev = np.empty(N, np.int64)
    stem_size = np.empty(N, np.int64)
    stem_after = np.empty(N, np.int64)
    drift_limit = np.int64(1) << 60
    nxt = 0
    pivots = 0
    while True:
        # -- pricing: block search
        best = -1
        best_val = np.int64(0)
        in_block = 0
        a = nxt
        for _ in range(m):
            s = state[a]
            if s != TREE:
                val = s * (cost[a] + pi[tail[a]] - pi[head[a]])
                if val < best_val:
                    best_val = val
                    best = a
            in_block += 1
            a += 1
            if a == m:
                a = 0
            if in_block == block:
                if best >= 0:
                    break
                in_block = 0
        if best < 0:
            break
        if pivots == max_pivots:
            return ITERATION_LIMIT, pivots
        pivots += 1
        nxt = a
        ein = best
        if state[ein] == AT_LOWER:  # flow will rise on ein: it runs first -> second
            first = tail[ein]
            second = head[ein]
        else:
            first = head[ein]
            second = tail[ein]
        # -- apex of the cycle and leaving arc in one climb.  Flow goes down from the apex to first and up from
        # second to the apex.  Cunningham's rule (the last blocking arc from the apex in the flow's direction): on
        # the second side the highest arc of least residual capacity, else the entering arc if it blocks as much as
        # the first side, else the first side's lowest arc of least residual capacity.
        d1 = drift_limit
        u1 = -1
        d2 = drift_limit
        u2 = -1
        u = first
        v = second
        while u != v:
            if size[u] < size[v]:
                e = pred[u]
                if e >= m:
                    d = np.int64(0)
                elif up[u] == 1:
                    d = flow[e]
                else:
                    d = cap[e] - flow[e]
                if d < d1:
                    d1 = d
                    u1 = u
                u = parent[u]
            else:
                e = pred[v]
                if e >= m:
                    d = drift_limit  # an artificial arc never blocks flow towards the root
                elif up[v] == 1:
                    d = cap[e] - flow[e]
                else:
                    d = flow[e]
                if d <= d2:
                    d2 = d
                    u2 = v
                v = parent[v]
        join = u
        delta = cap[ein]
        u_out = -1
        side = 0
        if d1 < delta:
            delta = d1
            u_out = u1
            side = 1
        if d2 <= delta and u2 >= 0:
            delta = d2
            u_out = u2
            side = 2
        if delta > 0:
            flow[ein] += delta if state[ein] == AT_LOWER else -delta
            u = first
            while u != join:
                flow[pred[u]] -= up[u] * delta
                u = parent[u]
            u = second
            while u != join:
                flow[pred[u]] += up[u] * delta
                u = parent[u]
        if side == 0:  # ein itself blocks: it moves to its other bound, the tree stays
            state[ein] = -state[ein]
            continue
        e_out = pred[u_out]
        if e_out < m:
            state[e_out] = AT_LOWER if flow[e_out] == 0 else AT_UPPER
        rc = cost[ein] + pi[tail[ein]] - pi[head[ein]]
        state[ein] = TREE
        if side == 1:
            u_in = first
            v_in = second
        else:
            u_in = second
            v_in = first
        sigma = -rc if u_in == tail[ein] else rc  # shift of the moving subtree's potentials that zeroes rc(ein)
        # -- re-root the subtree S of u_out at u_in and hang it below v_in
        p_out = parent[u_out]
        moved = size[u_out]
        old_last = last[u_out]
        before_out = rev[u_out]
        r = 0
        s = u_in
        while True:  # stem s_0 = u_in, ..., s_r = u_out, with the values the splice needs
            stem[r] = s
            stem_last[r] = last[s]
            stem_rev[r] = rev[s]
            stem_size[r] = size[s]
            stem_after[r] = thread[last[s]]
            if s == u_out:
                break
            s = parent[s]
            r += 1
        after = thread[old_last]
        thread[before_out] = after
        rev[after] = before_out
        # new preorder of S: subtree(s_0), then for each stem node s_j: s_j and the part of its old subtree before
        # subtree(s_{j-1}), then the part after it
        end = stem_last[0]
        for j in range(1, r + 1):
            sj = stem[j]
            thread[end] = sj
            rev[sj] = end
            end = stem_rev[j - 1]
            if stem_last[j - 1] != stem_last[j]:
                b0 = stem_after[j - 1]
                thread[end] = b0
                rev[b0] = end
                end = stem_last[j]
        new_last = end
        after = thread[v_in]
        thread[v_in] = u_in
        rev[u_in] = v_in
        thread[new_last] = after
        rev[after] = new_last
        new_parent = v_in
        new_pred = ein
        new_up = 1 if tail[ein] == u_in else -1
        for j in range(r + 1):
            sj = stem[j]
            old_pred = pred[sj]
            old_up = up[sj]
            parent[sj] = new_parent
            pred[sj] = new_pred
            up[sj] = new_up
            new_parent = sj
            new_pred = old_pred
            new_up = -old_up
        acc = 0
        for j in range(r, 0, -1):
            acc += stem_size[j] - stem_size[j - 1]
            size[stem[j]] = acc
        size[u_in] = moved
        for j in range(r + 1):
            last[stem[j]] = new_last
        w = v_in
        while w != join:
            size[w] += moved
            w = parent[w]
        w = p_out
        while w != join:
            size[w] -= moved
            w = parent[w]
        w = p_out
        while w != -1 and last[w] == old_last:
            last[w] = before_out
            w = parent[w]
        w = v_in
        while w != -1 and last[w] == v_in:
            last[w] = new_last
            w = parent[w]
        # -- potentials: shift the smaller side (only differences matter)
        if 2 * moved <= N:
            w = u_in
            for _ in range(moved):
                pi[w] += sigma
                w = thread[w]
        else:
            w = thread[new_last]
            while w != u_in:
                pi[w] -= sigma
                w = thread[w]
            if pi[root] > drift_limit or pi[root] < -drift_limit:
                base = pi[root]
                for x in range(N):
                    pi[x] -= base
    # final preorder for the caller's exact re-computation of the potentials
    w = root
    for i in range(N):
        order[i] = w
        w = thread[w]
    return OK, pivots


network_simplex = Kernel(_network_simplex)


def solve_integer(tail: np.ndarray, head: np.ndarray, cost: np.ndarray, cap: np.ndarray, flow: np.ndarray,
                  tree_arc: np.ndarray, compiled: bool = True,
                  max_pivots: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Run the kernel from the feasible ``flow`` (modified in place) and the starting tree ``tree_arc``.

    Returns ``(flow, pi, pred, order, pivots)``: potentials of the ``n`` nodes plus the root (index ``n``), each
    node's tree arc (``>= m`` for the artificial arc of node ``arc - m``, -1 for the root) and the tree's preorder
    starting at the root.  Pricing blocks hold ``0.1 sqrt(m)`` arcs (measured better than LEMON's ``sqrt(m)`` on
    the optima's networks, see :mod:`kvcore.optima.mincost`).  Raises RuntimeError on an invalid start or when
    ``max_pivots`` (``-1``: no limit) is reached."""
    m = int(tail.size)
    n = int(tree_arc.size)
    block = max(10, int(0.1 * np.sqrt(max(m, 1))))
    pi = np.zeros(n + 1, np.int64)
    pred = np.empty(n + 1, np.int64)
    order = np.empty(n + 1, np.int64)
    fn = network_simplex if compiled else network_simplex.py_func
    status, pivots = fn(np.ascontiguousarray(tail, np.int64), np.ascontiguousarray(head, np.int64),
                        np.ascontiguousarray(cost, np.int64), np.ascontiguousarray(cap, np.int64), flow,
                        np.ascontiguousarray(tree_arc, np.int64), np.int64(block), np.int64(max_pivots), pi, pred,
                        order)
    if status != OK:
        raise RuntimeError(f"network simplex: {STATUS_TEXT[int(status)]}")
    return flow, pi, pred, order, int(pivots)


def _price_in(tail, head, cost, cap, pi, active, per, rc_buf, at_buf):
    m = tail.size
    added = 0
    a = 0
    while a < m:
        t = tail[a]
        b = a
        found = 0
        while b < m and tail[b] == t:
            if not active[b] and cap[b] > 0:
                rc = cost[b] + pi[t] - pi[head[b]]
                if rc < 0:
                    rc_buf[found] = rc
                    at_buf[found] = b
                    found += 1
            b += 1
        if found > per:
            # the most negative first; a stable sort so that ties enter in scan order
            best = np.argsort(rc_buf[:found], kind="mergesort")[:per]
            for j in best:
                active[at_buf[j]] = True
            added += per
        else:
            for j in range(found):
                active[at_buf[j]] = True
            added += found
        a = b
    return added


price_in = Kernel(_price_in)


def solve_integer_columns(tail: np.ndarray, head: np.ndarray, cost: np.ndarray, cap: np.ndarray, flow: np.ndarray,
                          tree_arc: np.ndarray, active: np.ndarray, per: int, compiled: bool = True
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`solve_integer` on every arc, by column generation: the simplex runs on the ``active`` arcs only (a
    bool mask; every arc carrying flow and every arc of the starting tree is added to it), and after each solve the
    other arcs are priced with its potentials; per run of arcs with one tail node the ``per`` most negative reduced
    costs enter and the simplex continues from the previous tree and flow (arcs entering at flow 0, their lower
    bound, leave a strongly feasible tree strongly feasible).  It stops when no arc outside has a negative reduced
    cost: an arc outside carries no flow, so the potentials then satisfy complementary slackness on the whole
    network and the flow is a minimum-cost flow of it (column generation, Gilmore & Gomory, *Operations Research*
    1961; candidate lists in the network simplex, Bradley, Brown & Graves, *Management Science* 1977).  Returns what
    :func:`solve_integer` returns, with arc indices of the whole network (``pred >= m``: artificial arc of node
    ``pred - m``)."""
    m = int(tail.size)
    active = active.copy()
    active |= flow != 0
    active[tree_arc[tree_arc >= 0]] = True
    rc_buf, at_buf = np.empty(m, np.int64), np.empty(m, np.int64)
    pricer = price_in if compiled else price_in.py_func
    tree, pivots = tree_arc, 0
    while True:
        sub = np.flatnonzero(active)
        sub_tree = np.where(tree >= 0, np.searchsorted(sub, tree), -1)  # tree arcs are active: found exactly
        sub_flow, pi, pred, order, done = solve_integer(tail[sub], head[sub], cost[sub], cap[sub], flow[sub],
                                                        sub_tree, compiled)
        pivots += done
        flow[sub] = sub_flow
        real = (pred >= 0) & (pred < sub.size)
        pred = np.where(real, sub[np.where(real, pred, 0)], np.where(pred < 0, pred, pred - sub.size + m))
        if pricer(tail, head, cost, cap, pi, active, np.int64(per), rc_buf, at_buf) == 0:
            return flow, pi, pred, order, pivots
        tree = np.where(pred[:-1] < m, pred[:-1], -1)
