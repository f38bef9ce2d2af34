"""Hand-worked traces for every classic policy, tie rules, and statistics of the randomized ones.

Every expected value below is worked out by hand in the comment above it (items are 0-based; ``t`` counts from 0;
"[a b c]" lists the cache in the policy's own order).  Randomized policies are checked for seeded reproducibility
and against exact expectations with a confidence interval whose number of seeds is stated.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import policies
from kvcore.engine import NMSimulator, RMSimulator, run
from kvcore.errors import ParameterError
from kvcore.formulas import harmonic
from kvcore.traces import AttentionTrace, PagingTrace, rm_requests_from_attention

SEQ = [0, 1, 2, 0, 3, 1, 4, 0]  # shared by the LRU / FIFO / LIFO / FWF traces, k = 3


def _run(name, seq_or_trace, k, seed=0, **params):
    trace = seq_or_trace if isinstance(seq_or_trace, PagingTrace) else PagingTrace.unit(seq_or_trace)
    return run(policies.make(name, **params), trace, k, seed=seed, record=True)


# -- deterministic classic policies ------------------------------------------------------------------------------------


def test_lru_hand_worked():
    # t0-2 miss 0,1,2 -> [0 1 2]; t3 hit 0 -> [1 2 0]; t4 miss 3 evicts 1 -> [2 0 3]; t5 miss 1 evicts 2 -> [0 3 1];
    # t6 miss 4 evicts 0 -> [3 1 4]; t7 miss 0 evicts 3.  Misses: t0,1,2,4,5,6,7 = 7.
    r = _run("LRU", SEQ, 3)
    assert r.misses == 7 and r.cost == 7
    assert r.evictions == [(4, 1), (5, 2), (6, 0), (7, 3)]


def test_fifo_hand_worked():
    # admission order 0,1,2; t3 hit; t4 miss 3 evicts 0 -> [1 2 3]; t5 hit 1 (no reorder); t6 miss 4 evicts 1 ->
    # [2 3 4]; t7 miss 0 evicts 2.  Misses: t0,1,2,4,6,7 = 6.
    r = _run("FIFO", SEQ, 3)
    assert r.misses == 6
    assert r.evictions == [(4, 0), (6, 1), (7, 2)]


def test_lifo_hand_worked():
    # stack 0,1,2; t3 hit; t4 miss 3 evicts the newest, 2 -> [0 1 3]; t5 hit 1; t6 miss 4 evicts 3 -> [0 1 4];
    # t7 hit 0.  Misses: t0,1,2,4,6 = 5.
    r = _run("LIFO", SEQ, 3)
    assert r.misses == 5
    assert r.evictions == [(4, 2), (6, 3)]


def test_lifo_not_competitive():
    # Sleator-Tarjan: after 0..k-1, alternating k, k-1 makes LIFO evict the item requested next every time: every
    # one of the 2m alternating requests faults, on top of k cold misses.  Belady faults once more (evicts 0).
    k, m = 4, 10
    seq = list(range(k)) + [k, k - 1] * m
    assert _run("LIFO", seq, k).misses == k + 2 * m


def test_fwf_hand_worked():
    # t0-2 miss -> {0,1,2}; t3 hit; t4 miss 3 with a full cache flushes 0,1,2 -> {3}; t5 miss 1 -> {3,1};
    # t6 miss 4 -> {3,1,4}; t7 miss 0 flushes 1,3,4 -> {0}.  Misses 7; six evictions in two flushes.
    r = _run("FWF", SEQ, 3)
    assert r.misses == 7
    assert r.evictions == [(4, 0), (4, 1), (4, 2), (7, 1), (7, 3), (7, 4)]


def test_fwf_keeps_items_requested_at_the_flush_step():
    # k=2: [0], [1], then step 2 requests 0 (hit) and 2 (miss): the flush removes 1 only, 0 stays.
    r = _run("FWF", PagingTrace.from_steps([[0], [1], [0, 2]]), 2)
    assert r.evictions == [(2, 1)] and r.misses == 3


def test_lfu_hand_worked_tie_rule_and_reset():
    # k=3, sequence 0 1 2 3 1 0 4 3; counts in brackets, "lu" = last use.
    # t0-2: miss 0,1,2, counts {0:1, 1:1, 2:1}.  t3 miss 3: all counts 1, tie -> least recently used = 0, evicted.
    # t4 hit 1 -> count 2.  t5 miss 0 (its count was reset to nothing at eviction, starts again at 1):
    #   candidates 2 (count 1, lu t2), 3 (count 1, lu t3), 1 (count 2) -> evict 2.
    # t6 miss 4: 3 (1, lu t3), 0 (1, lu t5), 1 (2) -> evict 3.
    # t7 miss 3: 0 (1, lu t5), 4 (1, lu t6) -> evict 0.  (Without the reset, 0 would have count 2 and 4 would go.)
    r = _run("LFU", [0, 1, 2, 3, 1, 0, 4, 3], 3)
    assert r.evictions == [(3, 0), (5, 2), (6, 3), (7, 0)]
    assert r.misses == 7


@pytest.mark.parametrize("k,m", [(2, 3), (3, 4), (5, 6)])
def test_lfu_unbounded_sequence(k, m):
    # p_1^m ... p_{k-1}^m (x y)^{m-1}: the p's reach count m, so x and y keep evicting each other (count 1 each):
    # LFU pays (k-1) cold misses + every one of the 2(m-1) alternating requests (SPEC section 5).
    seq = [p for p in range(k - 1) for _ in range(m)] + [k - 1, k] * (m - 1)
    assert _run("LFU", seq, k).misses == (k - 1) + 2 * (m - 1)


def test_lfu_against_the_optimum_grows_without_bound():
    # On the same sequence the optimum pays k+1: k-1 cold misses, x cold, then y evicts one p_i for good
    # (SPEC section 5), so LFU/OPT = ((k-1) + 2(m-1)) / (k+1) grows linearly in m.
    from kvcore.optima import optimum

    k = 3
    for m in (2, 5, 9):
        seq = PagingTrace.unit([p for p in range(k - 1) for _ in range(m)] + [k - 1, k] * (m - 1))
        assert optimum(seq, k).cost == k + 1
        assert _run("LFU", seq, k).cost == (k - 1) + 2 * (m - 1)


def test_lfu_persistence_hooks():
    # count at eviction is exported; importing it adds the admission's own count
    pol = policies.make("LFU")
    sim = RMSimulator(pol, 2)
    for q in ([0], [0], [0], [1]):
        sim.step(q)
    assert pol.export_state(0) == 3
    pol.import_state(4, 1, 3)  # item 1 (count 1) returns with a history of 3 requests
    assert pol.export_state(1) == 4


# -- Landlord ---------------------------------------------------------------------------------------------------------


def _landlord_steps(beta):
    pol = policies.make("Landlord", beta=beta)
    sim = RMSimulator(pol, 2, record=True)
    credits = []
    for item, cost in [(0, 4.0), (1, 2.0), (2, 3.0), (0, 4.0), (1, 2.0), (2, 3.0)]:
        sim.step([item], [cost])
        credits.append({i: pol.credit(i) for i in sorted(sim.resident)})
    return sim.result(), credits


def test_landlord_weighted_beta_half():
    # k=2; requests (item:cost) 0:4, 1:2, 2:3, 0:4, 1:2, 2:3; beta = 0.5.
    # t0 credit {0:4}; t1 {0:4, 1:2}; t2 miss 2: rent = min(4,2) = 2 -> {0:2, 1:0}, evict 1, {0:2, 2:3}.
    # t3 hit 0: 2 + 0.5*(4-2) = 3 -> {0:3, 2:3}.
    # t4 miss 1: rent 3 -> both at 0: tie -> least recently used = 2 (used t2; 0 used t3), evict 2 -> {0:0, 1:2}.
    # t5 miss 2: rent 0, 0 has zero credit -> evict 0 -> {1:2, 2:3}.  Cost 4+2+3+2+3 = 14, 5 misses.
    res, credits = _landlord_steps(0.5)
    assert res.evictions == [(2, 1), (4, 2), (5, 0)]
    assert res.cost == 14 and res.misses == 5
    assert credits[3] == {0: 3.0, 2: 3.0}
    assert credits[4] == {0: 0.0, 1: 2.0}
    assert credits[5] == {1: 2.0, 2: 3.0}


def test_landlord_weighted_beta_zero():
    # Same requests, beta = 0 (hits never refresh).  t3 hit 0 keeps credit 2 -> {0:2, 2:3}.
    # t4 miss 1: rent 2 -> {0:0, 2:1}, evict 0 -> {2:1, 1:2}.  t5: 2 is resident, a hit.  Cost 4+2+3+2 = 11.
    res, credits = _landlord_steps(0.0)
    assert res.evictions == [(2, 1), (4, 0)]
    assert res.cost == 11 and res.misses == 4
    assert credits[4] == {1: 2.0, 2: 1.0}


def test_landlord_weighted_beta_one():
    # beta = 1: t3 hit resets 0 to 4 -> {0:4, 2:3}; t4 rent 3 -> {0:1, 2:0}, evict 2 -> {0:1, 1:2};
    # t5 rent 1 -> {0:0, 1:1}, evict 0 -> {1:1, 2:3}.  Cost 14.
    res, credits = _landlord_steps(1.0)
    assert res.evictions == [(2, 1), (4, 2), (5, 0)]
    assert credits[4] == {0: 1.0, 1: 2.0}
    assert credits[5] == {1: 1.0, 2: 3.0}


unit_steps = st.integers(1, 4).flatmap(lambda k: st.tuples(st.just(k), st.lists(
    st.lists(st.integers(0, k + 3), min_size=1, max_size=k, unique=True), max_size=40)))


@given(unit_steps)
def test_unit_cost_landlord_with_full_reset_is_lru(case):
    # Young 2002: with equal costs and full reset, Landlord with LRU among zero-credit items is LRU (also with several
    # requests per step).
    k, steps = case
    trace = PagingTrace.from_steps(steps) if steps else PagingTrace.unit([])
    a = run(policies.make("Landlord", beta=1.0), trace, k, record=True)
    b = run(policies.make("LRU"), trace, k, record=True)
    assert a.evictions == b.evictions


@pytest.mark.parametrize("beta", [-0.1, 1.5, float("nan"), "1"])
def test_landlord_rejects_bad_beta(beta):
    with pytest.raises(ParameterError, match="beta") as e:
        policies.make("Landlord", beta=beta)
    assert "\n" not in str(e.value)


def test_landlord_persistence_restores_no_less_than_admission_credit():
    pol = policies.make("Landlord")
    sim = RMSimulator(pol, 2)
    sim.step([0], [5.0])
    assert pol.export_state(0) == 5.0
    pol.import_state(1, 0, 0.0)  # a zero stored credit never lowers the admission credit
    assert pol.credit(0) == 5.0
    pol.import_state(1, 0, 7.0)
    assert pol.credit(0) == 7.0


# -- Balance ----------------------------------------------------------------------------------------------------------


def test_balance_weighted_hand_worked():
    # k=2, slot counters D start at 0.  Requests (item:cost) 0:5, 1:1, 2:1, 3:1, 1:1, 4:1.
    # t0 0 -> slot A (D_A=5); t1 1 -> slot B (D_B=1); t2 miss 2: least D is B (1) -> evict 1, D_B = 2;
    # t3 miss 3: B (2) < A (5) -> evict 2, D_B = 3; t4 miss 1: evict 3, D_B = 4; t5 miss 4: evict 1, D_B = 5.
    # The expensive item 0 stays although it is never requested again (LRU would have evicted it at t3).
    trace = PagingTrace.from_steps([[0], [1], [2], [3], [1], [4]], [[5.0], [1.0], [1.0], [1.0], [1.0], [1.0]])
    r = _run("Balance", trace, 2)
    assert r.evictions == [(2, 1), (3, 2), (4, 3), (5, 1)]
    assert r.cost == 10


def test_balance_ignores_hits_and_ties_go_to_oldest():
    # k=2 unit costs, 0 1 0 2: D_A = D_B = 1 at t2; the hit on 0 changes nothing; t3 tie -> oldest admission, 0.
    assert _run("Balance", [0, 1, 0, 2], 2).evictions == [(3, 0)]
    assert _run("LRU", [0, 1, 0, 2], 2).evictions == [(3, 1)]


@given(st.integers(1, 4), st.lists(st.integers(0, 7), max_size=50))
def test_unit_cost_balance_is_fifo(k, seq):
    # With unit costs slot counters grow round-robin, so "least D, oldest first" is "oldest admission": FIFO.
    a = _run("Balance", seq, k)
    b = _run("FIFO", seq, k)
    assert a.evictions == b.evictions


# -- randomized policies ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Random", "Marking"])
def test_randomized_seeded_reproducibility(name):
    rng = np.random.default_rng(11)
    trace = PagingTrace.unit(rng.integers(0, 9, size=300))
    runs = [_run(name, trace, 4, seed=s).evictions for s in (5, 5, 6)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def _chi_square(counts):
    counts = np.asarray(counts, dtype=float)
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


# chi-square critical values at p = 0.001 (2 and 3 degrees of freedom)
CHI2_999 = {2: 13.816, 3: 16.266}


def test_random_victim_is_uniform():
    # k=4, requests 0 1 2 3 4: the victim at t4 is uniform on {0,1,2,3}; 4000 seeds.
    counts = np.zeros(4)
    for s in range(4000):
        (_, v), = _run("Random", [0, 1, 2, 3, 4], 4, seed=s).evictions
        counts[v] += 1
    assert _chi_square(counts) < CHI2_999[3]


def test_random_never_evicts_protected_and_is_uniform_on_the_rest():
    # k=4; step 4 requests 0 (hit) and 4: victim uniform on {1,2,3}, never 0; 3000 seeds.
    trace = PagingTrace.from_steps([[0], [1], [2], [3], [0, 4]])
    counts = np.zeros(4)
    for s in range(3000):
        (_, v), = _run("Random", trace, 4, seed=s).evictions
        counts[v] += 1
    assert counts[0] == 0
    assert _chi_square(counts[1:]) < CHI2_999[2]


def test_marking_requested_items_stay_marked_through_a_new_phase():
    # k=2: [0], [1], then [0, 2]: 0 is hit at step 2, so the new phase unmarks only 1, which is the victim for every
    # seed.
    trace = PagingTrace.from_steps([[0], [1], [0, 2]])
    for s in range(50):
        assert _run("Marking", trace, 2, seed=s).evictions == [(2, 1)]


def test_marking_phase_is_deterministic_once_unmarked_run_out():
    # k=3, 0 1 2 3 4 5: t3 starts a phase (all of 0,1,2 unmarked); t3, t4, t5 evict 0,1,2 in a random order, never the
    # marked 3 or 4; afterwards the cache is {3,4,5} for every seed and 3 is a hit.
    for s in range(50):
        r = _run("Marking", [0, 1, 2, 3, 4, 5, 3], 3, seed=s)
        assert sorted(v for _, v in r.evictions) == [0, 1, 2]
        assert r.misses == 6


def test_marking_coin_flip_frequency():
    # k=2, 0 1 0 2 1: misses at t0, t1, t3; t3 starts a phase and evicts 0 or 1 with probability 1/2; if 1 went, t4
    # faults (4 misses in all), else t4 hits (3 misses).  2000 seeds; binomial(2000, 1/2) has sd 22.4, bound 5 sd.
    n = 2000
    outcomes = [_run("Marking", [0, 1, 0, 2, 1], 2, seed=s).misses for s in range(n)]
    assert set(outcomes) == {3, 4}
    assert abs(outcomes.count(4) - n / 2) <= 5 * math.sqrt(n / 4)


def test_marking_expected_cost_on_the_cycle_is_h_k_per_phase():
    # Cyclic requests over k+1 items: each phase is k consecutive requests with exactly one new item; the new item
    # faults and the i-th stale request faults with probability 1/(k-i+1) (Fiat et al. 1991, Sec. 3), so after the
    # k cold misses of phase 1 the expected cost is H_k per phase.  200 seeds, 4-standard-error interval.
    k, phases = 4, 40
    seq = [i % (k + 1) for i in range(k + k * phases)]
    misses = np.array([_run("Marking", seq, k, seed=s).misses for s in range(200)], dtype=float)
    expected = k + phases * harmonic(k)
    se = misses.std(ddof=1) / math.sqrt(misses.size)
    assert abs(misses.mean() - expected) <= 4 * se, (misses.mean(), expected, se)
    assert _run("LRU", seq, k).misses == len(seq)  # the deterministic contrast: LRU faults on every request


def test_marking_nm_never_drops_the_arriving_token():
    # NM: the arriving token is marked on arrival, so the victim is always an older token.
    rng = np.random.default_rng(3)
    T, k = 60, 4
    rows = []
    for t in range(T):
        w = rng.dirichlet(np.ones(t + 1))
        rows.append({i: float(x) for i, x in enumerate(w)})
    trace = AttentionTrace.from_rows(rows)
    pol = policies.make("Marking", threshold=0.3)
    sim = NMSimulator(pol, k, seed=1, record=True)
    for t, idx, w in trace.rows():
        sim.step(idx, w)
    assert sim.evictions and all(v != t for t, v in sim.evictions)


@pytest.mark.parametrize("name", ["Marking", "LRU"])
@pytest.mark.parametrize("threshold", [-0.5, 1.01, float("nan")])
def test_attention_thresholds_must_be_in_unit_interval(name, threshold):
    with pytest.raises(ParameterError, match="threshold") as e:
        policies.make(name, threshold=threshold)
    assert name in str(e.value) and "\n" not in str(e.value)


def test_nm_lifo_keeps_the_first_k_tokens():
    # In NM the arriving token is the newest admission, so LIFO drops it at once: tokens 0..k-1 stay forever.
    trace = AttentionTrace.from_dense(np.tril(np.ones((8, 8))) / np.arange(1, 9)[:, None])
    pol = policies.make("LIFO")
    sim = NMSimulator(pol, 3, record=True)
    for t, idx, w in trace.rows():
        sim.step(idx, w)
    assert sim.resident == frozenset({0, 1, 2})
    assert sim.evictions == [(t, t) for t in range(3, 8)]


@pytest.mark.parametrize("name", ["LRU", "FIFO", "FWF", "LIFO", "LFU", "Random", "Marking", "Landlord", "Balance"])
def test_rm_classic_policies_ignore_attention_rows(name):
    # In RM a classic policy reacts to requests only: running on the attention trace (which also feeds the rows to
    # observe) must give the same evictions as running on the derived request sequence alone, seed for seed.
    rng = np.random.default_rng(4)
    rows = [{i: float(x) for i, x in enumerate(rng.dirichlet(np.full(t + 1, 0.3)))} for t in range(40)]
    att = AttentionTrace.from_rows(rows)
    with_rows = run(policies.make(name), att, 4, model="rm", theta=0.3, seed=9, record=True)
    requests_only = run(policies.make(name), rm_requests_from_attention(att, 0.3), 4, seed=9, record=True)
    assert with_rows.evictions == requests_only.evictions and with_rows.evictions
