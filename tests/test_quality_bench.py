"""The quality bench (realtrace.quality.bench) through its command line, and the closed loop's scaled products at and
below the diagonal (realtrace.quality.replay.causal_scores) against the full product (torch only; the bench loads
the model and runs with --runslow)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from realtrace.quality.replay import SCORE_BLOCK, causal_scores  # noqa: E402


@pytest.mark.parametrize("T", [1, 7, SCORE_BLOCK - 1, SCORE_BLOCK, SCORE_BLOCK + 1, 2 * SCORE_BLOCK - 1,
                               2 * SCORE_BLOCK, 2 * SCORE_BLOCK + 1, 3 * SCORE_BLOCK + 45, 1996])
def test_causal_scores_equal_the_full_product_bit_for_bit_below_the_diagonal(T):
    gen = torch.Generator().manual_seed(T)
    query, key = torch.randn(3, T, 64, generator=gen), torch.randn(3, T, 64, generator=gen)
    full = torch.matmul(query, key.transpose(1, 2)).mul_(0.125)
    lower = torch.tril(torch.ones(T, T, dtype=torch.bool))
    assert torch.equal(causal_scores(torch, query, key, 0.125)[:, lower], full[:, lower])


@pytest.mark.slow
def test_the_quality_bench_runs_and_its_paths_agree():
    """``python -m realtrace.quality.bench`` on 200 tokens: every timing is positive, and each pair it times computes
    the same thing -- the compiled and the Python closed loop the same schedule, the two charges the same values, the
    optimum by columns and on every exit the same schedules and costs."""
    import json

    from tests.command_line import run_module

    code, out, err = run_module("realtrace.quality.bench", "--tokens", "200", "--budget", "16", "--repeats", "1",
                                "--json", timeout=1800)
    assert code == 0, err[-2000:]
    res = json.loads(out)
    assert res["same_schedule"] and res["same_charges"] and res["same_optimum"]
    assert min(res[key] for key in ("plain_sdpa_s", "masked_s", "closed_compiled_s", "optimum_columns_s",
                                    "optimum_all_arcs_s")) > 0
