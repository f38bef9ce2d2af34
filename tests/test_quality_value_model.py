"""``quality OPT:value`` in the real model (needs the [real] extra and the model wheel, skipped with the reason
otherwise; CI installs both): the command line as a user types it on a short prompt, and on the model's own rows and
values each of the two lazy optima no worse than the other on its own cost, head by head."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.model_fixture import shared_model


TEXT = "The secret word is apple. Repeat the secret word.\nThe secret word is"


@pytest.fixture(scope="module")
def lm():
    return shared_model()  # the process's one model: shared with the other quality tests


def test_quality_opt_value_on_the_command_line(lm, tmp_path, capsys):
    """``paper_check quality OPT:value --budget 6 --prompts-file F --workers 0 --json``: both optima run (OPT is
    always added), both lazy at the budget, the value optimum solved exactly (gap 0), every run reporting its
    value-weighted cost beside the regret."""
    from paper_check.cli import main

    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "word", "text": TEXT, "answer": " apple"}) + "\n")
    code = main(["quality", "OPT:value", "--budget", "6", "--prompts-file", str(path), "--workers", "0", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    res = json.loads(out)
    runs = {r["config"]: r for r in res["runs"]}
    assert set(runs) == {"OPT:value", "OPT", "full cache"}
    for name in ("OPT:value", "OPT"):
        t = runs[name]["total"]
        assert runs[name]["max_resident"] == 6 and runs[name]["kind"] == "opt"
        assert t["value_stream"] > 0 and t["regret_stream"] > 0
    assert abs(runs["OPT:value"]["total"]["opt_gap"]) < 1e-9
    assert runs["full cache"]["total"]["value_stream"] == 0


def test_each_optimum_wins_on_its_own_cost_in_the_model(lm):
    """On every layer and KV head of a 48-token prompt at K = 12: the value optimum's value-weighted cost is at most
    the mass optimum's and the mass optimum's regret at most the value optimum's (correctly rounded sums of the
    same entries: exact), and the two differ on some head."""
    from realtrace.quality.exact import lazy_optimum
    from realtrace.quality.optima import opt_schedule
    from realtrace.quality.run import PromptIds, _Reference, tokenize_prompts
    from realtrace.quality.value_cost import total_cost, value_costs

    ids = list(tokenize_prompts(["kv-24-12"], lm.tokenizer)[0].ids[:48])
    ref = _Reference(lm, PromptIds("short", "test", tuple(ids), 44, ""), (12,), [])
    drops, gap = opt_schedule(ref, "OPT:value", 12, None)
    assert np.abs(gap).max() < 1e-9
    parted = 0
    for layer in range(ref.L):
        for g in range(ref.H):
            rows = ref.rows(layer, g)
            a = rows.numpy()
            costs = value_costs(a, ref.values(layer, g))
            by_mass = lazy_optimum(rows, 12)[0]
            by_value = drops[layer, g]
            assert total_cost(costs, by_value) <= total_cost(costs, by_mass), (layer, g)
            assert total_cost(a, by_mass) <= total_cost(a, by_value), (layer, g)
            parted += total_cost(costs, by_value) < total_cost(costs, by_mass)
    assert parted > 0
