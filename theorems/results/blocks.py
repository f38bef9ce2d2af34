"""The figure page's block study (seed 002), rerun on the toolkit's own block workload: the alpha sweep and the
persistent-state ablation.  A library module: it returns JSON-able tables; claims and figures read them.

What is measured (SPEC section 4, block study): the recompute model with refetch on miss, one item per
``(sequence, block)`` of 16 tokens (:mod:`adversary.block_workload`), a budget of ``BUDGET_GIB`` = 32 GiB turned into
``floor(32 GiB / 5 MiB)`` = 6553 blocks (Llama-2-70B, Eq. 2), and ``hit rate = hits / block accesses`` (cold misses
count).  Each step's block reads are the engine's requests and their attention scores reach the policy through the
engine's observe channel (:class:`kvcore.engine.RMSimulator`, every contract check on).

Tables:

* ``alpha_sweep``: EMA-Block (:mod:`policies.ema_block`, ``beta`` = 0.001) at ``ALPHAS``, plus LRU and LFU for
  reference, once per reading of an unattended step (``"decay"``: LRFU, the policy's default; ``"hold"``: the reading
  of the page's worked examples).  Summary: best alpha, whether the curve is non-monotone (it rises and falls by
  more than ``FLAT_PTS``) with an interior optimum (the best alpha is neither end of the grid and beats both ends by
  more than ``FLAT_PTS``), and how the smallest alpha compares with LRU and LFU (the page says there is no
  convergence onto LFU as alpha -> 0).
* ``persistence``: LFU, EMA-Block alpha = 0.01 and alpha = 0.15, each plain and wrapped in
  :class:`policies.persistent_state.Persistent`; the gain in percentage points, and whether the largest (and every)
  gain exceeds the spread between the plain policies of the sweep, LRU and LFU included (the page's "larger than the
  whole spread between policies").
* ``upper_bound``: Belady on the block reads flattened to one request per step.  Flattening only relaxes the
  multi-request problem, so this hit rate is at least the offline optimum's: no policy can beat it.

The page's hit rates came from traces that are not available; this study reproduces the *shape* or shows it does
not reproduce, on a stated generative workload.  Hit rates are means over the profile's workload seeds, with the
per-seed values.  Run: ``python -m theorems.results.blocks [quick|full]`` prints the JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import policies
from adversary.block_workload import (BLOCK_MODEL, BlockWorkload, BlockWorkloadParams, block_bytes,
                                      block_capacity, generate_block_workload)
from kvcore.engine import RMSimulator
from kvcore.errors import KVToolkitError, ParameterError
from kvcore.formulas import MiB
from kvcore.traces import PagingTrace
from policies.fast import simulate_fast

BUDGET_GIB = 32.0
BETA = 0.001
ALPHAS = (0.5, 0.3, 0.15, 0.05, 0.01, 0.003, 0.001)
READINGS = ("decay", "hold")
ABLATION = (("LFU", {}), ("EMA-Block", {"alpha": 0.01}), ("EMA-Block", {"alpha": 0.15}))
# Hit-rate differences below this many percentage points (~160 of the quick profile's 160k reads) count as no change
# when the shape of the alpha curve is judged: a one-read difference must not make a flat curve "non-monotone".
FLAT_PTS = 0.1


@dataclass(frozen=True)
class StudyProfile:
    """How large the study is: workload length, workload seeds, readings of an unattended step."""

    name: str
    steps: int
    seeds: tuple[int, ...]
    readings: tuple[str, ...]

    def as_dict(self) -> dict:
        return asdict(self)


# quick: the default run (about 20 s on one core); the "hold" reading's victim search is a full scan, so it is in
# the full profile only.
QUICK = StudyProfile("quick", steps=20_000, seeds=(0,), readings=("decay",))
FULL = StudyProfile("full", steps=60_000, seeds=(0, 1, 2), readings=READINGS)
PROFILES = {p.name: p for p in (QUICK, FULL)}


def run_blocks(policy, workload: BlockWorkload, capacity: int, seed: int = 0) -> dict:
    """Run ``policy`` on the workload's block reads in RM, feeding each step's scores to ``observe``."""
    sim = RMSimulator(policy, capacity, seed)
    for items, scores in workload.steps():
        sim.step(items.tolist(), None, (items, scores))
    res = sim.result()
    hits = res.requests - res.misses
    return {"hits": hits, "accesses": res.requests, "misses": res.misses,
            "readmissions": res.misses - workload.footprint, "hit_rate": hits / res.requests}


def belady_flat_hit_rate(workload: BlockWorkload, capacity: int) -> float:
    """Belady's hit rate on the reads flattened to one per step: an upper bound on every policy's (module doc)."""
    misses = simulate_fast("belady", PagingTrace.unit(workload.items), capacity)
    return 1.0 - misses / workload.accesses


def _label(name: str, params: dict) -> str:
    args = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{name}({args})" if args else name


def _measure(name: str, params: dict, workloads: list[BlockWorkload], capacity: int) -> dict:
    runs = [run_blocks(policies.make(name, **params), w, capacity) for w in workloads]
    rates = [r["hit_rate"] for r in runs]
    return {"policy": _label(name, params), "name": name, "params": params, "hit_rate": float(np.mean(rates)),
            "hit_rate_per_seed": rates, "readmissions_per_seed": [r["readmissions"] for r in runs]}


def alpha_sweep_summary(rows: list[dict], lru: float, lfu: float) -> dict:
    """Shape of the EMA-Block hit rate over ``ALPHAS`` (rows in ``ALPHAS`` order)."""
    rates = [r["hit_rate"] for r in rows]
    best = int(np.argmax(rates))
    steps = 100 * np.diff(rates)
    non_monotone = bool((steps > FLAT_PTS).any() and (steps < -FLAT_PTS).any())
    interior = 0 < best < len(rates) - 1 and 100 * (rates[best] - max(rates[0], rates[-1])) > FLAT_PTS
    smallest = rates[-1]
    return {"best_alpha": rows[best]["params"]["alpha"], "best_hit_rate": rates[best], "flat_pts": FLAT_PTS,
            "non_monotone": non_monotone, "interior_optimum": bool(interior and non_monotone),
            "interior_margin_pts": 100 * (rates[best] - max(rates[0], rates[-1])),
            "spread_pts": 100 * (max(rates) - min(rates)),
            "smallest_alpha_minus_lru_pts": 100 * (smallest - lru),
            "smallest_alpha_minus_lfu_pts": 100 * (smallest - lfu),
            "smallest_alpha_closer_to": "LFU" if abs(smallest - lfu) < abs(smallest - lru) else "LRU",
            "max_abs_diff_from_lru_pts": 100 * max(abs(r - lru) for r in rates)}


def run_block_study(profile: str | StudyProfile = "quick", params: BlockWorkloadParams | None = None) -> dict:
    """The alpha sweep and the persistence ablation at 32 GiB (module docstring); a JSON-able dict."""
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise ParameterError(f"block study: profile = {profile!r}: must be one of {sorted(PROFILES)}")
        profile = PROFILES[profile]
    wparams = params or BlockWorkloadParams(steps=profile.steps)
    workloads = [generate_block_workload(wparams, seed) for seed in profile.seeds]
    capacity = block_capacity(BUDGET_GIB)
    measured: dict[str, dict] = {}

    def measure(name: str, params: dict) -> dict:
        key = json.dumps([name, params], sort_keys=True)  # LRU, LFU and persistent LFU serve every reading
        if key not in measured:
            measured[key] = _measure(name, params, workloads, capacity)
        return measured[key]

    lru = measure("LRU", {})
    lfu = measure("LFU", {})
    out: dict[str, Any] = {
        "profile": profile.as_dict(),
        "budget_gib": BUDGET_GIB, "capacity_blocks": capacity, "beta": BETA,
        "block_model": {**asdict(BLOCK_MODEL), "block_mib": block_bytes() / MiB},
        "workload": {"params": wparams.as_dict(), "per_seed": [w.summary(BUDGET_GIB) for w in workloads]},
        "upper_bound": {"policy": "Belady (flattened reads)",
                        "hit_rate_per_seed": [belady_flat_hit_rate(w, capacity) for w in workloads]},
        "alpha_sweep": {}, "persistence": {},
    }
    for reading in profile.readings:
        ema = {a: measure("EMA-Block", {"alpha": a, "beta": BETA, "unattended": reading}) for a in ALPHAS}
        sweep_rows = [ema[a] for a in ALPHAS]
        out["alpha_sweep"][reading] = {
            "rows": sweep_rows + [lru, lfu],
            "summary": alpha_sweep_summary(sweep_rows, lru["hit_rate"], lfu["hit_rate"])}
        plain_rates = [r["hit_rate"] for r in sweep_rows] + [lru["hit_rate"], lfu["hit_rate"]]
        spread = 100 * (max(plain_rates) - min(plain_rates))
        rows = []
        for name, extra in ABLATION:
            wrapped = extra if name == "LFU" else {**extra, "beta": BETA, "unattended": reading}
            plain = lfu if name == "LFU" else ema[extra["alpha"]]
            kept = measure("Persistent", {"policy": name, "params": wrapped or None})
            rows.append({"policy": plain["policy"], "plain_hit_rate": plain["hit_rate"],
                         "persistent_hit_rate": kept["hit_rate"],
                         "gain_pts": 100 * (kept["hit_rate"] - plain["hit_rate"]),
                         "gain_pts_per_seed": [100 * (b - a) for a, b in zip(plain["hit_rate_per_seed"],
                                                                             kept["hit_rate_per_seed"])]})
        gains = {r["policy"]: r["gain_pts"] for r in rows}
        out["persistence"][reading] = {
            "rows": rows,
            "summary": {"gain_pts": gains, "policy_spread_pts": spread,
                        "every_gain_exceeds_spread": bool(all(g > spread for g in gains.values())),
                        "largest_gain_exceeds_spread": bool(max(gains.values()) > spread),
                        "largest_gain": max(gains, key=gains.get)}}
    return out


def block_study(profile_name: str) -> dict:
    """:func:`run_block_study` at a run profile's size (quick unless the profile is full), computed once per run:
    the seed-002 claims and figure read the same one."""
    from ..tables import cached

    return cached(run_block_study, profile="full" if profile_name == "full" else "quick")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        tables = run_block_study(args[0] if args else "quick")
    except KVToolkitError as exc:
        print(f"block_study: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(tables, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
