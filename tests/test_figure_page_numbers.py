"""The figure page's (seed 002) worked numbers, recomputed with the EMA-Block policy's own functions and compared at
the page's own precision.

Disagreements found (each test below asserts the *computed* value and says what the page prints):

1. EMA table, rows 2-5: carried at full precision the sequence is 0.0225, 0.027375, 0.04100625, 0.0429559375,
   0.058308140625, i.e. 0.023 (0.0225 rounded half up), 0.027, 0.041, 0.043, 0.058 at three decimals; the page prints
   0.028, 0.042, 0.044, 0.059.  The page's numbers are reproduced exactly by rounding every intermediate score to
   three decimals before the next step (its "Calculation" column indeed uses 0.023, 0.028, 0.042, 0.044).
2. Block B: ``(1 - 0.02) * (1 - e^-2) = 0.98 * 0.864665 = 0.847372`` -> 0.847; the page's 0.848 comes from
   multiplying by the rounded decay 0.865.
3. Block A under the LRFU reading: the page scores block A with 0.059 although it was accessed 50 steps ago.  If
   0.059 is the score at that access and unattended steps decay the score (the policy's default reading), the score
   50 steps later is ``0.059 * 0.95^50 = 0.0045`` and the priority is 0.049, not 0.046.  The page's 0.046 is the
   "hold" reading (or 0.059 read as the current score); arithmetic at full precision agrees with 0.046.

Everything else (raw mean 0.26, half-life 13.5, decay 63% / 86% / 0.049, the four decision-matrix cells, 5.00 MiB
per 16-token block) agrees.
"""

from decimal import ROUND_HALF_UP, Decimal

import math

import numpy as np
import pytest

from adversary.block_workload import BLOCK_MODEL, TOKENS_PER_BLOCK, block_bytes, block_capacity
from kvcore.engine import RMSimulator
from kvcore.formulas import GiB, MiB, kv_block_bytes
from policies import make
from kvcore.formulas import ema_decayed, ema_half_life, ema_update, eviction_priority, recency_decay

RAW = (0.45, 0.12, 0.30, 0.08, 0.35)
PAGE_EMA = (0.023, 0.028, 0.042, 0.044, 0.059)
ALPHA, BETA = 0.05, 0.001


def at(x: float, places: int) -> float:
    """Round half up at ``places`` decimals (the page's convention: it prints 0.0225 as 0.023)."""
    return float(Decimal(repr(x)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def ema_chain(values, alpha, round_each_step=False):
    score, out = 0.0, []
    for v in values:
        score = ema_update(score, v, alpha)
        if round_each_step:
            score = at(score, 3)
        out.append(score)
    return out


def test_ema_table_full_precision_against_hand_arithmetic():
    # exact decimal arithmetic done by hand: 0.05*0.45 = 0.0225; 0.006 + 0.95*0.0225 = 0.027375; ...
    exact = (0.0225, 0.027375, 0.04100625, 0.0429559375, 0.058308140625)
    assert ema_chain(RAW, ALPHA) == pytest.approx(exact, abs=1e-15)


def test_ema_table_disagrees_with_page_at_its_precision_in_rows_2_to_5():
    computed = [at(s, 3) for s in ema_chain(RAW, ALPHA)]
    assert computed == [0.023, 0.027, 0.041, 0.043, 0.058]
    # the page's printed column: differs by one unit in the third decimal from row 2 on (disagreement 1)
    assert [c == p for c, p in zip(computed, PAGE_EMA)] == [True, False, False, False, False]


def test_page_ema_table_is_the_chain_with_intermediates_rounded_to_three_decimals():
    assert ema_chain(RAW, ALPHA, round_each_step=True) == list(PAGE_EMA)


def test_ema_table_through_the_policy_itself():
    """The policy's stored score follows the same chain when one block is observed with the page's scores."""
    pol = make("EMA-Block", alpha=ALPHA, beta=BETA)
    sim = RMSimulator(pol, capacity=2)
    for t, w in enumerate(RAW):
        sim.step([7], None, (np.array([7]), np.array([w])))
        assert pol.score(7, t) == pytest.approx(ema_chain(RAW[: t + 1], ALPHA)[-1], abs=1e-15)


def test_raw_mean():
    assert at(math.fsum(RAW) / len(RAW), 2) == 0.26


def test_half_life():
    h = ema_half_life(ALPHA)
    assert at(h, 1) == 13.5
    # definition check: an unattended score halves over the half-life
    assert ema_decayed(1.0, h, ALPHA) == pytest.approx(0.5, rel=1e-12)


def test_recency_decay_values():
    assert round(100 * recency_decay(1000, BETA)) == 63
    assert round(100 * recency_decay(2000, BETA)) == 86
    assert at(recency_decay(2000, BETA), 3) == 0.865
    assert at(recency_decay(50, BETA), 3) == 0.049  # the factor used for block A
    # characteristic time 1/beta = 1000 steps = 100 s at 10 tokens per second
    assert (1 / BETA) / 10 == pytest.approx(100.0)


def test_block_a_kept_and_block_b_evicted():
    p_a = eviction_priority(0.059, 50, BETA)
    p_b = eviction_priority(0.02, 2000, BETA)
    assert at(p_a, 3) == 0.046
    assert at(p_b, 3) == 0.847  # the page prints 0.848 (0.98 * 0.865 with the rounded decay): disagreement 2
    assert at(0.98 * 0.865, 3) == 0.848
    assert p_a < p_b  # A is kept, B is evicted
    # with the full-precision EMA of the table instead of 0.059, block A still gives 0.046
    assert at(eviction_priority(ema_chain(RAW, ALPHA)[-1], 50, BETA), 3) == 0.046


def test_block_a_under_the_lrfu_reading_gives_0_049():
    """Disagreement 3: under time decay of the score, block A's priority 50 steps after its access is 0.049."""
    decayed = ema_decayed(0.059, 50, ALPHA)
    assert at(decayed, 4) == 0.0045
    assert at(eviction_priority(decayed, 50, BETA), 3) == 0.049


@pytest.mark.parametrize("score, steps, page_p", [(0.85, 20, 0.003), (0.72, 3000, 0.266), (0.05, 10, 0.009),
                                                  (0.03, 5000, 0.963)])
def test_decision_matrix_cells(score, steps, page_p):
    assert at(eviction_priority(score, steps, BETA), 3) == page_p


def test_block_of_16_tokens_is_5_mib_for_llama2_70b():
    assert (BLOCK_MODEL.layers, BLOCK_MODEL.kv_heads, BLOCK_MODEL.head_dim, BLOCK_MODEL.bytes_per_elem) == \
        (80, 8, 128, 2)
    assert TOKENS_PER_BLOCK == 16
    # 2 (K and V) * 80 * 8 * 128 * 2 bytes = 327680 bytes per token; * 16 = 5242880 = 5 * 2**20
    assert kv_block_bytes(16, 80, 8, 128, 2) == 5 * 2**20
    assert f"{block_bytes() / MiB:.2f}" == "5.00"


def test_32_gib_budget_holds_6553_blocks():
    # 32 GiB / 5 MiB = 32 * 1024 / 5 = 6553.6 blocks; a partial block holds nothing
    assert block_capacity(32.0) == 6553
    assert block_capacity(32.0) * block_bytes() <= 32 * GiB < (6553 + 1) * block_bytes()
