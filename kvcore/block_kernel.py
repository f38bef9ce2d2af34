"""Array kernel for the block study: several block reads per step with attention shares, the RM model with refetch
on miss, for the LRU, LFU and EMA-Block rules, each plain or with its state kept across eviction.

Input (one run): ``ids`` (dense block ids in ``[0, n)``), ``weights`` (each read's attention share) and ``offsets``
(step ``t`` reads ``ids[offsets[t]:offsets[t + 1]]``, distinct blocks), a capacity ``k`` in blocks and a
:class:`BlockRule`.  Output: the number of misses (cold misses included) and, on request, every eviction as
``(step, dense id)`` in order.

Step order (exactly :meth:`kvcore.engine.RMSimulator.step` with the step's reads as requests and their shares as the
observed row): the step's hits are served (recency, LFU counts); victims are chosen, the step's own reads protected,
until the misses fit; the misses are admitted (count 1, score 0, or the saved state when persistent); then every read
block's score is updated from its share.  The rules are those of the registered policies (the pairing lives on the
policy side, :func:`policies.kernels.block_rule`):

``lru``    evict the least recently accessed block (an access is a read: hit or admission).
``lfu``    the fewest reads since admission, ties to the least recently accessed (as :mod:`kvcore.kernels`' LFU).
``decay``  EMA-Block under the LRFU reading (Lee et al., ACM SIGMETRICS 1999): evict the highest
           ``p = (1 - score) * (1 - exp(-beta * age))``, an unattended step multiplying the score by ``1 - alpha``;
           ties to the older access, then to the smaller id (:mod:`policies.ema_block`).
``hold``   the same priority with the score held between observations (the page's worked examples' reading).
persistent  (any rule) an evicted block's count, score and score step are kept and restored on re-admission
           (:class:`policies.persistent_state.Persistent`): the count adds to the fresh 1, the score comes back.

Victim searches.  LRU is the head of one recency list.  LFU keeps one recency list per count; the head of the
lowest non-empty count is the victim.  ``decay`` walks the recency list from its oldest block with the bound
``p <= 1 - exp(-beta * age)`` (``score >= 0``) and stops at the first bound below the best priority found, as the
policy does.  ``hold`` keeps the blocks in :data:`HOLD_BUCKETS` recency lists by ``1 - score`` (list ``b`` holds
``[b, b + 1) / HOLD_BUCKETS``); the oldest block of a list bounds every priority in it by
``(b + 1) / HOLD_BUCKETS * (1 - exp(-beta * age))``, so the search visits the lists in decreasing bound and stops at
the first bound below the best priority found.  Both searches are exact, ties included (every block whose bound
reaches the best is visited).  A ``hold`` victim costs ``O(HOLD_BUCKETS)`` plus the blocks visited, against the
policy's ``O(k)`` array scan.  The recency and decay factors come from tables computed the way the policy computes
them (numpy's ``expm1`` for the ``hold`` scan, ``math.expm1`` and Python's power for ``decay``), so the kernel and the
policy agree bit for bit.

Compilation as in :mod:`kvcore.kernels` (numba on the first call; ``block_kernel.py_func`` is the same source run as
plain Python).  ``tests/test_block_study.py`` checks both forms against the registered policies run through the
checked engine, eviction by eviction.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError
from .kernels import Kernel, list_append, list_unlink

RULES = ("lru", "lfu", "decay", "hold")
# the kernel's codes for RULES, in that order (module-level ints: numba compiles them in as constants)
RULE_LRU, RULE_LFU, RULE_DECAY, RULE_HOLD = range(len(RULES))
HOLD_BUCKETS = 128  # a power of two, so the list of 1 - score is computed exactly


@dataclass(frozen=True)
class BlockRule:
    """One rule of the kernel: ``rule`` (one of :data:`RULES`), ``persistent`` (state kept across eviction) and, for
    ``decay`` and ``hold``, EMA-Block's ``alpha`` (score smoothing) and ``beta`` (recency decay rate)."""

    rule: str
    persistent: bool = False
    alpha: float = 0.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"block rule {self.rule!r}: must be one of {RULES}")


@functools.lru_cache(maxsize=16)
def _recency_table(T: int, beta: float, vectorized: bool) -> np.ndarray:
    """``1 - exp(-beta * age)`` for ages ``0..T``, computed as the policy computes it: numpy's expm1 (the "hold"
    victim scan) or ``math.expm1`` (the "decay" search); the two differ in the last bit for a few ages."""
    if vectorized:
        table = -np.expm1(-beta * np.arange(T + 1, dtype=np.float64))
    else:
        table = np.array([-math.expm1(-beta * a) for a in range(T + 1)])
    if (np.diff(table) < 0).any():  # the searches' bounds need a non-decreasing recency
        raise RuntimeError(f"recency decay is not monotone in floating point (beta = {beta})")
    return table


@functools.lru_cache(maxsize=16)
def _unattended_table(T: int, alpha: float) -> np.ndarray:
    """``(1 - alpha) ** g`` for ``g = 0..T`` with Python's power, as :func:`kvcore.formulas.ema_decayed` has it."""
    return np.array([(1.0 - alpha) ** g for g in range(T + 1)])


def simulate(ids: np.ndarray, weights: np.ndarray, offsets: np.ndarray, n: int, capacity: int, rule: BlockRule,
             record: bool = False, compiled: bool = True) -> tuple[int, np.ndarray, np.ndarray]:
    """``(misses, steps, victims)`` of ``rule`` on the reads ``ids``/``weights``/``offsets`` over ``n`` blocks with
    ``capacity`` blocks (module docstring); ``steps``/``victims`` are the step and dense id of every eviction in
    order when ``record``, else empty.  ``compiled=False`` runs the plain-Python form of the kernel."""
    capacity = int(capacity)
    if capacity < int(np.diff(offsets).max(initial=0)):
        raise ParameterError(f"capacity = {capacity} blocks: below the most blocks one step reads")
    code = RULES.index(rule.rule)
    T = offsets.size - 1
    recency = _recency_table(T, rule.beta, code == RULE_HOLD) if code >= RULE_DECAY else np.zeros(1)
    unattended = _unattended_table(T, rule.alpha) if code == RULE_DECAY else np.zeros(1)
    out_t = np.zeros(ids.size if record else 0, np.int64)
    out_v = np.zeros_like(out_t)
    kernel = block_kernel if compiled else block_kernel.py_func
    misses, evictions = kernel(ids, weights, offsets, n, capacity, code, rule.persistent, rule.alpha, recency,
                               unattended, HOLD_BUCKETS, out_t, out_v)
    return int(misses), out_t[:evictions], out_v[:evictions]


@Kernel
def block_kernel(ids, weights, offsets, n, k, rule, persistent, alpha, recency, unattended, buckets, out_t, out_v):
    """``(misses, evictions)`` of one run of rule code ``rule`` (module docstring) with capacity ``k``; when sized,
    ``out_t``/``out_v`` receive each eviction's step and dense id.  Called through :func:`simulate`."""
    T = offsets.size - 1
    record = out_t.size > 0
    lists = buckets if rule == RULE_HOLD else (T + 2 if rule == RULE_LFU else 1)
    # doubly linked recency lists with sentinels n .. n + lists - 1; after[sentinel] is the least recently accessed
    after = np.empty(n + lists, np.int64)
    before = np.empty(n + lists, np.int64)
    for lst in range(lists):
        after[n + lst] = n + lst
        before[n + lst] = n + lst
    home = np.zeros(n, np.int64)
    resident = np.zeros(n, np.bool_)
    accessed = np.zeros(n, np.int64)
    score = np.zeros(n, np.float64)
    scored_at = np.zeros(n, np.int64)
    count = np.zeros(n, np.int64)
    saved = np.zeros(n, np.bool_)
    saved_score = np.zeros(n, np.float64)
    saved_at = np.zeros(n, np.int64)
    saved_count = np.zeros(n, np.int64)
    protected_at = np.full(n, -1, np.int64)
    upper = np.empty(lists, np.float64)
    for lst in range(lists):
        upper[lst] = (lst + 1) / lists
    bound = np.empty(lists, np.float64)
    width = 1
    for t in range(T):
        width = max(width, offsets[t + 1] - offsets[t])
    fetched = np.empty(width, np.int64)
    lowest = 0
    size = 0
    misses = 0
    evictions = 0
    for t in range(T):
        lo = offsets[t]
        hi = offsets[t + 1]
        nf = 0
        for j in range(lo, hi):
            x = ids[j]
            protected_at[x] = t
            if resident[x]:
                accessed[x] = t
                list_unlink(before, after, x)
                if rule == RULE_LFU:
                    count[x] += 1
                    home[x] = count[x]
                list_append(before, after, n + home[x], x)
            else:
                fetched[nf] = x
                nf += 1
        for _ in range(size + nf - k):
            v = -1
            best = -1.0
            if rule == RULE_LRU:
                x = after[n]
                while x < n and protected_at[x] == t:
                    x = after[x]
                v = x if x < n else -1
            elif rule == RULE_LFU:
                while after[n + lowest] >= n:
                    lowest += 1
                c = lowest
                while v < 0 and c < lists:
                    x = after[n + c]
                    while x < n and protected_at[x] == t:
                        x = after[x]
                    if x < n:
                        v = x
                    c += 1
            elif rule == RULE_DECAY:
                x = after[n]
                while x < n:
                    r = recency[t - accessed[x]]
                    if v >= 0 and r < best:
                        break
                    if protected_at[x] != t:
                        pr = (1.0 - score[x] * unattended[t - 1 - scored_at[x]]) * r
                        if v < 0 or pr > best or (pr == best and (accessed[x] < accessed[v] or
                                                                  (accessed[x] == accessed[v] and x < v))):
                            v = x
                            best = pr
                    x = after[x]
            else:
                for lst in range(lists):
                    x = after[n + lst]
                    bound[lst] = -1.0 if x >= n else upper[lst] * recency[t - accessed[x]]
                while True:
                    top = 0
                    for m in range(1, lists):
                        if bound[m] > bound[top]:
                            top = m
                    if bound[top] < 0.0 or (v >= 0 and bound[top] < best):
                        break
                    bound[top] = -1.0
                    x = after[n + top]
                    while x < n:
                        r = recency[t - accessed[x]]
                        if v >= 0 and upper[top] * r < best:
                            break
                        if protected_at[x] != t:
                            pr = (1.0 - score[x]) * r
                            if v < 0 or pr > best or (pr == best and (accessed[x] < accessed[v] or
                                                                      (accessed[x] == accessed[v] and x < v))):
                                v = x
                                best = pr
                        x = after[x]
            if v < 0:
                raise RuntimeError("no evictable block")
            if record:
                out_t[evictions] = t
                out_v[evictions] = v
            evictions += 1
            if persistent:
                saved[v] = True
                saved_score[v] = score[v]
                saved_at[v] = scored_at[v]
                saved_count[v] = count[v]
            list_unlink(before, after, v)
            resident[v] = False
            size -= 1
        for m in range(nf):
            x = fetched[m]
            resident[x] = True
            size += 1
            misses += 1
            accessed[x] = t
            count[x] = 1
            score[x] = 0.0
            scored_at[x] = t - 1
            if persistent and saved[x]:
                saved[x] = False
                count[x] += saved_count[x]
                score[x] = saved_score[x]
                scored_at[x] = saved_at[x]
            lst = 0
            if rule == RULE_HOLD:
                lst = min(max(int((1.0 - score[x]) * lists), 0), lists - 1)
            elif rule == RULE_LFU:
                lst = count[x]
                lowest = min(lowest, lst)
            home[x] = lst
            list_append(before, after, n + lst, x)
        if rule == RULE_DECAY or rule == RULE_HOLD:
            for j in range(lo, hi):
                x = ids[j]
                sc = score[x]
                if rule == RULE_DECAY:
                    sc = sc * unattended[t - 1 - scored_at[x]]
                sc = alpha * weights[j] + (1.0 - alpha) * sc
                score[x] = sc
                scored_at[x] = t
                if rule == RULE_HOLD:
                    # every block observed at t was requested at t, so the young end keeps its list in recency order
                    lst = min(max(int((1.0 - sc) * lists), 0), lists - 1)
                    if lst != home[x]:
                        list_unlink(before, after, x)
                        home[x] = lst
                        list_append(before, after, n + lst, x)
    return misses, evictions


