"""Compiled closed loop: NM policies that observe a model's attention under their own evictions, for all KV heads of
a layer in one compiled call.

Setting (SPEC section 2, NM step order; :class:`realtrace.quality.replay.ClosedLoop` drives it).  One layer has
``G`` KV heads, each shared by ``rep`` query heads; ``scores[h, t, i]`` is query head ``h``'s scaled product
``q_t k_i * scale`` (every pair is given; only ``i <= t`` is read).  Per KV head one policy with capacity ``k`` runs
over the steps ``t = 0 .. T-1``: token ``t`` arrives, one resident position is dropped while more than ``k`` are
held, then the policy observes row ``t`` as the model computes it over the resident set ``R_t``
(:func:`observed_row`): per query head ``softmax_{i in R_t}(scores[h, t, i])``, then the mean over the ``rep`` heads
-- or, with ``top = m >= 1``, only the ``m`` largest of those entries.  The result is the drop vector of every head
(``drops[g, i]`` = the step position ``i`` left, ``T`` = never; :mod:`realtrace.quality.schedule`).

Rules with a compiled form (:class:`ClosedLoopRule`), each exactly the registered policy's rule driven through
:class:`kvcore.engine.NMSimulator` (``policies/kernels.py`` pairs the classes; a property test compares schedules):

``fifo``       the oldest resident position goes (FIFO in NM: a sliding window);
``streaming``  the oldest resident position ``>= window`` goes (StreamingLLM with ``window = min(n_sinks, k)``
               sinks; the arriving token itself when no other is left);
``tova``       the resident position other than ``t`` with the least weight in the last observed row goes (a
               position the row did not list weighs 0), ties to the smaller position (Oren et al., EMNLP 2024);
``h2o``        among resident positions ``<= t - window`` (``window`` = H2O's recent part at ``k``), the one with the
               least accumulated observed weight goes, ties to the smaller position (Zhang et al., NeurIPS 2023).
               ACC (the paper's Section 5 rule) is this rule with ``window = 1`` (the arriving token protected) or
               ``0`` (``protect_arrival=False``: the literal argmin, the arrival included);
``lru``        the least recently used position goes: a position is used when it arrives and when row ``t`` lists it
               with weight ``>= threshold``; positions used in the same row count in ascending order, all after the
               arrival (the policy's list order: admission appends, each observed entry moves to the young end).
               With ``threshold = 0`` and complete rows every resident position is used at every step, so LRU
               is FIFO; the kernel then computes no row at all;
``scissorhands`` among resident positions ``<= t - window`` (``window = min(recent, k)``), the one unimportant in
               the most of the last ``history`` observed rows goes, ties to the smaller position: a position ``i``
               is important in a row that lists it with weight ``>= threshold`` (``threshold < 0``: the uniform
               share ``1 / |R_s|`` of that row), and its unimportance count is ``min(history, t - i)`` minus the
               rows of the window where it was important (Liu et al., NeurIPS 2023; the registered policy with
               ``drop_amount = 1``, one position per step -- the batched form runs through the engine);
``gda``        Greedy-Dual-Attention (the paper's Section 6, Eq. 11) with the attention tie-break: each position
               holds a Landlord level ``E_i`` (``rent + w`` at arrival, raised to ``rent + w`` whenever a row lists
               it with weight ``>= threshold``; ``w = inf`` for the ``window`` pinned positions) and a decayed
               attention ``D_i`` (``gamma``-decayed sum of its listed weights), stored lazily scaled exactly as
               :class:`policies.decay.LazyDecay` stores it (the same float operations, rescaled at the same
               steps); the position of least ``(E_i, D_i, i)`` goes, the arrival included, and the rent rises to
               its level when that is finite and higher.  Weights ``unit`` (1; ``auto`` in NM) or ``zero``;
``random``     a uniformly random resident position goes, the arrival included: the registered policy's draw
               ``rng.integers(k + 1)`` at each eviction indexes its pool, kept in admission order with a removed
               slot filled by the last member (:class:`policies.random_evict.IndexedSet`).  The draws come from the
               head's generator outside the kernel, one scalar call per eviction as the policy makes them
               (``draws``), so a seed gives the policy's own schedule;
``default``    the paper's Section 10 default (:class:`policies.default_policy.DefaultPolicy`): the ``window``
               newest positions (the recency floor) and the first ``sinks`` are kept; the others form a pool of
               decayed observed attention (stored lazily scaled as :class:`policies.decay.LazyDecay` stores it);
               the victim is drawn uniformly among the pool's positions of score exactly 0 (in the policy's pool
               order), else among the positive ones of exactly the least score (ascending), else the oldest of the
               floor, else the newest sink.  Each draw is the policy's own ``rng.integers(m)`` on the head's
               generator, made inside the kernel (numba draws from a numpy ``Generator`` as numpy does), so one
               head runs per call (:func:`default_head_schedule`).

The observation is one function for both paths: :func:`observed_row` runs inside the layer kernel and, per step,
behind :data:`observed_row_kernel` for the policy objects of the Python path, so the two see bit-identical weights
and the schedules can be compared exactly (the weights are checked against numpy's softmax to float tolerance).

Which policies run here: :func:`register_rule` (called by ``policies/kernels.py``) pairs a class with a function
giving its rule at a capacity; :func:`rule_for` accepts an instance only under the conditions of
:func:`kvcore.kernels.kernel_for` (exact class, no replaced or shadowed method), so a subclass, a wrapper or a user's
policy runs through the engine.  Compilation as in :mod:`kvcore.kernels` (numba on first call, ``py_func`` plain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .kernels import Kernel, _inlined, behaviour_of, unaltered_entry

RULES = ("fifo", "streaming", "tova", "h2o", "lru", "scissorhands", "gda", "random", "default")
_FIFO, _STREAMING, _TOVA, _H2O, _LRU, _SCISSORHANDS, _GDA, _RANDOM = range(len(RULES) - 1)
_DECAY_LIMIT = 2.0 ** 256   # policies.decay.LazyDecay.LIMIT: the stored values are rescaled past it


@dataclass(frozen=True)
class ClosedLoopRule:
    """A compiled rule: ``kind`` (one of :data:`RULES`), its ``window`` (StreamingLLM's sinks and GD-A's pinned
    positions, H2O's and Scissorhands' recent part, the default's recency floor; 0 for the others), both as at the
    capacity the policy runs with, the ``threshold`` of LRU's use, Scissorhands' importance and GD-A's refresh (0
    for the others), Scissorhands' ``history``, the ``gamma`` of GD-A and the default, GD-A's unpinned ``weight``
    and the default's ``sinks`` (0, 1, 1 and 0 for the others)."""

    kind: str
    window: int = 0
    threshold: float = 0.0
    history: int = 0
    gamma: float = 1.0
    weight: float = 1.0
    sinks: int = 0

    def __post_init__(self) -> None:
        if self.kind not in RULES:
            raise ValueError(f"closed-loop rule {self.kind!r}: must be one of {RULES}")

    def reads_rows(self, top: int | None) -> bool:
        """Whether the rule looks at the attention rows at all (FIFO, StreamingLLM and Random never do; LRU only when
        a weight can fall below its threshold: a positive threshold, or top-``m`` rows that leave positions out)."""
        if self.kind == "lru":
            return self.threshold > 0.0 or top is not None
        return self.kind in ("tova", "h2o", "scissorhands", "gda", "default")


@_inlined
def observed_row(scores, h0, rep, t, resident, n, top, weights, listed, exps):
    """Row ``t`` over ``resident[:n]`` as the policy observes it: ``weights[j] = mean_h softmax_h(...)[j]`` over the
    query heads ``h0 .. h0+rep-1`` (in float64, each head's maximum subtracted first, the mean taken as
    ``sum_h e_hj * (1 / (rep sum_i e_hi))``), and ``listed[:m]`` the indices ``j`` the policy is shown, ascending: all
    ``n``, or with ``0 < top < n`` the ``top`` largest weights, among equal weights the smaller positions.  ``exps``:
    scratch of ``n`` floats.  Returns ``m``."""
    for j in range(n):
        weights[j] = 0.0
    for h in range(h0, h0 + rep):
        row = scores[h, t]
        high = -np.inf
        for j in range(n):
            s = np.float64(row[resident[j]])
            if s > high:
                high = s
        total = 0.0
        for j in range(n):
            e = math.exp(np.float64(row[resident[j]]) - high)
            exps[j] = e
            total += e
        scale = 1.0 / (rep * total)
        for j in range(n):
            weights[j] += exps[j] * scale
    if top <= 0 or n <= top:
        for j in range(n):
            listed[j] = j
        return n
    order = np.argsort(-weights[:n], kind="mergesort")  # stable: equal weights stay in position order
    chosen = np.sort(order[:top])
    for j in range(top):
        listed[j] = chosen[j]
    return top


@Kernel
def observed_row_kernel(scores, t, items, top):
    """:func:`observed_row` of a group's ``scores`` ``(rep, T, T)`` over ``items``: ``(listed items, weights)``."""
    n = items.size
    weights = np.empty(n, np.float64)
    listed = np.empty(n, np.int64)
    m = observed_row(scores, 0, scores.shape[0], t, items, n, top, weights, listed, np.empty(n, np.float64))
    return items[listed[:m]], weights[listed[:m]]


@_inlined
def row_scratch(capacity):
    """A kernel's resident positions and :func:`observed_row`'s arrays, for up to ``capacity + 1`` positions:
    ``(resident, weights, listed, exps)``."""
    return (np.empty(capacity + 1, np.int64), np.empty(capacity + 1, np.float64), np.empty(capacity + 1, np.int64),
            np.empty(capacity + 1, np.float64))


@_inlined
def decay_scale(gamma, base, t, resident, n, score):
    """:class:`policies.decay.LazyDecay`'s ``scale(t)`` for a kernel, with the same float powers (the exponent given
    as a float): when it passes the limit, the resident positions' stored values are rescaled first, as
    ``renormalize(t)`` and the policies do.  Returns ``(scale, base)``."""
    s = 1.0 if gamma == 1.0 else gamma ** float(base - t)
    if s <= _DECAY_LIMIT:
        return s, base
    f = gamma ** float(t - base)
    for j in range(n):
        score[resident[j]] = score[resident[j]] * f
    return 1.0, t


@_inlined
def victim_index(rule, window, history, resident, n, score, level, t):
    """The index in ``resident[:n]`` (ascending positions, ``t`` last) of the position the rule drops at step ``t``."""
    if rule == _FIFO:
        return 0
    if rule == _STREAMING:
        j = 0
        while resident[j] < window:
            j += 1
        return j
    best = 0
    if rule == _GDA:  # least (level, decayed attention), ties to the smaller position
        for j in range(1, n):
            a, b = resident[j], resident[best]
            if level[a] < level[b] or (level[a] == level[b] and score[a] < score[b]):
                best = j
        return best
    if rule == _SCISSORHANDS:  # score: rows where important; the most unimportant older position goes
        for j in range(1, n):
            if resident[j] > t - window:
                break
            if (min(history, t - resident[j]) - score[resident[j]]
                    > min(history, t - resident[best]) - score[resident[best]]):
                best = j
        return best
    last = n - 1 if rule == _TOVA else n  # TOVA never drops the arriving token
    for j in range(1, last):
        if rule == _H2O and resident[j] > t - window:
            break  # the recent part: never dropped
        if score[resident[j]] < score[resident[best]]:
            best = j
    return best


@Kernel
def layer_schedule(scores, rep, capacity, top, rule, window, threshold, history, gamma, weight, draws, drops):
    """Fill ``drops`` ``(G, T)`` with the schedule of every KV head ``g`` (query heads ``g*rep .. g*rep+rep-1`` of
    ``scores``) under ``rule`` (module docstring).  ``score`` per position: TOVA's weight in the last observed row,
    H2O's accumulated weight, LRU's last use as the rank ``(2 step + 1 if observed else 2 step) T + position``
    (exact in float64 below ``T = 6 10^7``), Scissorhands' count of window rows where the position was important
    (the window's rows kept in a ring of ``min(history, T)`` rows of at most ``k`` positions), GD-A's stored
    decayed attention (its level in ``level``; the rent and the decay's base step per head).  ``draws`` ``(G, E)``:
    the random rule's pool indices, one per eviction (``(G, 0)`` for the others)."""
    G = drops.shape[0]
    T = drops.shape[1]
    resident, weights, listed, exps = row_scratch(capacity)
    score = np.zeros(T, np.float64)
    level = np.zeros(T, np.float64)
    ring_rows = max(1, min(history, T)) if rule == _SCISSORHANDS else 1
    ring = np.empty((ring_rows, capacity + 1), np.int64)
    ring_count = np.zeros(ring_rows, np.int64)
    for g in range(G):
        n = 0
        if rule == _RANDOM:  # ``resident`` is the policy's pool, in its own order
            e = 0
            for t in range(T):
                drops[g, t] = T
                resident[n] = t
                n += 1
                if n > capacity:
                    p = draws[g, e]
                    e += 1
                    drops[g, resident[p]] = t
                    n -= 1
                    if p < n:
                        resident[p] = resident[n]
            continue
        ring_count[:] = 0
        rent = 0.0
        base = 0
        for t in range(T):
            drops[g, t] = T
            score[t] = 2.0 * t * T + t if rule == _LRU else 0.0
            if rule == _GDA:
                level[t] = rent + (np.inf if t < window else weight)
            resident[n] = t
            n += 1
            if n > capacity:
                j = victim_index(rule, window, history, resident, n, score, level, t)
                if rule == _GDA and level[resident[j]] > rent and math.isfinite(level[resident[j]]):
                    rent = level[resident[j]]
                drops[g, resident[j]] = t
                for x in range(j, n - 1):
                    resident[x] = resident[x + 1]
                n -= 1
            if rule == _LRU and top == 0 and threshold == 0.0:
                for j in range(n):  # every weight is >= 0: all used, in ascending order
                    score[resident[j]] = (2.0 * t + 1.0) * T + resident[j]
                continue
            if rule == _FIFO or rule == _STREAMING:
                continue
            m = observed_row(scores, g * rep, rep, t, resident, n, top, weights, listed, exps)
            if rule == _TOVA:
                for j in range(n):
                    score[resident[j]] = 0.0
            if rule == _GDA:
                s, base = decay_scale(gamma, base, t, resident, n, score)
            if rule == _SCISSORHANDS:
                slot = t % ring_rows
                if t >= history:  # row t - history leaves the window
                    for j in range(ring_count[slot]):
                        score[ring[slot, j]] -= 1.0
                ring_count[slot] = 0
                share = 1.0 / max(n, 1) if threshold < 0.0 else threshold
            for j in range(m):
                x = listed[j]
                if rule == _TOVA:
                    score[resident[x]] = weights[x]
                elif rule == _H2O:
                    score[resident[x]] += weights[x]
                elif rule == _LRU:
                    if weights[x] >= threshold:
                        score[resident[x]] = (2.0 * t + 1.0) * T + resident[x]
                elif rule == _GDA:
                    i = resident[x]
                    w = np.inf if i < window else weight
                    if weights[x] >= threshold and rent + w > level[i]:
                        level[i] = rent + w
                    score[i] = score[i] + weights[x] * s
                elif weights[x] >= share:
                    score[resident[x]] += 1.0
                    ring[slot, ring_count[slot]] = resident[x]
                    ring_count[slot] += 1
    return drops


_GONE, _FLOOR, _SINK, _ZERO, _HEAP = range(5)   # where a position of the default's cache is


@_inlined
def _zero_add(zero, zero_at, nz, i):
    """Append ``i`` to the default's zero pool ``zero[:nz]``; returns the new size."""
    zero_at[i] = nz
    zero[nz] = i
    return nz + 1


@_inlined
def _zero_remove(zero, zero_at, nz, i):
    """Remove ``i`` from the default's zero pool ``zero[:nz]`` as the policy does (the last member fills its slot);
    returns the new size."""
    p = zero_at[i]
    nz -= 1
    if zero[nz] != i:
        zero[p] = zero[nz]
        zero_at[zero[nz]] = p
    return nz


@Kernel
def default_head_schedule(scores, h0, rep, capacity, top, recent, n_sinks, gamma, rng, drops):
    """Fill ``drops`` ``(T,)`` with the Section 10 default's schedule for the KV head served by the query heads
    ``h0 .. h0+rep-1`` of ``scores`` (module docstring, rule ``default``), drawing ties from ``rng``.  ``where``
    says which of the policy's structures holds each position; ``stamp`` is a pool member's insertion order (the
    order of the policy's heap dictionary, in which underflowed scores return to the zero pool)."""
    T = drops.shape[0]
    resident, weights, listed, exps = row_scratch(capacity)
    ties = np.empty(capacity + 1, np.int64)
    score = np.zeros(T, np.float64)
    where = np.zeros(T, np.int64)
    stamp = np.zeros(T, np.int64)
    zero = np.empty(T, np.int64)
    zero_at = np.zeros(T, np.int64)
    floor = np.empty(T, np.int64)
    sinks = np.empty(T, np.int64)
    nz = f0 = f1 = ns = n = base = added = 0
    for t in range(T):
        drops[t] = T
        score[t] = 0.0
        resident[n] = t
        n += 1
        if t < n_sinks:
            sinks[ns] = t
            ns += 1
            where[t] = _SINK
        else:
            floor[f1] = t
            f1 += 1
            where[t] = _FLOOR
            while f0 < f1 and floor[f0] <= t - recent:  # leaves the floor for the pool
                i = floor[f0]
                f0 += 1
                if score[i] > 0.0:
                    where[i] = _HEAP
                    stamp[i] = added
                    added += 1
                else:
                    where[i] = _ZERO
                    nz = _zero_add(zero, zero_at, nz, i)
        if n > capacity:
            m = nz
            if nz == 0:
                for j in range(n):  # the pool's least positive score, its holders ascending
                    i = resident[j]
                    if where[i] == _HEAP:
                        if m > 0 and score[i] < score[ties[0]]:
                            m = 0
                        if m == 0 or score[i] == score[ties[0]]:
                            ties[m] = i
                            m += 1
            if m > 0:  # the policy's pick_tie: no draw for one candidate
                pick = 0 if m == 1 else rng.integers(0, m)
                if nz > 0:
                    v = zero[pick]
                    nz = _zero_remove(zero, zero_at, nz, v)
                else:
                    v = ties[pick]
            elif f0 < f1:
                v = floor[f0]
                f0 += 1
            else:
                ns -= 1
                v = sinks[ns]
            where[v] = _GONE
            drops[v] = t
            j = 0
            while resident[j] != v:
                j += 1
            for x in range(j, n - 1):
                resident[x] = resident[x + 1]
            n -= 1
        s, rescaled = decay_scale(gamma, base, t, resident, n, score)
        if rescaled != base:  # scores that underflowed to 0 go back to the zero pool, in the heap's insertion order
            base = rescaled
            m = 0
            for j in range(n):
                i = resident[j]
                if where[i] == _HEAP and score[i] == 0.0:
                    ties[m] = i
                    m += 1
            order = np.argsort(stamp[ties[:m]], kind="mergesort")
            for j in range(m):
                i = ties[order[j]]
                where[i] = _ZERO
                nz = _zero_add(zero, zero_at, nz, i)
        m = observed_row(scores, h0, rep, t, resident, n, top, weights, listed, exps)
        for j in range(m):
            x = listed[j]
            i = resident[x]
            score[i] = score[i] + weights[x] * s
            if where[i] == _ZERO and score[i] > 0.0:
                nz = _zero_remove(zero, zero_at, nz, i)
                where[i] = _HEAP
                stamp[i] = added
                added += 1
    return drops


def closed_loop_drops(scores: np.ndarray, kv_heads: int, capacity: int, top: int | None, rule: ClosedLoopRule,
                      compiled: bool = True, rngs: list[np.random.Generator] | None = None) -> np.ndarray:
    """The drop vectors ``(kv_heads, T)`` of ``rule`` at ``capacity`` on a layer's ``scores`` ``(kv_heads * rep, T,
    T)`` (float32), observing complete rows (``top=None``) or their ``top`` largest entries.  A rule that reads no
    rows (:meth:`ClosedLoopRule.reads_rows`) takes ``scores`` of shape ``(kv_heads * rep, T, 0)`` as well, so its
    caller need not compute them.  ``rngs``: the generator per KV head of the random and default rules (as the
    policy's ``rng``, advanced as the policy advances it).  ``compiled=False`` runs the plain-Python form of the
    kernel."""
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    heads, T = scores.shape[0], scores.shape[1]
    if heads % kv_heads or scores.shape[2] not in ((T,) if rule.reads_rows(top) else (T, 0)) or capacity < 1:
        raise ValueError(f"scores {scores.shape} for {kv_heads} KV heads at capacity {capacity}")
    drops = np.empty((kv_heads, T), np.int64)
    draws = np.empty((kv_heads, 0), np.int64)
    if rule.kind in ("random", "default") and (rngs is None or len(rngs) != kv_heads):
        raise ValueError(f"closed-loop rule {rule.kind}: one generator per KV head ({kv_heads}) is needed")
    if rule.kind == "default":
        kernel = default_head_schedule if compiled else default_head_schedule.py_func
        rep = heads // kv_heads
        for g in range(kv_heads):
            kernel(scores, g * rep, rep, int(capacity), 0 if top is None else int(top), int(rule.window),
                   int(rule.sinks), float(rule.gamma), rngs[g], drops[g])
        return drops
    if rule.kind == "random":
        # scalar calls, as the policy makes them (numpy does not promise that one array call draws the same values)
        draws = np.array([[int(r.integers(capacity + 1)) for _ in range(max(T - capacity, 0))] for r in rngs],
                         np.int64).reshape(kv_heads, max(T - capacity, 0))
    kernel = layer_schedule if compiled else layer_schedule.py_func
    return kernel(scores, heads // kv_heads, int(capacity), 0 if top is None else int(top), RULES.index(rule.kind),
                  int(rule.window), float(rule.threshold), int(rule.history), float(rule.gamma), float(rule.weight),
                  draws, drops)


# --------------------------------------------------------------------------------------------------------------------
# Which policies the rules stand for
# --------------------------------------------------------------------------------------------------------------------

_POLICY_RULES: dict[type, tuple[Callable[[Any, int], ClosedLoopRule | None], dict[str, Any]]] = {}


def register_rule(cls: type, rule: Callable[[Any, int], ClosedLoopRule | None]) -> None:
    """Declare that instances of exactly ``cls`` at capacity ``k`` follow ``rule(instance, k)`` (None: these
    parameters have no compiled form).  Called by the policy package for its built-in rules."""
    _POLICY_RULES[cls] = (rule, behaviour_of(cls))


def rule_for(policy: Any, capacity: int) -> ClosedLoopRule | None:
    """The compiled rule that reproduces ``policy`` at ``capacity`` exactly, or None (module docstring)."""
    entry = unaltered_entry(_POLICY_RULES, policy)
    return None if entry is None else entry[0](policy, capacity)
