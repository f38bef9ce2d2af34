"""The attention-aware policies of the paper (issue 3): hand-worked NM traces, brute-force oracles, the information
rule, Theorem 4's bound for R-LRU-H, and the Section 10 default's random tie-break.

Tokens are 0-based; a row ``{i: a}`` is ``a[t, i]``; ``(t, i)`` in an eviction list means token ``i`` was dropped at
step ``t``.  Every expected eviction below is worked out by hand in the comment above it.
Throughput of every NM policy (20,000 steps, k = 1024, 32 nonzeros per row) is measured by ``python -m bench``.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcore.engine import run, run_nm
from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace, rm_requests_from_attention
from policies import get, make

MINE = ["ACC", "DecayedACC", "H2O", "StreamingLLM", "TOVA", "Scissorhands", "GD-A", "R-LRU-H", "LRFU", "Default"]


def nm(name, rows, k, seed=0, **params):
    return run_nm(make(name, **params), AttentionTrace.from_rows(rows), k, seed=seed, record=True).evictions


@st.composite
def dyadic_traces(draw, max_T: int = 25, max_row: int = 5):
    """Rows whose weights are multiples of 1/16, so every decayed sum with gamma = 1/2 is exact in floating point
    and the brute-force oracles can compare scores with ``==``."""
    T = draw(st.integers(1, max_T))
    rows = []
    for t in range(T):
        toks = draw(st.lists(st.integers(0, t), min_size=1, max_size=min(t + 1, max_row), unique=True))
        cuts = sorted(draw(st.lists(st.integers(1, 15), min_size=len(toks) - 1, max_size=len(toks) - 1)))
        parts = np.diff([0, *cuts, 16])
        rows.append({i: p / 16 for i, p in zip(toks, parts) if p > 0} or {toks[0]: 1.0})
    return AttentionTrace.from_rows(rows)


# -- hand-worked NM traces ---------------------------------------------------------------------------------------------

def test_acc_hand():
    # k = 2.  t0 row {0: 1}: S0 = 1.  t1 row {1: 1}: S1 = 1.
    # t2: token 2 arrives and is protected; 0 and 1 tie at 1 -> the smaller id goes: evict 0.
    #     row {1: .5, 2: .5}: S1 = 1.5, S2 = .5.
    # t3: token 3 protected; candidates 1 (1.5), 2 (.5) -> evict 2.
    rows = [{0: 1.0}, {1: 1.0}, {1: 0.5, 2: 0.5}, {2: 0.5, 3: 0.5}]
    assert nm("ACC", rows, 2) == [(2, 0), (3, 2)]
    # protect_arrival = False: at t2 the arrival's 0 is the least score -> evict 2; row 2 on {0, 1}: S1 = 1.5;
    # t3: 0 (1), 1 (1.5), 3 (0) -> evict 3.
    assert nm("ACC", rows, 2, protect_arrival=False) == [(2, 2), (3, 3)]


def test_decayed_acc_hand():
    # k = 2, rows t0 {0: 1}, t1 {0: .2, 1: .8}.
    # ACC at t2: S0 = 1.2, S1 = .8 -> evict 1; row 2 on {0, 2}: S2 = .5; t3: 0 (1.2) vs 2 (.5) -> evict 2.
    # DecayedACC(1/2) at t2: S0 = .5 + .2 = .7, S1 = .8 -> evict 0 (the old heavy token has decayed);
    #   row 2 on {1, 2}: S1 = .4 + .5 = .9, S2 = .5; t3: 1 (.45) vs 2 (.25) -> evict 2.
    rows = [{0: 1.0}, {0: 0.2, 1: 0.8}, {1: 0.5, 2: 0.5}, {2: 0.5, 3: 0.5}]
    assert nm("ACC", rows, 2) == [(2, 1), (3, 2)]
    assert nm("DecayedACC", rows, 2, gamma=0.5) == [(2, 0), (3, 2)]


def test_h2o_hand():
    # k = 4, recent_fraction 1/2 -> r = 2 recent slots.  Accumulated scores after row 3:
    #   S0 = 1 + .5 + .25 = 1.75, S1 = .5 + .25 + .25 = 1, S2 = .5 + .25 = .75, S3 = .5.
    # t4: window {3, 4}; candidates 0, 1, 2 -> evict 2 (.75), although 3 (.5) is lighter: it is recent.
    #   row {0: .25, 3: .25, 4: .5}: S0 = 2, S3 = .75, S4 = .5.
    # t5: window {4, 5}; 3 has left it; candidates 0 (2), 1 (1), 3 (.75) -> evict 3.
    rows = [{0: 1.0}, {0: 0.5, 1: 0.5}, {0: 0.25, 1: 0.25, 2: 0.5}, {1: 0.25, 2: 0.25, 3: 0.5},
            {0: 0.25, 3: 0.25, 4: 0.5}, {5: 1.0}]
    assert nm("H2O", rows, 4) == [(4, 2), (5, 3)]


def test_streaming_llm_hand():
    # k = 3, one sink: tokens 1, 2, ... leave in arrival order whatever the attention.
    rows = [{0: 1.0}, {1: 1.0}, {1: 1.0}, {1: 1.0}, {1: 1.0}]
    assert nm("StreamingLLM", rows, 3, n_sinks=1) == [(3, 1), (4, 2)]
    # n_sinks >= k: tokens 0, 1 are the sinks (s = min(4, 2)), the window is empty and each arrival goes at once.
    assert nm("StreamingLLM", rows, 2, n_sinks=4) == [(2, 2), (3, 3), (4, 4)]


def test_tova_hand():
    # k = 2.  t2: last row {0: .75, 1: .25}, arrival protected -> evict 1.  row 2 {0: .5, 2: .5}.
    # t3: last row {0: .5, 2: .5}: tie -> smaller id -> evict 0.  row 3 {2: .25, 3: .75}.
    # t4: last row {2: .25, 3: .75} -> evict 2.
    rows = [{0: 1.0}, {0: 0.75, 1: 0.25}, {0: 0.5, 2: 0.5}, {2: 0.25, 3: 0.75}, {4: 1.0}]
    assert nm("TOVA", rows, 2) == [(2, 1), (3, 0), (4, 2)]
    # k = 3: at t3 the last row {0: .5, 2: .5} does not mention 1, which scores 0 -> evict 1 (nothing accumulates:
    # token 1 had all of row 1).
    assert nm("TOVA", [{0: 1.0}, {1: 1.0}, {0: 0.5, 2: 0.5}, {3: 1.0}], 3) == [(3, 1)]


def test_scissorhands_hand():
    # k = 3, history 2, recent 1, threshold = 1/|R_s|.
    # row 0 {0: 1} (thr 1): 0 important.  row 1 {0: .75, 1: .25} (thr 1/2): 0.  row 2 {0: .25, 1: .25, 2: .5}
    #   (thr 1/3): 2.  The window holds rows 1, 2: important counts 0: 1, 2: 1.
    # t3: 3 is recent; rows in window since arrival: 0: 2, 1: 2, 2: 1; unimportance 0: 1, 1: 2, 2: 0 -> evict 1.
    #   row 3 on {0, 2, 3}: {0: .5, 3: .5} (thr 1/3): 0 and 3.  Window rows 2, 3: counts 0: 1, 2: 1, 3: 1.
    # t4: 4 is recent; rows since arrival: 0: 2, 2: 2, 3: 1; unimportance 0: 1, 2: 1, 3: 0; tie -> evict 0.
    rows = [{0: 1.0}, {0: 0.75, 1: 0.25}, {0: 0.25, 1: 0.25, 2: 0.5}, {0: 0.5, 3: 0.5}, {2: 0.5, 4: 0.5}]
    assert nm("Scissorhands", rows, 3, history=2, recent=1) == [(3, 1), (4, 0)]
    # drop_amount 2: at t3 the two most unimportant (1: 2, then the 0/2 order: 0 has 1, 2 has 0) go together;
    # the cache then holds {2, 3} and has room for token 4.
    assert nm("Scissorhands", rows, 3, history=2, recent=1, drop_amount=2) == [(3, 1), (3, 0)]


def test_gda_hand():
    # k = 2, weight = position with T_hint = 4 (w_i = 1 + (i+1)/4: 1.25, 1.5, 1.75, 2), recency tie-break,
    # threshold .01.  Levels E_i = L + c_i, rent L.
    # t0: E0 = 1.25; row {0: 1} refreshes to max(1.25, L + 1.25) = 1.25.   t1: E1 = 1.5; row {0: .5, 1: .5}: no change.
    # t2: E2 = 1.75; least level E0 = 1.25 -> rent L = 1.25, evict 0.
    #     row {1: .5, 2: .5}: E1 = max(1.5, 1.25 + 1.5) = 2.75, E2 = max(1.75, 1.25 + 1.75) = 3.
    # t3: E3 = L + 2 = 3.25; least level E1 = 2.75 -> L = 2.75, evict 1.
    #     row {2: .5, 3: .5}: E2 = max(3, 2.75 + 1.75) = 4.5, E3 = max(3.25, 2.75 + 2) = 4.75: credits 1.75, 2.
    rows = [{0: 1.0}, {0: 0.5, 1: 0.5}, {1: 0.5, 2: 0.5}, {2: 0.5, 3: 0.5}]
    pol = make("GD-A", weight="position", T_hint=4, tiebreak="recency")
    res = run_nm(pol, AttentionTrace.from_rows(rows), 2, record=True)
    assert res.evictions == [(2, 0), (3, 1)]
    assert pol.credit(2) == pytest.approx(1.75) and pol.credit(3) == pytest.approx(2.0)


def test_gda_weighted_rm_hand():
    # RM, weight = fault cost, k = 2; requests (item, cost): t0 (0, 5), t1 (1, 1), t2 (2, 1), t3 (1, 1), t4 (3, 1).
    # t2: levels 0: 5, 1: 1 -> rent L = 1, evict 1 (credit 0); 0 keeps credit 4.
    # t3: 1 misses again: levels 0: 5, 2: 2 (admitted at L = 1 with cost 1) -> L = 2, evict 2.
    # t4: levels 0: 5, 1: 3 -> L = 3, evict 1.  The expensive item 0 survives three evictions (credit 5 - 3 = 2).
    from kvcore.engine import run_rm
    from kvcore.traces import PagingTrace

    trace = PagingTrace.from_steps([[0], [1], [2], [1], [3]], [[5.0], [1.0], [1.0], [1.0], [1.0]])
    pol = make("GD-A", weight="cost")
    assert run_rm(pol, trace, 2, record=True).evictions == [(2, 1), (3, 2), (4, 1)]
    assert pol.credit(0) == pytest.approx(2.0)


def test_rlruh_hand():
    # k = 2, rho*tau = .25, W = 1 (the union is the heavy set of the previous row).
    # t0 row {0: 1}: 0 heavy.  t1 row {0: .9, 1: .1}: 0 heavy again, 1 attended lightly.
    # t2: union {0}; outside it 1 (row 1) and the arrival 2 -> least recently attended is 1: evict 1.
    #     row {0: .2, 2: .8}: 0 light (still heavy at row 1), 2 heavy.
    # t3: union = heavy at row 2 = {2}; 0 has left it; outside: 0 (row 2), 3 (arrival) -> evict 0.
    rows = [{0: 1.0}, {0: 0.9, 1: 0.1}, {0: 0.2, 2: 0.8}, {2: 0.5, 3: 0.5}]
    assert nm("R-LRU-H", rows, 2, rho=0.5, tau=0.5, W=1) == [(2, 1), (3, 0)]
    # W = 2: at t3 token 0 is still in the union (heavy at row 1), so the arrival is the only token outside it.
    assert nm("R-LRU-H", rows, 2, rho=0.5, tau=0.5, W=2) == [(2, 1), (3, 3)]


def test_default_hand():
    # k = 3, one sink, recent floor 1, half-life 1 (gamma = 1/2).
    # t0 sink 0.  t1 token 1 in the floor.  t2: token 1 leaves the floor (pool {1}); no eviction (3 resident).
    #   rows: t1 {0: .5, 1: .5}, t2 {0: .5, 2: .5}: S1 = .25 after row 2, S2 = .5.
    # t3: 2 joins the pool; pool 1 (.25), 2 (.5) -> evict 1.  row {0: .5, 3: .5}: S2 = .25, S3 = .5.
    # t4: 3 joins the pool: 2 (.125) vs 3 (.25) -> evict 2.
    rows = [{0: 1.0}, {0: 0.5, 1: 0.5}, {0: 0.5, 2: 0.5}, {0: 0.5, 3: 0.5}, {4: 1.0}]
    assert nm("Default", rows, 3, recent=1, n_sinks=1, half_life=1.0) == [(3, 1), (4, 2)]


def test_default_random_tie_break_is_uniform_and_seeded():
    # k = 3, one sink, floor 1: at t3 the pool holds tokens 1 and 2, both never attended (score 0): a fair coin.
    rows = [{0: 1.0}] * 4
    victims = [nm("Default", rows, 3, seed=s, recent=1, n_sinks=1)[0][1] for s in range(400)]
    n1 = victims.count(1)
    assert set(victims) == {1, 2}
    assert 140 <= n1 <= 260  # Binomial(400, 1/2): mean 200, sd 10; the band is 6 sd wide
    assert [nm("Default", rows, 3, seed=7, recent=1, n_sinks=1)] * 2 == [nm("Default", rows, 3, seed=7, recent=1,
                                                                           n_sinks=1) for _ in range(2)]


@given(dyadic_traces(), st.integers(1, 6), st.integers(0, 3))
def test_default_with_full_floor_is_streaming_llm(trace, k, sinks):
    """When the floor covers the budget nothing is ranked by score: the floor yields oldest first, the sinks last,
    which is StreamingLLM's rule with s = min(n_sinks, k) sinks."""
    a = run_nm(make("Default", recent=100, n_sinks=sinks), trace, k, record=True).evictions
    b = run_nm(make("StreamingLLM", n_sinks=sinks), trace, k, record=True).evictions
    assert a == b


# -- brute-force oracles on generated traces ---------------------------------------------------------------------------

def _brute_nm(trace: AttentionTrace, k: int, choose) -> list[tuple[int, int]]:
    """Run NM directly: ``choose(t, resident, observed)`` returns the victim; ``observed`` is the list of rows as
    the policy saw them (restricted to the resident tokens)."""
    resident: list[int] = []
    observed: list[dict[int, float]] = []
    out = []
    for t, idx, w in trace.rows():
        resident.append(t)
        if len(resident) > k:
            v = choose(t, list(resident), observed)
            resident.remove(v)
            out.append((t, v))
        observed.append({int(i): float(x) for i, x in zip(idx, w) if int(i) in resident})
    return out


def _decayed_scores(t, resident, observed, gamma):
    return {i: sum(gamma ** (t - 1 - s) * row.get(i, 0.0) for s, row in enumerate(observed)) for i in resident}


@given(dyadic_traces(), st.integers(1, 5), st.sampled_from([1.0, 0.5]), st.booleans())
def test_acc_family_matches_brute_force(trace, k, gamma, protect):
    def choose(t, resident, observed):
        score = _decayed_scores(t, resident, observed, gamma)
        cand = [i for i in resident if not (protect and i == t)]
        return min(cand, key=lambda i: (score[i], i))

    name, params = ("ACC", {}) if gamma == 1.0 else ("DecayedACC", {"gamma": gamma})
    got = run_nm(make(name, protect_arrival=protect, **params), trace, k, record=True).evictions
    assert got == _brute_nm(trace, k, choose)


@given(dyadic_traces(), st.integers(1, 6))
def test_h2o_matches_brute_force(trace, k):
    r = max(1, k // 2)

    def choose(t, resident, observed):
        score = _decayed_scores(t, resident, observed, 1.0)
        return min((i for i in resident if i <= t - r), key=lambda i: (score[i], i))

    assert run_nm(make("H2O"), trace, k, record=True).evictions == _brute_nm(trace, k, choose)


@given(dyadic_traces(), st.integers(1, 5))
def test_tova_matches_brute_force(trace, k):
    def choose(t, resident, observed):
        last = observed[-1] if observed else {}
        return min((i for i in resident if i != t), key=lambda i: (last.get(i, 0.0), i))

    assert run_nm(make("TOVA"), trace, k, record=True).evictions == _brute_nm(trace, k, choose)


@given(dyadic_traces(), st.integers(1, 5), st.integers(1, 4), st.integers(0, 3))
def test_scissorhands_matches_brute_force(trace, k, history, recent):
    def choose(t, resident, observed):
        def unimportant(i):
            rows = range(max(i, t - history), t)  # window rows the token was resident for
            return sum(1 for s in rows if observed[s].get(i, 0.0) < thresholds[s])

        cand = [i for i in resident if i <= t - min(recent, k)]
        return min(cand, key=lambda i: (-unimportant(i), i))

    # the default threshold of row s is 1/|R_s|, the resident count when row s was observed
    thresholds = [1.0 / min(s + 1, k) for s in range(trace.T)]
    got = run_nm(make("Scissorhands", history=history, recent=recent), trace, k, record=True).evictions
    assert got == _brute_nm(trace, k, choose)


# -- the information rule: a spy sees only resident items --------------------------------------------------------------

def _spy(name: str):
    cls = get(name).cls

    class Spy(cls):
        def observe(self, t, items, weights):
            assert set(items.tolist()) <= self.resident, (name, t)
            assert len(set(items.tolist())) == len(items)
            self.seen.append((t, items.copy(), weights.copy()))
            super().observe(t, items, weights)

        def hit(self, t, item, cost):
            assert item in self.resident
            super().hit(t, item, cost)

        def reset(self, capacity, rng, model="rm"):
            self.seen = []
            super().reset(capacity, rng, model)

    Spy.__name__ = f"Spy{cls.__name__}"
    return Spy


@pytest.mark.parametrize("name", MINE)
@given(trace=dyadic_traces(max_T=20), k=st.integers(1, 4))
def test_policies_only_see_resident_attention(name, trace, k):
    spy = _spy(name)()
    run_nm(spy, trace, k)
    dense = trace.to_dense()
    for t, items, weights in spy.seen:
        assert np.array_equal(weights, dense[t, items])  # raw weights, not renormalized
    if "rm" in get(name).models:
        cap = max(k, int(np.diff(rm_requests_from_attention(trace, 0.3).offsets).max()))
        run(_spy(name)(), trace, cap, model="rm", theta=0.3)


# -- Theorem 4 for R-LRU-H -------------------------------------------------------------------------------------------
#
# Theorem 4 as stated assumes (rho, W)-persistence -- a token with a[t, i] >= tau had a[s, i] >= rho*tau at some
# s in [t-W, t-1] -- and that the heavy union fits the budget.  Its proof says the policy "retains that union", but
# in NM a policy can only retain a token that is still resident: a token dropped while it was light and then warmed
# up (attention mass on it is not observed any more) is gone for good, and its later heavy mass is regret the bound
# does not allow.  The first test is that counterexample; the second checks the corrected statement (persistence
# chained back to the token's arrival), under which the bound holds.

def _with_residual(rows: list[dict[int, float]]) -> AttentionTrace:
    """A trace whose rows store ``rows`` and leave the rest of each row's unit mass as residual (unattributed)."""
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.array([i for r in rows for i in sorted(r)], dtype=np.int64)
    weights = np.array([r[i] for r in rows for i in sorted(r)], dtype=np.float64)
    residual = np.maximum(1.0 - np.array([sum(r.values()) for r in rows]), 0.0)
    return AttentionTrace(indptr, indices, weights, residual)


def _stated_assumptions(dense, tau, rho, W, k) -> bool:
    """Theorem 4's assumptions as stated: persistence of every heavy entry, and the union budget (the arriving token
    needs a slot of its own, so the union must fit in k - 1)."""
    T = dense.shape[0]
    for t in range(T):
        for i in np.flatnonzero(dense[t] >= tau):
            if not (dense[max(0, t - W): t, i] >= rho * tau).any():
                return False
        if len(np.flatnonzero((dense[max(0, t - W): t + 1] >= rho * tau).any(axis=0))) > k - 1:
            return False
    return True


def _chained(dense, tau, rho, W) -> bool:
    """The corrected persistence: every token that is ever heavy was warm (>= rho*tau) at its arrival row and at
    least once in every W consecutive rows from then until its last heavy row."""
    for t, i in zip(*np.nonzero(dense >= tau)):
        warm = dense[i: t, i] >= rho * tau
        if not warm[0] or any(not warm[max(0, s - W): s].any() for s in range(1, t - i + 1)):
            return False
    return True


def _tail(dense, tau) -> float:
    return float(np.where(dense < tau, dense, 0.0).sum())


def test_theorem4_as_stated_fails_in_nm():
    # k = 5, rho*tau = .1, tau = .5, W = 1.  Rows 0-5 carry little stored mass (the rest is residual, unattributed).
    # t0..t4: each token gets < tau on its own row; token 0 gets .2 (warm) at row 0 only.
    # t5: first drop; the observed union (row 4 >= .1) is empty and token 0, last attended at row 0, goes.
    #     row 5 gives token 0 .1: warm, but it is no longer resident.
    # t >= 6: rows {0: .8, t-1: .1, t: .1}: token 0 is heavy and persistent (row t-1 gave it >= .1), the union of
    #     rows t-1, t is {0, t-2, t-1, t} (4 = k - 1 tokens): every assumption holds, yet each row costs .8 of
    #     regret against .2 of tail mass.
    n = 40
    rows = [{0: 0.2}] + [{t: 0.09} for t in range(1, 5)] + [{0: 0.1, 5: 0.09}]
    rows += [{0: 0.8, t - 1: 0.1, t: 0.1} for t in range(6, n)]
    trace = _with_residual(rows)
    dense = trace.to_dense()
    tau, rho, W, k = 0.5, 0.2, 1, 5
    assert _stated_assumptions(dense, tau, rho, W, k)
    assert not _chained(dense, tau, rho, W)  # token 0 went cold between row 0 and row 5
    res = run_nm(make("R-LRU-H", rho=rho, tau=tau, W=W), trace, k, record=True)
    assert res.evictions[0] == (5, 0)
    tail = _tail(dense, tau)
    assert tail == pytest.approx(0.2 + 4 * 0.09 + 0.1 + 0.09 + 0.2 * (n - 6))
    assert res.cost == pytest.approx(0.1 + 0.8 * (n - 6))
    assert res.cost > tail


def _chain_persistent_trace(T: int, seed: int, tau: float, rho: float, max_active: int = 3) -> AttentionTrace:
    """Rows in which only "active" tokens are ever heavy; an active token is warm on its arrival row and is given at
    least rho*tau on every row until it retires, after which it only gets light mass.  The rest of each row is spread
    over three other recent tokens below rho*tau, and the remainder is left as residual (unattributed) mass."""
    rng = np.random.default_rng(seed)
    active: list[int] = []
    retired: set[int] = set()
    rows = []
    for t in range(T):
        row: dict[int, float] = {}
        for i in list(active):
            if rng.random() < 0.04:
                active.remove(i)
                retired.add(i)
                continue
            row[i] = tau * (1.0 + 0.3 * rng.random()) if rng.random() < 0.5 else rho * tau * (1.0 + 0.5 * rng.random())
        if len(active) < max_active and rng.random() < 0.3:
            active.append(t)
            row[t] = rho * tau * (1.0 + 0.5 * rng.random())
        rest = 1.0 - sum(row.values())
        tail = [i for i in range(max(0, t - 20), t + 1) if i not in row][-3:]
        each = min(0.9 * rho * tau, rest / max(len(tail), 1))
        for i in tail:
            row[i] = each
        rows.append(row)
    return _with_residual(rows)


@pytest.mark.parametrize("seed", range(6))
def test_theorem4_corrected_bound(seed):
    tau, rho, W, k = 0.15, 0.5, 2, 10
    trace = _chain_persistent_trace(150, seed, tau, rho)
    dense = trace.to_dense()
    assert _stated_assumptions(dense, tau, rho, W, k) and _chained(dense, tau, rho, W)
    res = run_nm(make("R-LRU-H", rho=rho, tau=tau, W=W), trace, k, record=True)
    tail_per_step = np.where(dense < tau, dense, 0.0).sum(axis=1)
    # the proof's per-step statement: only sub-tau tokens are ever missing, so regret_t <= tail_t at every step
    assert (res.per_step <= tail_per_step + 1e-12).all()
    assert res.cost <= _tail(dense, tau) + 1e-9
    # the assumptions matter: a recency window of the same budget does lose heavy tokens on these traces
    window = run_nm(make("StreamingLLM", n_sinks=0), trace, k, record=True)
    assert (window.per_step > tail_per_step + 1e-12).any()


# -- persistable state -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, params, restored", [
    ("ACC", {}, 1.5),                      # the score comes back as it was
    ("DecayedACC", {"gamma": 0.5}, 0.1875),  # 1.5 observed at step 0, decayed to step 3: 1.5 / 8
])
def test_score_policies_persist(name, params, restored):
    pol = make(name, **params)
    pol.reset(2, np.random.default_rng(0))
    pol.admit(0, 9, 1.0)
    pol.observe(0, np.array([9]), np.array([1.5]))
    state = pol.export_state(9)
    pol.drop(1, 9)
    pol.admit(3, 9, 1.0)
    pol.import_state(3, 9, state)
    assert pol.score(9) == pytest.approx(restored)


def test_gda_persists_credit_and_attention():
    pol = make("GD-A", weight="cost", gamma=0.5)
    pol.reset(2, np.random.default_rng(0))
    pol.admit(0, 4, 3.0)
    pol.observe(0, np.array([4]), np.array([1.0]))
    state = pol.export_state(4)
    pol.drop(1, 4)
    pol.admit(2, 4, 1.0)
    pol.import_state(2, 4, state)
    assert pol.credit(4) == pytest.approx(3.0)  # max(new weight 1, stored credit 3)
    assert pol.recent_attention(4) == pytest.approx(0.25)  # 1 decayed over 2 steps


# -- metadata and parameters -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MINE)
def test_metadata(name):
    info = get(name)
    assert info.citation and info.summary and "nm" in info.models
    assert info.deterministic == (name != "Default")
    assert info.cls.persistable == (name in {"ACC", "DecayedACC", "GD-A", "LRFU"})


@pytest.mark.parametrize("name, params, word", [
    ("DecayedACC", {"gamma": 1.0}, "gamma"), ("ACC", {"protect_arrival": 1}, "protect_arrival"),
    ("H2O", {"recent_fraction": 1.5}, "recent_fraction"), ("H2O", {"recent_tokens": 0}, "recent_tokens"),
    ("StreamingLLM", {"n_sinks": -1}, "n_sinks"),
    ("Scissorhands", {"history": 0}, "history"), ("GD-A", {"weight": "heavy"}, "weight"),
    ("GD-A", {"weight": "position"}, "T_hint"), ("GD-A", {"tiebreak": "random"}, "tiebreak"),
    ("R-LRU-H", {"W": 0}, "W"), ("Default", {"recent": 0}, "half_life"), ("Default", {"half_life": 0.0}, "half_life"),
])
def test_bad_parameters_name_the_parameter(name, params, word):
    with pytest.raises(ParameterError, match=word):
        make(name, **params)
