"""Classical lower-bound workloads on ``k+1`` items: the adaptive adversary, the cyclic sequence, Yao's uniform
distribution, and marking phases (paper Section 4(a)-(c); SPEC section 5).

Items are 0-based ints.  Every generator returns a validated :mod:`kvcore.traces` trace.
"""

from __future__ import annotations

import numpy as np

from kvcore.engine import NMSimulator, RMSimulator, make_rng
from kvcore.errors import ParameterError
from kvcore.numbers import integer
from kvcore.traces import AttentionTrace, PagingTrace

from ._build import attention_from_rows


def adaptive_k_plus_one(policy, k: int, T: int, seed: int | np.random.Generator | None = 0,
                        prefix: PagingTrace | None = None) -> PagingTrace:
    """Adaptive adversary of the deterministic lower bound: every request is a fault for ``policy``.

    Construction (Sleator & Tarjan, "Amortized efficiency of list update and paging rules", CACM 1985; paper
    Section 4(a), Eq. 6): the universe is items ``0..k``.  ``policy`` is driven step by step through
    :class:`kvcore.engine.RMSimulator` with capacity ``k`` (public interface only: the adversary reads
    ``is_resident`` before each step).  Each step requests the lowest-id item of ``0..k`` that the policy does not
    hold; one always exists because at most ``k`` of the ``k+1`` items fit.  So the policy faults on all ``T``
    requests (cold misses included), whatever its rule.

    With a warm-up ``prefix`` (a unit-cost trace), the policy is first driven through it and the ``T`` adaptive
    requests follow; the returned trace is the prefix followed by them.  A flaw that starts only after many
    evictions or once statistics accumulate is reached this way.

    The returned unit-cost trace is fixed, so it can be replayed against the exact optimum with any cache size
    ``h``.  Replaying the same policy with the same ``seed`` reproduces the run (a randomized policy's coins come
    from ``seed``; the adversary is adaptive-online: it sees the resident set, not future coins).
    """
    k = integer(k, "k", 1)
    T = integer(T, "T", 0)
    sim = RMSimulator(policy, k, seed)
    head = np.zeros(0, dtype=np.int64) if prefix is None else _unit_items(prefix)
    for item in head.tolist():
        sim.step([item])
    seq = np.empty(T, dtype=np.int64)
    for t in range(T):
        item = next(i for i in range(k + 1) if not sim.is_resident(i))
        seq[t] = item
        sim.step([item])
    after = "" if prefix is None else f", after {prefix.T} warm-up requests"
    return PagingTrace.unit(np.concatenate([head, seq]),
                            f"adaptive_k_plus_one(k={k}, T={T}, policy={sim.name}{after})")


def _unit_items(trace: PagingTrace) -> np.ndarray:
    if not isinstance(trace, PagingTrace) or not trace.is_unit_single:
        raise ParameterError("prefix: expected a unit-cost paging trace with one request per step")
    return trace.items


def adaptive_k_plus_one_nm(policy, k: int, T: int, seed: int | np.random.Generator | None = 0) -> AttentionTrace:
    """No-refetch analogue of the adaptive adversary: all of each row's mass on a token the policy has dropped.

    Construction (paper Section 4(a): "place all attention mass on the single token ALG does not hold", read in the
    NM model of Section 3): ``policy`` is driven through :class:`kvcore.engine.NMSimulator` with capacity ``k``.
    Row ``t`` is fixed before the policy's step-``t`` eviction (the row arrives with token ``t``), so it can only
    target tokens dropped at earlier steps.  Rule: if some token ``i < t`` has been dropped, row ``t`` is
    ``{i: 1}`` for the lowest such id (a dropped token never returns, so the policy loses the whole row);
    otherwise row ``t`` is ``{t: 1}`` (all mass on the arriving token).  Once the policy has dropped anything,
    its regret is 1 per step while an offline policy that keeps that token pays 0 from then on.
    """
    k = integer(k, "k", 1)
    T = integer(T, "T", 0)
    sim = NMSimulator(policy, k, seed)
    rows: list[dict[int, float]] = []
    one = np.ones(1)
    lowest_dropped = None
    for t in range(T):
        target = t if lowest_dropped is None else lowest_dropped
        rows.append({target: 1.0})
        before = sim.resident | {t}
        sim.step(np.array([target], dtype=np.int64), one)
        dropped = before - sim.resident
        if dropped:
            m = min(dropped)
            lowest_dropped = m if lowest_dropped is None else min(lowest_dropped, m)
    return attention_from_rows(rows, f"adaptive_k_plus_one_nm(k={k}, T={T}, policy={sim.name})")


def oblivious_k_plus_one_nm(k: int, T: int, target: int) -> AttentionTrace:
    """Fixed (oblivious) no-refetch trace: the first ``k + 1`` rows put all mass on the arriving token, every later
    row all of it on token ``target`` (``0 <= target <= k``).

    Construction (the toolkit's, for claim ``nm-det-unbounded``; Yao's principle, as in Raghavan & Snir 1989 for
    paging): at step ``k`` the ``(k+1)``-th token arrives into a cache of ``k``, so every policy drops at least one
    of tokens ``0..k``; with ``target`` uniform over ``0..k`` it has dropped the target with probability at least
    ``1/(k+1)``, and a dropped target costs 1 on every later row (no refetch).  So for every randomized policy
    some ``target`` gives expected regret ``>= (T - k - 1)/(k + 1)``, while the offline optimum keeps the target
    and loses 0.
    """
    k = integer(k, "k", 1)
    T = integer(T, "T", 0)
    target = integer(target, "target", 0)
    if target > k:
        raise ParameterError(f"target = {target}: must be one of the first k + 1 = {k + 1} tokens")
    rows = [{t: 1.0} if t <= k else {target: 1.0} for t in range(T)]
    return attention_from_rows(rows, f"oblivious_k_plus_one_nm(k={k}, T={T}, target={target})")


def cyclic_k_plus_one(k: int, T: int) -> PagingTrace:
    """The cyclic sequence ``0, 1, ..., k, 0, 1, ..., k, ...`` (request ``t`` is item ``t mod (k+1)``), length T.

    Deterministic; period ``k+1``.  LRU and FIFO with cache ``k`` fault on every request of it, while Belady with
    cache ``h`` faults about ``T (k-h+1)/k`` times, so the ratio tends to ``k/(k-h+1)`` (Sleator & Tarjan, CACM
    1985; paper Section 4(a)-(b), Eq. 6 and Eq. 8).
    """
    k = integer(k, "k", 1)
    T = integer(T, "T", 0)
    return PagingTrace.unit(np.arange(T, dtype=np.int64) % (k + 1), f"cyclic_k_plus_one(k={k}, T={T})")


def uniform_k_plus_one(k: int, T: int, seed: int | np.random.Generator | None = 0) -> PagingTrace:
    """``T`` i.i.d. requests, each uniform over items ``0..k``.

    Yao's principle applied to this distribution gives the randomized lower bound ``H_k``: every online algorithm
    faults with probability at least ``1/(k+1)`` per request once its cache is full, while the offline optimum
    faults once per phase of expected length ``(k+1) H_k`` (Fiat, Karp, Luby, McGeoch, Sleator, Young,
    "Competitive paging algorithms", J. Algorithms 1991; Young, "On-line caching as cache size varies", SODA 1991;
    paper Section 4(c), Eq. 9).  Same seed, same trace.
    """
    k = integer(k, "k", 1)
    T = integer(T, "T", 0)
    rng = make_rng(seed)
    return PagingTrace.unit(rng.integers(0, k + 1, size=T, dtype=np.int64), f"uniform_k_plus_one(k={k}, T={T})")


def phase_starts(trace: PagingTrace, k: int) -> list[int]:
    """Start steps of the k-phase partition: each phase is a maximal run of steps touching at most ``k`` distinct
    items; a new phase starts at the first step whose requests would make ``k+1`` distinct items (FKLMSY 1991; the
    paper's Section 2.2 phase argument).  The first phase starts at step 0 (when ``T > 0``)."""
    k = integer(k, "k", 1)
    starts: list[int] = []
    current: set[int] = set()
    for t, items, _ in trace.steps():
        q = set(items.tolist())
        if not starts or len(current | q) > k:
            starts.append(t)
            current = set()
        current |= q
    return starts


def marking_phases(k: int, phases: int, new_per_phase: int, seed: int | np.random.Generator | None = 0,
                   n_items: int | None = None) -> PagingTrace:
    """A unit-cost sequence made of ``phases`` k-phases, each after the first with exactly ``new_per_phase`` new items.

    Construction (the phase structure of Fiat, Karp, Luby, McGeoch, Sleator, Young, J. Algorithms 1991, where the
    marking algorithm's cost is analysed per phase by its number of "new" items, those not requested in the
    previous phase): phase 1 requests ``k`` distinct items ``0..k-1``.  Phase ``j > 1`` requests a set ``S_j`` of
    ``k`` distinct items, each exactly once, made of ``new_per_phase`` items outside ``S_{j-1}`` and
    ``k - new_per_phase`` items drawn uniformly from ``S_{j-1}``; new items come first (in random order) and stale
    ones after (in random order), the order in which an adversary for marking requests them.  Because every phase
    starts with an item outside the previous phase's ``k`` items, :func:`phase_starts` recovers exactly these
    phases.  New items are fresh ids when ``n_items`` is None, otherwise drawn uniformly from
    ``{0..n_items-1} \\ S_{j-1}`` (``n_items >= k + new_per_phase``; ``n_items = k+1`` with one new item per phase
    is the classical ``k+1``-item instance).  The optimum pays at least ``new_per_phase / 2`` per phase on
    average, marking at most ``new_per_phase * H_k`` in expectation (FKLMSY 1991).
    """
    k = integer(k, "k", 1)
    phases = integer(phases, "phases", 0)
    new = integer(new_per_phase, "new_per_phase", 1)
    if new > k:
        raise ParameterError(f"new_per_phase = {new}: at most k = {k} items of a phase can be new")
    if n_items is not None:
        n_items = integer(n_items, "n_items", k + new)
    rng = make_rng(seed)
    seq: list[int] = []
    prev: list[int] = []
    next_fresh = k
    for j in range(phases):
        if j == 0:
            cur_new, stale = list(range(k)), []
        else:
            if n_items is None:
                cur_new = list(range(next_fresh, next_fresh + new))
                next_fresh += new
            else:
                outside = np.setdiff1d(np.arange(n_items), prev)
                cur_new = rng.choice(outside, size=new, replace=False).tolist()
            stale = rng.choice(np.asarray(prev), size=k - new, replace=False).tolist() if k > new else []
        order_new = rng.permutation(cur_new).tolist() if cur_new else []
        order_stale = rng.permutation(stale).tolist() if stale else []
        seq.extend(order_new + order_stale)
        prev = cur_new + stale
    return PagingTrace.unit(np.asarray(seq, dtype=np.int64),
                            f"marking_phases(k={k}, phases={phases}, new={new}, n_items={n_items})")


def two_new_per_phase(k: int, phases: int, seed: int | np.random.Generator | None = 0) -> PagingTrace:
    """``phases`` k-phases over ``k + 2`` items, each after the first opening with two items the previous phase did
    not request, then ``k - 2`` of its items in random order (k >= 2).

    Marking pays ``k`` in phase 1 and exactly ``2 + 2 (H_k - H_2) = 2H_k - 1`` in every later phase: the two new
    items fault, and each of the ``k - 2`` stale items is missing with probability 2/u when u unmarked items are
    left.  The optimum pays at most ``phases + k``: ``k`` in phase 1, two cold misses in phase 2, and from phase 3 on
    it enters each phase holding the item that opens it and every item the phase reuses, so it faults once, on the
    second opening item, evicting the first (which the next phase leaves out).  The item it parks for the next
    phase is an item of this phase that the next phase leaves out.  So Marking's ratio tends to ``2H_k - 1``, its
    exact competitive ratio (Achlioptas, Chrobak & Noga, TCS 2000).
    """
    k = integer(k, "k", 2)
    phases = integer(phases, "phases", 1)
    rng = make_rng(seed)
    universe = set(range(k + 2))
    phase = list(range(k))
    seq = list(phase)
    parked, evicted = k, None  # what the optimum holds for the next phase, and what it dropped in this one
    for _ in range(phases - 1):
        opening = sorted(universe - set(phase))
        second = opening[1] if opening[0] == parked else opening[0]
        if evicted is None:
            left_out = [int(x) for x in rng.choice(phase, size=2, replace=False)]
        else:
            others = [x for x in phase if x != evicted]
            left_out = [evicted, int(others[int(rng.integers(len(others)))])]
        stale = [x for x in phase if x not in left_out]
        stale = [stale[i] for i in rng.permutation(len(stale))]
        phase = [parked, second] + stale
        seq.extend(phase)
        evicted, parked = parked, left_out[1]
    return PagingTrace.unit(np.asarray(seq, dtype=np.int64), f"two_new_per_phase(k={k}, phases={phases})")


# One period of a unit paging trace over 4 items on which second-chance Clock with a newly admitted page's bit cleared
# (policies/clock.py) faults 16 times at k = 3, every period alike, and the optimum 5 (found by hill climbing on that
# Clock's ratio, then shrunk request by request while the excess over 3 x OPT kept growing with the repeats;
# tests/test_clock.py recomputes both counts with the engine and the exact optimum).
SECOND_CHANCE_PERIOD = (1, 0, 2, 3, 1, 2, 3, 1, 0, 2, 3, 3, 2, 1, 0, 1, 1, 2, 3, 0, 2, 3, 3, 2, 0)


def second_chance_breaker(repeats: int) -> PagingTrace:
    """:data:`SECOND_CHANCE_PERIOD` repeated ``repeats`` times: Clock-new-unreferenced's cost is ``16 r`` against an
    optimum of ``5 r + 2`` at ``k = 3``, so its excess over ``3 OPT`` is ``r - 6`` and grows without bound: no additive
    constant makes it 3-competitive."""
    integer(repeats, "repeats", 1)
    return PagingTrace.unit(np.tile(np.asarray(SECOND_CHANCE_PERIOD, dtype=np.int64), repeats))
