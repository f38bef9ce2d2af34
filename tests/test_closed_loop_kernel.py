"""The compiled closed loop (kvcore.closed_loop) equals the Python path of the quality study's closed loop.

Reference = :func:`realtrace.quality.replay.run_head`: the registered policy object driven through
:class:`kvcore.engine.NMSimulator` (contract checked every step), observing rows through
:class:`~realtrace.quality.replay.ModelObserved`.  On random score tensors -- continuous, or small integers so that
rows hold exact ties -- every KV head's drop vector must be identical, for FIFO, StreamingLLM, TOVA, H2O, ACC, LRU,
Scissorhands, GD-A, Random and the Section 10 Default (same seeds) with drawn parameters, at capacities from 1 to
past ``T``, on complete rows and on top-``m`` rows; the kernel's plain-Python form (``py_func``, what runs without
numba) too.  Cases the random draws rarely reach have their own tests (LRU at its threshold, GD-A's pinned
positions, the default's underflow and equal positive scores).  The shared observation is checked against numpy's
softmax and a sorted top-``m`` reference; the dispatch falls back for anything that is not exactly a paired class.
No model and no torch needed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import policies
from kvcore.closed_loop import ClosedLoopRule, closed_loop_drops, observed_row_kernel, rule_for
from policies.tova import TOVA
from realtrace.quality.replay import ClosedLoop


@st.composite
def policy_specs(draw):
    """``(registered name, parameters)`` of a policy with a compiled rule, parameters drawn over their range."""
    name = draw(st.sampled_from(["TOVA", "H2O", "H2O", "StreamingLLM", "FIFO", "ACC", "LRU", "LRU", "Scissorhands",
                                 "Scissorhands", "GD-A", "GD-A", "Random", "Default", "Default"]))
    if name == "Default":
        # a half-life of 0.05 steps passes the lazy decay's rescaling point after 13 steps and soon underflows
        # the scores it rescales (back to the zero pool)
        return name, {"recent": draw(st.integers(1, 6)), "n_sinks": draw(st.integers(0, 4)),
                      "half_life": draw(st.sampled_from([None, 0.05, 0.5, 3.0]))} | (
            {"recent": 0, "half_life": 1.0} if draw(st.booleans()) and draw(st.booleans()) else {})
    if name == "GD-A":
        # gamma 0.01 and 0.001 pass the lazy decay's rescaling point (scale 2^256) after ~39 and ~26 steps
        return name, {"threshold": draw(st.sampled_from([0.0, 0.01, 0.2, math.inf])),
                      "gamma": draw(st.sampled_from([0.9, 0.3, 0.01, 0.001])),
                      "weight": draw(st.sampled_from(["auto", "unit", "zero"])), "n_pinned": draw(st.integers(0, 4))}
    if name == "Scissorhands":
        return name, {"history": draw(st.sampled_from([1, 2, 5, 64])), "recent": draw(st.integers(0, 6)),
                      "threshold": draw(st.sampled_from([None, None, 0.0, 0.05, 0.3]))}
    if name == "ACC":
        return name, {"protect_arrival": draw(st.booleans())}
    if name == "LRU":
        # weights of a row over <= 40 positions: 1/40 is typical, so these thresholds split rows both ways
        return name, {"threshold": draw(st.sampled_from([0.0, 0.005, 0.03, 0.2, 0.6]))}
    if name == "H2O":
        if draw(st.booleans()):
            return name, {"recent_tokens": draw(st.integers(1, 12))}
        return name, {"recent_fraction": draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0]))}
    if name == "StreamingLLM":
        return name, {"n_sinks": draw(st.integers(0, 6))}
    return name, {}


@st.composite
def layers(draw):
    """``(scores (kv_heads * rep, T, T) float32, kv_heads, capacity, top)``."""
    kv_heads, rep, T = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        scores = rng.integers(-2, 3, size=(kv_heads * rep, T, T))  # coarse: many exactly equal weights
    else:
        scores = rng.normal(size=(kv_heads * rep, T, T)) * draw(st.sampled_from([0.1, 3.0, 40.0]))
    capacity = draw(st.integers(1, T + 2))
    top = draw(st.one_of(st.none(), st.integers(1, 6)))
    return scores.astype(np.float32), kv_heads, capacity, top


@given(spec=policy_specs(), layer=layers(), seed=st.integers(0, 3))
def test_compiled_closed_loop_gives_the_python_paths_schedules(spec, layer, seed):
    scores, kv_heads, k, top = layer
    factory = policies.resolve(*spec)
    fast = ClosedLoop(factory, k, seed=seed, top=top)
    got = fast.layer_drops(2, kv_heads, scores)
    slow = ClosedLoop(factory, k, seed=seed, top=top, compiled=False)
    want = slow.layer_drops(2, kv_heads, scores)
    assert (fast.compiled_layers, slow.compiled_layers) == (1, 0)
    assert np.array_equal(got, want), f"{spec} k={k} top={top}"
    rule = rule_for(factory(), k)
    rngs = [np.random.default_rng([seed, 2, g]) for g in range(kv_heads)]
    assert np.array_equal(closed_loop_drops(scores, kv_heads, k, top, rule, compiled=False, rngs=rngs), want)
    if not rule.reads_rows(top):    # then the pass computes no scores: the same schedule without them
        assert not fast.reads_rows()
        assert np.array_equal(fast.layer_drops(2, kv_heads, scores[:, :, :0]), want)


@pytest.mark.parametrize("recent,n_sinks", [(3, 2), (5, 0), (1, 4)])
def test_the_default_is_streamingllm_while_its_floor_and_sinks_cover_the_budget(recent, n_sinks):
    """:func:`policies.kernels.default_rule`: for ``n_sinks < k <= recent + n_sinks`` the compiled default is
    StreamingLLM's window with ``n_sinks`` sinks (reading no rows), outside that range its own rule; at every
    capacity around both edges its schedule equals the policy object's, which reads its rows (continuous and coarse
    scores, the latter full of ties the default would draw among)."""
    rng = np.random.default_rng(recent * 10 + n_sinks)
    factory = policies.resolve("Default", {"recent": recent, "n_sinks": n_sinks})
    for scores in (rng.normal(size=(6, 30, 30)) * 3, rng.integers(-2, 3, size=(6, 30, 30))):
        scores = scores.astype(np.float32)
        for k in range(1, recent + n_sinks + 4):
            rule = rule_for(factory(), k)
            assert (rule.kind == "streaming") == (n_sinks < k <= recent + n_sinks), (k, rule)
            want = ClosedLoop(factory, k, seed=1, compiled=False).layer_drops(0, 2, scores)
            assert np.array_equal(ClosedLoop(factory, k, seed=1).layer_drops(0, 2, scores), want), k


@given(layer=layers())
def test_the_observation_is_the_softmax_over_the_resident_set(layer):
    """Weights against numpy's softmax (float64) of a random resident set; the listed entries against a sorted
    top-``m`` reference (largest weights, ties to the smaller position)."""
    scores, _, _, top = layer
    rep, T = scores.shape[0], scores.shape[1]
    rng = np.random.default_rng(T)
    t = T - 1
    items = np.flatnonzero(rng.random(T) < 0.6)
    items = np.union1d(items, [t]).astype(np.int64)
    s = scores[:, t, items].astype(np.float64)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)).mean(axis=0)
    listed, w = observed_row_kernel(scores, t, items, 0)
    assert np.array_equal(listed, items)
    np.testing.assert_allclose(w, want, rtol=1e-12, atol=1e-300)
    m = top or 1
    kept, wk = observed_row_kernel(scores, t, items, m)
    chosen = sorted(sorted(range(items.size), key=lambda j: (-w[j], items[j]))[:m])
    assert np.array_equal(kept, items[chosen]) and np.array_equal(wk, w[chosen])
    # a row of equal scores: every weight ties, so the m smallest positions are the ones kept
    flat = np.zeros_like(scores)
    kept, wk = observed_row_kernel(flat, t, items, m)
    assert np.array_equal(kept, items[:m]) and np.allclose(wk, 1.0 / items.size)


class OldestFirstTOVA(TOVA):
    """Not TOVA: drops the oldest older position, whatever the attention."""

    def victim(self, t, protected):
        return min(self.resident)


def test_the_dispatch_falls_back_for_everything_not_exactly_a_paired_policy():
    rng = np.random.default_rng(5)
    kv_heads, T, k = 2, 30, 6
    scores = rng.normal(size=(kv_heads * 3, T, T)).astype(np.float32) * 3
    assert rule_for(policies.make("TOVA"), k) == ClosedLoopRule("tova")
    assert rule_for(policies.make("H2O", recent_fraction=0.25), 8) == ClosedLoopRule("h2o", 2)
    assert rule_for(policies.make("StreamingLLM", n_sinks=9), k) == ClosedLoopRule("streaming", k)
    assert rule_for(policies.make("ACC"), k) == ClosedLoopRule("h2o", 1)
    assert rule_for(policies.make("LRU", threshold=0.1), k) == ClosedLoopRule("lru", threshold=0.1)
    assert rule_for(policies.make("Scissorhands"), k) == ClosedLoopRule("scissorhands", 6, -1.0, 64)
    assert rule_for(policies.make("Scissorhands", drop_amount=2), k) is None   # batched drops: the engine
    assert rule_for(policies.make("GD-A"), k) == ClosedLoopRule("gda", 0, 0.01, gamma=0.9, weight=1.0)
    assert rule_for(policies.make("GD-A", tiebreak="recency"), k) is None
    assert rule_for(policies.make("Random"), k) == ClosedLoopRule("random")
    shadowed = policies.make("TOVA")
    shadowed.victim = lambda t, protected: min(shadowed.resident)
    factories = {"a subclass": OldestFirstTOVA, "a policy with no rule": policies.resolve("DecayedACC"),
                 "a module:Class policy": policies.resolve("tests.test_closed_loop_kernel:OldestFirstTOVA"),
                 "a shadowed method": lambda: shadowed, "a wrapper": policies.resolve("SinkPinned")}
    for what, factory in factories.items():
        assert rule_for(factory(), k) is None, what
    tova = ClosedLoop(policies.resolve("TOVA"), k).layer_drops(0, kv_heads, scores)
    for what, factory in [("a subclass", OldestFirstTOVA), ("DecayedACC", policies.resolve("DecayedACC"))]:
        plan = ClosedLoop(factory, k)
        got = plan.layer_drops(0, kv_heads, scores)
        assert plan.compiled_layers == 0, what
        assert np.array_equal(got, ClosedLoop(factory, k, compiled=False).layer_drops(0, kv_heads, scores)), what
        assert not np.array_equal(got, tova), what  # the kernel's TOVA would have given these
    # instances that do not all follow one rule: the Python path, head by head
    made = iter([policies.make("TOVA"), policies.make("H2O")] * 2)
    mixed = ClosedLoop(lambda: next(made), k)
    mixed.layer_drops(0, kv_heads, scores)
    assert mixed.compiled_layers == 0


def test_which_rules_read_rows():
    reads = {(kind, threshold, top): ClosedLoopRule(kind, threshold=threshold).reads_rows(top)
             for kind in ("fifo", "streaming", "tova", "h2o", "lru") for threshold in (0.0, 0.1) for top in (None, 4)}
    assert [key for key, r in reads.items() if not r] == [("fifo", t, m) for t in (0.0, 0.1) for m in (None, 4)] + [
        ("streaming", t, m) for t in (0.0, 0.1) for m in (None, 4)] + [("lru", 0.0, None)]
    # the plan decides for the pass; a policy without a compiled rule, or the Python path, always needs rows
    assert not ClosedLoop(policies.resolve("StreamingLLM"), 8).reads_rows()
    assert ClosedLoop(policies.resolve("StreamingLLM"), 8, compiled=False).reads_rows()
    assert ClosedLoop(policies.resolve("DecayedACC"), 8).reads_rows()
    # a factory whose later instances differ from the first is caught rather than run on missing rows
    made = iter([policies.make("FIFO"), policies.make("TOVA"), policies.make("FIFO")])
    mixed = ClosedLoop(lambda: next(made), 4)
    assert not mixed.reads_rows()
    with pytest.raises(RuntimeError, match="no scores"):
        mixed.layer_drops(0, 2, np.zeros((2, 10, 0), np.float32))


def test_a_bad_layer_shape_is_refused():
    with pytest.raises(ValueError, match="KV heads"):
        closed_loop_drops(np.zeros((4, 5, 5), np.float32), 3, 2, None, ClosedLoopRule("tova"))
    with pytest.raises(ValueError, match="KV heads"):     # TOVA reads rows: width 0 is not enough
        closed_loop_drops(np.zeros((4, 5, 0), np.float32), 2, 2, None, ClosedLoopRule("tova"))
    with pytest.raises(ValueError, match="must be one of"):
        ClosedLoopRule("lfu")


@pytest.mark.parametrize("name", ["TOVA", "H2O", "ACC", "LRU", "Scissorhands", "GD-A"])
def test_on_top_rows_an_unlisted_position_gets_nothing(name):
    """With ``top = 2`` most resident positions are not listed in a row: TOVA must score them 0 (not their weight
    in an older row), H2O and ACC must add nothing to them, LRU must not count them as used, Scissorhands must not
    count them as important, GD-A must neither refresh nor decay-add them.  Several long layers, where these cases
    decide victims."""
    rng = np.random.default_rng(11)
    scores = (rng.normal(size=(3 * 2, 120, 120)) * 2).astype(np.float32)
    for k in (5, 9, 17):
        factory = policies.resolve(name)
        fast = ClosedLoop(factory, k, top=2)
        assert np.array_equal(fast.layer_drops(0, 3, scores),
                              ClosedLoop(factory, k, top=2, compiled=False).layer_drops(0, 3, scores))
        assert fast.compiled_layers == 1


def test_lru_counts_a_weight_equal_to_its_threshold_as_a_use():
    """Rows whose resident weights are exactly 1/2 (two positions at score 0, the rest at -100: the rest's share is
    below half an ulp of 2) and threshold 1/2: the policy's ``weights >= threshold`` uses the two, so LRU is not FIFO
    here; the compiled rule must agree on every head."""
    rng = np.random.default_rng(3)
    heads, T, k = 3, 60, 4
    scores = np.full((heads, T, T), -100.0, np.float32)
    for h in range(heads):
        for t in range(T):
            scores[h, t, rng.choice(t + 1, size=min(2, t + 1), replace=False)] = 0.0
    lru = policies.resolve("LRU", {"threshold": 0.5})
    fast = ClosedLoop(lru, k)
    got = fast.layer_drops(0, heads, scores)
    assert fast.compiled_layers == 1
    assert np.array_equal(got, ClosedLoop(lru, k, compiled=False).layer_drops(0, heads, scores))
    assert not np.array_equal(got, ClosedLoop(policies.resolve("FIFO"), k).layer_drops(0, heads, scores))


def test_gda_never_drops_a_pinned_position_even_without_refreshes():
    """With ``threshold = inf`` no row refreshes a level, so only the arrival's infinite weight keeps GD-A's pinned
    positions: the compiled rule must keep them (and agree with the engine) while every other position goes."""
    rng = np.random.default_rng(7)
    scores = (rng.normal(size=(2 * 3, 50, 50)) * 3).astype(np.float32)
    gda = policies.resolve("GD-A", {"n_pinned": 2, "threshold": math.inf})
    fast = ClosedLoop(gda, 5)
    got = fast.layer_drops(0, 2, scores)
    assert fast.compiled_layers == 1
    assert np.array_equal(got, ClosedLoop(gda, 5, compiled=False).layer_drops(0, 2, scores))
    assert (got[:, :2] == 50).all() and (got[:, 2:45] < 50).all()


def test_default_scores_that_underflow_return_to_the_zero_pool():
    """The Section 10 default with half-life 0.05 steps (gamma = 2^-20) on top-1 rows that list only the newest
    position: each position is scored once, leaves the floor with that score, and decays until a rescaling of the
    lazy decay turns it into exactly 0 -- the policy then moves it back to its zero pool, whose members are drawn at
    random first.  The compiled rule must follow it there, draw for draw."""
    T, heads, k = 300, 2, 80    # positions live ~80 steps; their scores underflow after ~54 (from step 65 on)
    scores = np.broadcast_to(np.arange(T, dtype=np.float32) * 5.0, (heads * 3, T, T)).copy()
    default = policies.resolve("Default", {"recent": 2, "n_sinks": 1, "half_life": 0.05})
    fast = ClosedLoop(default, k, seed=4, top=1)
    got = fast.layer_drops(0, heads, scores)
    assert fast.compiled_layers == 1
    assert np.array_equal(got, ClosedLoop(default, k, seed=4, top=1, compiled=False).layer_drops(0, heads, scores))


def test_default_draws_among_equal_positive_scores():
    """Exactly equal positive scores, where the policy draws among all of them (ascending positions): positions
    ``p`` and ``p + 1`` share one column from ``p + 1``'s arrival on, below the others, and ``p``'s weight before
    is exactly 0, so the two carry bit-identical decayed scores (at K = 6 the pool's least score is such a pair at
    least once; ``test_default_pair_ties_happen`` below checks that the engine path draws there)."""
    got, want = _default_on_pairs(compiled=True), _default_on_pairs(compiled=False)
    assert np.array_equal(got, want)


def _default_on_pairs(compiled, seeds=range(8)):
    T = 40
    s = np.zeros((T, T), np.float32)
    for p in range(0, T - 1, 2):
        s[p + 1:, p] = s[p + 1:, p + 1] = -2.0
        s[:p + 1, p] = -1000.0
    scores = np.broadcast_to(s, (3, T, T)).copy()
    default = policies.resolve("Default", {"recent": 3, "n_sinks": 0})
    return np.stack([ClosedLoop(default, 6, seed=seed, compiled=compiled).layer_drops(0, 1, scores)
                     for seed in seeds])


def test_default_pair_ties_happen(monkeypatch):
    from policies.default_policy import DefaultPolicy

    ties = []
    draw = DefaultPolicy.pick_tie
    monkeypatch.setattr(DefaultPolicy, "pick_tie", lambda self, t: ties.append(len(t) * (not self._zero)) or
                        draw(self, t))
    _default_on_pairs(compiled=False)
    assert max(ties) >= 2
