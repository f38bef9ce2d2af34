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


def test_the_model_bench_refuses_an_unknown_model_in_one_line():
    """``python -m realtrace.quality.bench --models smollm2-135m,/no/such``: one line naming ``--model``, exit 2,
    before any model is loaded or copied."""
    from tests.command_line import is_one_line_error, run_module

    code, out, err = run_module("realtrace.quality.bench", "--models", "smollm2-135m,/no/such")
    assert is_one_line_error(code, err, "--model /no/such: no such file or directory"), (code, err)


@pytest.mark.slow
def test_the_model_bench_times_each_model_in_its_own_process(tmp_path):
    """The model bench on SmolLM2 alone: the child's JSON is read, its costs are positive, the ratio to itself is 1."""
    import json

    from tests.command_line import run_module
    from tests.model_fixture import needs_model

    needs_model()
    code, out, err = run_module("realtrace.quality.bench", "--models", "smollm2-135m", "--prompt",
                                "kv-24-12", "--budget", "32", "--cache-dir", str(tmp_path), "--json")
    assert code == 0, err
    (row,) = json.loads(out)["models"]
    assert row["model"] == "smollm2-135m" and row["full_cache_right"] is True
    assert row["wall_s"] > 0 and row["cpu_s"] > 0 and row["max_rss_gb"] > 0.1 and row["kl_stream"] >= 0
    assert row["wall_s_ratio"] == row["cpu_s_ratio"] == row["max_rss_gb_ratio"] == 1.0
