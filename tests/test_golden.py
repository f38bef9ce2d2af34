"""Golden snapshot of every registered policy's behaviour: cost, misses and a hash of its eviction schedule on a few
seeded traces, per model it supports, committed in ``tests/golden/policies.json``.

Any change in what a policy evicts -- intended or not -- fails here and shows up in review as a diff of that file
(libCacheSim pins exact miss counts per algorithm the same way).  After an intended change, regenerate with
``python -m pytest tests/test_golden.py --regen-golden`` and commit the file with the change that explains it.  A
newly registered policy fails until it is added the same way, so its behaviour is pinned from its first commit.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import policies
from adversary import persistent_attention, topic_shift
from kvcore.atomic import write_text
from kvcore.engine import run
from kvcore.traces import PagingTrace

GOLDEN = Path(__file__).with_name("golden") / "policies.json"
K = {"rm": 5, "nm": 12}
SEEDS = (0, 1)


def workloads() -> dict[str, dict]:
    """model -> {name: trace}: seeded, small, and covering one and several requests per step, unit and varied
    costs (RM), persistent and shifting attention (NM)."""
    rng = np.random.default_rng(2024)
    zipf = PagingTrace.unit(rng.zipf(1.3, size=400) % 12, "zipf 1.3 over 12 items")
    items = rng.integers(0, 10, size=300)
    weighted = PagingTrace(items, (1 + items % 4).astype(float), np.arange(301), "one cost 1..4 per item")
    steps = [rng.choice(9, size=int(rng.integers(1, 3)), replace=False).tolist() for _ in range(150)]
    multi = PagingTrace.from_steps(steps, [[float(1 + (i % 3)) for i in q] for q in steps])
    return {"rm": {"zipf": zipf, "weighted": weighted, "multi-request": multi},
            "nm": {"persistent": persistent_attention(300, 0.5, 16, 0.05, sinks=2, seed=3),
                   "topic shift": topic_shift(300, 60, 6, sinks=2, seed=4).trace}}


def snapshot(name: str, model: str) -> dict:
    info = policies.get(name)
    out = {}
    for wname, trace in workloads()[model].items():
        for seed in SEEDS[:1] if info.deterministic else SEEDS:
            res = run(policies.make(name), trace, K[model], model, seed=seed, record=True)
            schedule = json.dumps(res.evictions, separators=(",", ":")).encode()
            out[f"{wname} seed {seed}"] = {"cost": float(f"{res.cost:.12g}"), "misses": res.misses,
                                           "evictions_sha256": hashlib.sha256(schedule).hexdigest()[:16]}
    return out


CASES = [(i.name, m) for i in policies.all_policies() for m in i.models]


def current() -> dict:
    return {f"{name}/{model}": snapshot(name, model) for name, model in CASES}


def test_golden_file_covers_every_registered_policy_and_model(request):
    if request.config.getoption("--regen-golden"):
        GOLDEN.parent.mkdir(exist_ok=True)
        write_text(GOLDEN, json.dumps(current(), indent=1, sort_keys=True) + "\n")
        pytest.skip("golden snapshot rewritten: review and commit tests/golden/policies.json")
    golden = json.loads(GOLDEN.read_text())
    want = {f"{n}/{m}" for n, m in CASES}
    assert set(golden) == want, (f"run pytest tests/test_golden.py --regen-golden; missing: {sorted(want - set(golden))}"
                                 f", stale: {sorted(set(golden) - want)}")


@pytest.mark.parametrize("name,model", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_policy_behaviour_matches_the_golden_snapshot(name, model, request):
    if request.config.getoption("--regen-golden"):
        pytest.skip("--regen-golden: the snapshot is being rewritten, so there is nothing to compare with")
    golden = json.loads(GOLDEN.read_text()).get(f"{name}/{model}")
    if golden is None:
        pytest.fail(f"{name}/{model} has no golden snapshot: run pytest tests/test_golden.py --regen-golden")
    assert snapshot(name, model) == golden, (f"{name} ({model}) evicts differently than its golden snapshot; if "
                                             "intended, regenerate with --regen-golden and commit the diff")
