"""The closed loop's scaled products at and below the diagonal (realtrace.quality.replay.causal_scores), against the
full product: torch only, no model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from realtrace.quality.replay import SCORE_BLOCK, causal_scores  # noqa: E402


@pytest.mark.parametrize("T", [1, 7, SCORE_BLOCK - 1, SCORE_BLOCK, SCORE_BLOCK + 1, 2 * SCORE_BLOCK - 1, 2 * SCORE_BLOCK,
                               2 * SCORE_BLOCK + 1, 3 * SCORE_BLOCK + 45, 1996])
def test_causal_scores_equal_the_full_product_bit_for_bit_below_the_diagonal(T):
    gen = torch.Generator().manual_seed(T)
    query, key = torch.randn(3, T, 64, generator=gen), torch.randn(3, T, 64, generator=gen)
    full = torch.matmul(query, key.transpose(1, 2)).mul_(0.125)
    lower = torch.tril(torch.ones(T, T, dtype=torch.bool))
    assert torch.equal(causal_scores(torch, query, key, 0.125)[:, lower], full[:, lower])
