"""The block workload (adversary/block_workload.py) and the block study (theorems/results/blocks.py) at small size."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adversary.block_workload import (BlockWorkloadParams, block_capacity, decode_block, encode_block,
                                      generate_block_workload)
from kvcore.engine import RMSimulator
from kvcore.errors import ParameterError
from policies import make
from theorems.results.blocks import ALPHAS, FLAT_PTS, StudyProfile, alpha_sweep_summary, run_blocks, run_block_study

SMALL = BlockWorkloadParams(steps=1500, n_sequences=12, system_blocks=8, prompt_blocks_min=16, prompt_blocks_max=48,
                            heavy_blocks=4, topic_blocks=4, idle_gap_mean=300.0, turn_tokens_mean=40.0)
CAPACITY = 60
POLICIES = [("LRU", {}), ("LFU", {}), ("EMA-Block", {"alpha": 0.05}), ("EMA-Block", {"alpha": 0.3,
                                                                                     "unattended": "hold"}),
            ("Persistent", {"policy": "LFU"}), ("Persistent", {"policy": "EMA-Block", "params": {"alpha": 0.01}})]


@pytest.fixture(scope="module")
def small():
    return generate_block_workload(SMALL, seed=5)


def test_block_keys_round_trip_and_reject_out_of_range():
    for seq, blk in [(0, 0), (0, 31), (3, 2**20 - 1), (1000, 17)]:
        assert decode_block(encode_block(seq, blk)) == (seq, blk)
    assert encode_block(1, 0) == 2**20
    for seq, blk in [(-1, 0), (1, -1), (1, 2**20)]:
        with pytest.raises(ParameterError):
            encode_block(seq, blk)


def test_workload_is_well_formed(small):
    assert small.T == SMALL.steps and small.offsets[0] == 0 and small.offsets[-1] == small.accesses
    trace = small.paging_trace()  # PagingTrace validation: distinct items per step, non-negative ids
    assert trace.T == small.T
    assert (small.scores > 0).all()
    per_step = np.add.reduceat(small.scores, small.offsets[:-1])
    assert (per_step < 1.0).all()  # the "rest" of the row is never read
    seqs = small.items >> 20
    # every step reads the attention sink (sequence 0, block 0)
    assert all(0 in small.items[a:b] for a, b in zip(small.offsets[:-1], small.offsets[1:]))
    assert seqs.max() >= SMALL.n_sequences  # conversations ended and were replaced


def test_same_seed_same_workload_other_seed_other_workload(small):
    again = generate_block_workload(SMALL, seed=5)
    assert np.array_equal(again.items, small.items) and np.array_equal(again.scores, small.scores)
    assert np.array_equal(again.offsets, small.offsets)
    other = generate_block_workload(SMALL, seed=6)
    assert not np.array_equal(other.items[:200], small.items[:200])


def test_bad_workload_parameters():
    for bad in ({"steps": 0}, {"n_sequences": -1}, {"topic_shift_prob": 1.5}, {"heavy_reads": 5, "heavy_blocks": 4},
                {"prompt_blocks_min": 8, "heavy_blocks": 16}, {"conc_rest": 0.0}, {"system_reads": 32},
                {"turn_tokens_mean": 0.5}):
        with pytest.raises(ParameterError):
            BlockWorkloadParams(**bad)
    with pytest.raises(ParameterError):
        block_capacity(0)


@pytest.mark.parametrize("name, params", POLICIES)
def test_hit_rates_are_rates(small, name, params):
    r = run_blocks(make(name, **params), small, CAPACITY)
    assert r["hits"] + r["misses"] == r["accesses"] == small.accesses
    assert 0.0 <= r["hit_rate"] <= 1.0
    # cold misses count: at least one miss per distinct block, so every non-cold miss is a re-admission
    assert r["readmissions"] >= 0


def test_capacity_above_footprint_only_cold_misses(small):
    for name, params in POLICIES:
        r = run_blocks(make(name, **params), small, small.footprint)
        assert r["misses"] == small.footprint and r["readmissions"] == 0


@pytest.mark.parametrize("name, params", [("LFU", None), ("EMA-Block", {"alpha": 0.01}),
                                          ("EMA-Block", {"alpha": 0.15, "unattended": "hold"})])
def test_persistence_changes_nothing_before_the_first_readmission(small, name, params):
    runs = []
    for pol in (make(name, **(params or {})), make("Persistent", policy=name, params=params)):
        sim = RMSimulator(pol, CAPACITY, record=True)
        for items, scores in small.steps():
            sim.step(items.tolist(), None, (items, scores))
        runs.append(sim)
    plain, kept = runs
    evicted, t1 = set(), None
    by_step = {}
    for t, v in plain.evictions:
        by_step.setdefault(t, []).append(v)
    for t, (items, _) in enumerate(small.steps()):
        if evicted.intersection(items.tolist()):
            t1 = t
            break
        evicted.update(by_step.get(t, []))
    assert t1 is not None  # this workload does re-admit at this budget
    assert [e for e in kept.evictions if e[0] <= t1] == [e for e in plain.evictions if e[0] <= t1]


def _row(alpha, rate):
    return {"params": {"alpha": alpha}, "hit_rate": rate}


def test_alpha_sweep_summary_shapes():
    peak = [0.30, 0.32, 0.40, 0.50, 0.35, 0.28, 0.27]
    s = alpha_sweep_summary([_row(a, r) for a, r in zip(ALPHAS, peak)], lru=0.26, lfu=0.20)
    assert s["best_alpha"] == 0.05 and s["non_monotone"] and s["interior_optimum"]
    assert s["interior_margin_pts"] == pytest.approx(20.0) and s["smallest_alpha_closer_to"] == "LRU"
    flat = [0.5 + (1e-5 if i == 2 else 0.0) for i in range(len(ALPHAS))]  # a one-read wiggle is not a shape
    s = alpha_sweep_summary([_row(a, r) for a, r in zip(ALPHAS, flat)], lru=0.5, lfu=0.2)
    assert not s["non_monotone"] and not s["interior_optimum"] and s["max_abs_diff_from_lru_pts"] < FLAT_PTS
    falling = [0.6 - 0.05 * i for i in range(len(ALPHAS))]
    s = alpha_sweep_summary([_row(a, r) for a, r in zip(ALPHAS, falling)], lru=0.1, lfu=0.3)
    assert s["best_alpha"] == 0.5 and not s["non_monotone"] and not s["interior_optimum"]


def test_study_tables_are_json_and_reproducible():
    profile = StudyProfile("test", steps=600, seeds=(1,), readings=("decay",))
    params = BlockWorkloadParams(steps=600, n_sequences=12, system_blocks=8, prompt_blocks_min=16,
                                 prompt_blocks_max=48, heavy_blocks=4, topic_blocks=4)
    a = run_block_study(profile, params)
    b = run_block_study(profile, params)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    sweep = a["alpha_sweep"]["decay"]
    assert [r["params"]["alpha"] for r in sweep["rows"][: len(ALPHAS)]] == list(ALPHAS)
    assert all(0.0 <= r["hit_rate"] <= 1.0 for r in sweep["rows"])
    bound = a["upper_bound"]["hit_rate_per_seed"][0]
    assert all(r["hit_rate"] <= bound + 1e-12 for r in sweep["rows"])  # Belady (relaxed) bounds every policy
    assert {r["policy"] for r in a["persistence"]["decay"]["rows"]} == {
        "LFU", "EMA-Block(alpha=0.01, beta=0.001, unattended=decay)",
        "EMA-Block(alpha=0.15, beta=0.001, unattended=decay)"}


def test_unknown_profile():
    with pytest.raises(ParameterError):
        run_block_study("huge")


@pytest.mark.parametrize("unattended", ["decay", "hold"])
@given(seq=st.lists(st.integers(0, 9), min_size=1, max_size=120), weights=st.lists(st.floats(0, 1), min_size=120,
                                                                                     max_size=120),
       capacity=st.integers(2, 6))
def test_small_alpha_limit_is_lru_not_lfu(unattended, seq, weights, capacity):
    """As alpha -> 0 every score is at most alpha * (number of observations), so the priority tends to the recency
    decay alone, which orders blocks by last access: EMA-Block becomes LRU (not LFU).  At alpha = 1e-9 on a
    one-request-per-step trace of <= 120 steps the score term (< 1.2e-7) cannot reorder two distinct ages (their
    recency decays differ by more than 1e-4 at beta = 0.001), so the eviction sequences are equal."""
    runs = []
    for pol in (make("EMA-Block", alpha=1e-9, unattended=unattended), make("LRU")):
        sim = RMSimulator(pol, capacity, record=True)
        for item, w in zip(seq, weights):
            sim.step([item], None, (np.array([item]), np.array([w])))
        runs.append(sim.evictions)
    assert runs[0] == runs[1]
