"""The figure page's block study (seed 002): the alpha sweep and the persistent-state ablation, on block workloads
where the score can and cannot matter, under both readings of an unattended step, with positive controls.  A library
module: it returns JSON-able tables; the claims (:mod:`theorems.claims.blocks`) and the seed-002 figure read them.

What is measured (SPEC section 4, block study): the recompute model with refetch on miss, one item per
``(sequence, block)`` of 16 tokens (:mod:`adversary.block_workload`), and ``hit rate = hits / block reads`` (cold
misses count).  Each step's block reads are its requests, and their attention shares reach the policy as that step's
observation, exactly as :class:`kvcore.engine.RMSimulator` feeds them (:func:`run_blocks`).

Workloads (:data:`WORKLOADS`; each a generator, its parameters, a budget in blocks and a role):

* ``serving`` (experiment): the 256-conversation serving workload of
  :func:`adversary.block_workload.generate_block_workload` at 32 GiB = 6553 blocks of 5 MiB (Llama-2-70B, Eq. 2).
  Attention is spread thin, so a block's score hardly moves its priority: the page-scale reference, which could not
  show either effect.
* ``anchored`` (experiment): :func:`adversary.block_workload.generate_anchored_workload` at its defaults, 32 GiB:
  attention concentrated on anchor blocks that go idle between turns, noisy anchor shares, rare transient spikes, so
  the score can matter.
* positive controls, the anchored generator in regimes where the effect is present: ``alpha-control-decay`` (one
  conversation, four anchors read every few steps, 16 blocks: a score that decays every step still survives the gap
  between reads), ``alpha-control-hold`` (64 conversations, 2457 blocks = 12 GiB, short idle gaps) and
  ``persistence-control`` (24 users of Zipf-unequal activity, three anchors each, 90 blocks that cannot hold every
  anchor).  The same experiment -- the same policies, grid, statistic and thresholds -- must detect the effect there,
  or a negative verdict on the experiments is not checkable (VERDICTS.md).  Their lengths are fixed; the profile sets
  the experiments' lengths and every workload's seeds.

Tables per workload (``workloads[name]``), under both readings of an unattended step (:data:`READINGS`: ``"decay"``,
LRFU, the score shrinks every step the block is not read; ``"hold"``, the score is held, the reading of the page's
worked examples; :mod:`policies.ema_block`):

* ``references``: LRU, LFU and Belady on the reads flattened to one per step.  Flattening only relaxes the
  multi-request problem, so Belady's hit rate there is at least the offline optimum's: no policy can beat it.
* ``alpha_sweep[reading]``: EMA-Block (``beta`` = :data:`BETA`) at the page's grid :data:`ALPHAS`, LRU and LFU;
  summary :func:`sweep_shape`; ``limit``: EMA-Block at :data:`LIMIT_ALPHA`, the measured alpha -> 0 limit.
* ``persistence[reading]``: :data:`ABLATION` (LFU, EMA-Block alpha 0.01 and 0.15), each plain and wrapped in
  :class:`policies.persistent_state.Persistent`; summary :func:`persistence_effect`.

The shape statistics (pure functions of the hit rates, also applied by the claims' decisions):

* interior optimum (:func:`sweep_shape`): the best alpha of the grid is neither end and beats both ends by more
  than :data:`FLAT_PTS` percentage points; the smallest alpha is "closer to" whichever of LRU and LFU its hit rate is
  nearer to, in points.
* as reported (:func:`as_reported`): that shape with the best alpha at :data:`REPORTED_OPTIMUM_ALPHA`, a margin of at
  least :data:`REPORTED_MARGIN_PTS` points, and the smallest alpha nearer LRU than LFU.
* persistence effect (:func:`persistence_effect`): the largest gain (persistent minus plain, points) exceeds the
  spread of the three plain policies of the ablation (the page's own numbers, 34.15 against 44.33 - 15.56 = 28.77,
  read this way), and LFU's and alpha = 0.01's gains both exceed alpha = 0.15's by more than :data:`MARGIN_PTS`.

Top-level keys ``alpha_sweep``, ``persistence``, ``workload``, ``upper_bound``, ``capacity_blocks`` and
``budget_gib`` are the ``serving`` workload's (the seed-002 figure's first overlay); ``workloads`` holds every
workload's tables, the ``serving`` one included.
Hit rates are means over the profile's workload seeds, with the per-seed values.

Speed.  The runs go through :func:`simulate_blocks`: the array kernel :mod:`kvcore.block_kernel` (numba) when the
policy is exactly one of its rules (LRU, LFU, EMA-Block under both readings, each plain or Persistent; the pairing is
:func:`policies.kernels.block_rule`), the engine (:func:`run_blocks`) for any other policy.
``tests/test_block_study.py`` checks that the kernel and the engine evict the same blocks at the same steps.

The tables are printed as the values of the claims that read them: ``python -m paper_check claim
blk-alpha-interior-optimum --json`` (the alpha sweep) and ``... claim blk-persistent-state --json`` (the ablation),
``--full`` for the full profile.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

import policies
from adversary.block_workload import (BLOCK_MODEL, AnchoredWorkloadParams, BlockWorkload, BlockWorkloadParams,
                                      block_bytes, block_capacity, generate_anchored_workload,
                                      generate_block_workload)
from kvcore.block_kernel import simulate as block_kernel_run
from kvcore.engine import RMSimulator
from kvcore.errors import ParameterError
from kvcore.formulas import GiB, MiB
from kvcore.traces import PagingTrace
from policies.fast import simulate_fast
from policies.kernels import block_rule

BUDGET_GIB = 32.0
BETA = 0.001
ALPHAS = (0.5, 0.3, 0.15, 0.05, 0.01, 0.003, 0.001)
READINGS = ("decay", "hold")
# The reading of the page's worked examples: block A keeps its score 0.059 although it was accessed 50 steps ago,
# and block B keeps 0.02 after 2000 idle steps (policies/ema_block.py).
PAGE_READING = "hold"
ABLATION = (("LFU", {}), ("EMA-Block", {"alpha": 0.01}), ("EMA-Block", {"alpha": 0.15}))
# A hit-rate difference below this many percentage points is no change when the shape of the alpha curve is judged
# (a few hundred reads of the quick profile): a one-read wiggle must not make a flat curve "non-monotone".
FLAT_PTS = 0.1
# "helps LFU and small alpha far more than alpha = 0.15": by more than this many points.
MARGIN_PTS = 1.0
# What the page reports about its alpha curve, as the statistics test it: the best alpha of the grid is 0.05 ("an
# interior optimum near 0.05": its grid neighbours are 3x and 5x away), and the optimum beats the better end of the
# grid by "tens of points" -- at least ten (the page: 55.96 against 37.20, 18.76 points).
REPORTED_OPTIMUM_ALPHA = 0.05
REPORTED_MARGIN_PTS = 10.0
# The alpha -> 0 limit, measured: every score is at most alpha x (reads of the block), so the priority
# (1 - score)(1 - exp(-beta age)) tends to the recency decay alone, which orders blocks as LRU does.
LIMIT_ALPHA = 1e-9


# --------------------------------------------------------------------------------------------------------------------
# Workloads and profiles
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StudyWorkload:
    """One workload of the study: its generator's parameters (``steps`` as the profile sets them for an experiment,
    fixed for a control), its budget in blocks, its role, and which experiments run on it."""

    name: str
    role: str  # "experiment" or "control"
    params: BlockWorkloadParams | AnchoredWorkloadParams
    capacity_blocks: int
    experiments: tuple[str, ...] = ("alpha", "persistence")
    why: str = ""

    def generate(self, steps: int | None, seed: int) -> BlockWorkload:
        p = self.params if steps is None else replace(self.params, steps=steps)
        if isinstance(p, AnchoredWorkloadParams):
            return generate_anchored_workload(p, seed)
        return generate_block_workload(p, seed)

    @property
    def generator(self) -> str:
        return "anchored" if isinstance(self.params, AnchoredWorkloadParams) else "serving"


PAGE_CAPACITY = block_capacity(BUDGET_GIB)
WORKLOADS = (
    StudyWorkload("serving", "experiment", BlockWorkloadParams(), PAGE_CAPACITY,
                  why="256 concurrent conversations, attention spread over ~8 blocks per step (page scale)"),
    StudyWorkload("anchored", "experiment", AnchoredWorkloadParams(), PAGE_CAPACITY,
                  why="attention concentrated on anchor blocks that go idle between turns"),
    StudyWorkload("alpha-control-decay", "control",
                  AnchoredWorkloadParams(steps=40_000, conversations=1, anchor_blocks=4, anchor_reads=1,
                                         transient_reads=3, turn_steps_mean=100.0, idle_steps_mean=1.0, end_prob=0.1,
                                         conc_anchor=5.0, conc_transient=0.05, conc_rest=0.1),
                  16, ("alpha",),
                  why="one conversation whose four anchors take most of each row and are read every few steps, in a "
                      "16-block budget: a decaying score survives the gap between reads, and anchors are replaced "
                      "every ~1000 steps"),
    StudyWorkload("alpha-control-hold", "control",
                  AnchoredWorkloadParams(steps=30_000, conversations=64, anchor_blocks=32, anchor_reads=2,
                                         transient_reads=1, turn_steps_mean=50.0, idle_steps_mean=200.0,
                                         end_prob=0.05, conc_anchor=0.2, conc_transient=0.05, conc_rest=0.3),
                  2457, ("alpha",),
                  why="a smaller anchored workload (64 conversations, 12 GiB) with short idle gaps"),
    StudyWorkload("persistence-control", "control",
                  AnchoredWorkloadParams(steps=30_000, conversations=24, anchor_blocks=3, anchor_reads=2,
                                         transient_reads=1, turn_steps_mean=200.0, idle_steps_mean=100.0,
                                         end_prob=0.1, popularity_zipf=0.5, conc_anchor=5.0, conc_transient=0.05,
                                         conc_rest=0.2),
                  90, ("persistence",),
                  why="24 users of unequal activity (Zipf 0.5) with three anchors each, a 90-block budget that "
                      "cannot hold every anchor: a returning anchor's count or score is worth keeping"),
)


@dataclass(frozen=True)
class StudyProfile:
    """How large the study is: the experiments' workload lengths (the controls have fixed lengths) and seeds."""

    name: str
    serving_steps: int
    anchored_steps: int
    seeds: tuple[int, ...]

    def as_dict(self) -> dict:
        return asdict(self)

    def steps_of(self, w: StudyWorkload) -> int | None:
        if w.role == "control":
            return None
        return self.serving_steps if w.generator == "serving" else self.anchored_steps


QUICK = StudyProfile("quick", serving_steps=20_000, anchored_steps=100_000, seeds=(0,))
FULL = StudyProfile("full", serving_steps=60_000, anchored_steps=200_000, seeds=(0, 1, 2))
PROFILES = {p.name: p for p in (QUICK, FULL)}
# The sizes the blk-* claims declare (quick value, full value): the same profiles, for the report.
STUDY_SIZES = {field: (getattr(QUICK, field), getattr(FULL, field))
               for field in ("serving_steps", "anchored_steps", "seeds")}


# --------------------------------------------------------------------------------------------------------------------
# Runs: the engine (reference) and the array kernel
# --------------------------------------------------------------------------------------------------------------------


def run_blocks(policy, workload: BlockWorkload, capacity: int, seed: int = 0) -> dict:
    """Run ``policy`` on the workload's block reads through the checked engine, feeding each step's scores to
    ``observe`` (the reference :func:`simulate_blocks` is checked against)."""
    sim = RMSimulator(policy, capacity, seed)
    for items, scores in workload.steps():
        sim.step(items.tolist(), None, (items, scores))
    res = sim.result()
    return _counts(res.requests, res.misses, workload.footprint)


def _counts(requests: int, misses: int, footprint: int) -> dict:
    hits = requests - misses
    return {"hits": hits, "accesses": requests, "misses": misses, "readmissions": misses - footprint,
            "hit_rate": hits / requests}


@dataclass(frozen=True, eq=False)
class DenseReads:
    """A workload's reads with block keys renumbered ``0..n-1`` in increasing key order (so "smaller key" ties
    resolve the same way); ``keys[i]`` is the block key of dense id ``i``."""

    workload: BlockWorkload
    ids: np.ndarray
    keys: np.ndarray

    @classmethod
    def of(cls, workload: BlockWorkload) -> DenseReads:
        keys, ids = np.unique(workload.items, return_inverse=True)
        return cls(workload, ids.astype(np.int64).reshape(-1), keys)


def simulate_blocks(policy, reads: BlockWorkload | DenseReads, capacity: int, record: bool = False,
                    compiled: bool = True) -> dict:
    """:func:`run_blocks`'s result for ``policy``, through the array kernel when the policy is exactly LRU, LFU,
    EMA-Block or Persistent(LFU / EMA-Block) (module docstring), else through the engine.  With ``record`` the result
    also has ``evictions``: ``(step, block key)`` in the engine's order (the kernel's check); ``compiled=False`` runs
    the kernel's plain-Python form."""
    dense = reads if isinstance(reads, DenseReads) else DenseReads.of(reads)
    w = dense.workload
    rule = block_rule(policy)
    if rule is None:
        if record:
            raise ParameterError(f"simulate_blocks: record is for kernel rules; {policy.name} runs in the engine")
        return run_blocks(policy, w, capacity)
    misses, steps, victims = block_kernel_run(dense.ids, w.scores, w.offsets, dense.keys.size, capacity, rule, record,
                                              compiled)
    res = _counts(w.accesses, misses, dense.keys.size)
    if record:
        res["evictions"] = list(zip(steps.tolist(), dense.keys[victims].tolist()))
    return res


def belady_flat_hit_rate(workload: BlockWorkload, capacity: int) -> float:
    """Belady's hit rate on the reads flattened to one per step: an upper bound on every policy's (module doc)."""
    misses = simulate_fast("belady", PagingTrace.unit(workload.items), capacity)
    return 1.0 - misses / workload.accesses


# --------------------------------------------------------------------------------------------------------------------
# Shape statistics (pure functions of hit rates in percent; the claims apply the same ones)
# --------------------------------------------------------------------------------------------------------------------


def sweep_shape(rates_pts: list[float], lru_pts: float, lfu_pts: float, flat_pts: float = FLAT_PTS,
                alphas: tuple[float, ...] = ALPHAS) -> dict:
    """The shape of a hit-rate curve over ``alphas`` (rates in percent, in ``alphas`` order; module docstring)."""
    best = int(np.argmax(rates_pts))
    margin = rates_pts[best] - max(rates_pts[0], rates_pts[-1])
    smallest = rates_pts[-1]
    return {"best_alpha": alphas[best], "best_hit_rate_pts": rates_pts[best],
            "interior_optimum": bool(0 < best < len(rates_pts) - 1 and margin > flat_pts),
            "interior_margin_pts": margin, "spread_pts": max(rates_pts) - min(rates_pts),
            "best_minus_lru_pts": rates_pts[best] - lru_pts,
            "smallest_alpha_minus_lru_pts": smallest - lru_pts, "smallest_alpha_minus_lfu_pts": smallest - lfu_pts,
            "smallest_alpha_closer_to": "LFU" if abs(smallest - lfu_pts) < abs(smallest - lru_pts) else "LRU"}


def as_reported(shape: dict, optimum_alpha: float = REPORTED_OPTIMUM_ALPHA,
                margin_pts: float = REPORTED_MARGIN_PTS) -> dict:
    """Whether a curve's shape (:func:`sweep_shape`) is the one the page reports: an interior optimum, located at
    ``optimum_alpha`` on the grid, beating the better end by at least ``margin_pts``, with the smallest alpha nearer
    LRU than LFU (no convergence onto LFU).  The grid's alphas may be numbers or their strings (the claims' JSON)."""
    parts = {"interior_optimum": shape["interior_optimum"], "at_reported_alpha": float(shape["best_alpha"]) == optimum_alpha,
             "margin_as_reported": shape["interior_margin_pts"] >= margin_pts,
             "not_onto_lfu": shape["smallest_alpha_closer_to"] == "LRU"}
    return {**parts, "shown": all(parts.values())}


def persistence_effect(plain_pts: dict[str, float], persistent_pts: dict[str, float],
                       margin_pts: float = MARGIN_PTS) -> dict:
    """Gains of persistence (points) for the ablation's policies ``"LFU"``, ``"0.01"``, ``"0.15"`` and whether they
    show the page's effect (module docstring)."""
    gains = {p: persistent_pts[p] - plain_pts[p] for p in plain_pts}
    spread = max(plain_pts.values()) - min(plain_pts.values())
    largest = max(gains, key=gains.get)
    small_over_large = min(gains["LFU"], gains["0.01"]) - gains["0.15"]
    return {"gain_pts": gains, "plain_spread_pts": spread, "largest_gain": largest,
            "largest_gain_exceeds_spread": bool(gains[largest] > spread),
            "lfu_and_0.01_over_0.15_pts": small_over_large,
            "lfu_and_0.01_gain_more": bool(small_over_large > margin_pts),
            "effect": bool(gains[largest] > spread and small_over_large > margin_pts)}


# --------------------------------------------------------------------------------------------------------------------
# The study
# --------------------------------------------------------------------------------------------------------------------


def _label(name: str, params: dict) -> str:
    args = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{name}({args})" if args else name


def _ablation_key(name: str, params: dict) -> str:
    return "LFU" if name == "LFU" else str(params["alpha"])


def measure_workload(w: StudyWorkload, profile: StudyProfile) -> dict:
    """Every run of the study on one workload, at ``profile``'s length and seeds (module docstring)."""
    runs = [DenseReads.of(w.generate(profile.steps_of(w), seed)) for seed in profile.seeds]
    capacity = w.capacity_blocks
    measured: dict[str, dict] = {}

    def measure(name: str, params: dict) -> dict:
        key = json.dumps([name, params], sort_keys=True)  # LRU, LFU and persistent LFU serve both readings
        if key not in measured:
            rates = [simulate_blocks(policies.make(name, **params), r, capacity)["hit_rate"] for r in runs]
            measured[key] = {"policy": _label(name, params), "name": name, "params": params,
                             "hit_rate": float(np.mean(rates)), "hit_rate_per_seed": rates}
        return measured[key]

    lru, lfu = measure("LRU", {}), measure("LFU", {})
    belady = [belady_flat_hit_rate(r.workload, capacity) for r in runs]
    out: dict[str, Any] = {
        "name": w.name, "role": w.role, "generator": w.generator, "why": w.why,
        "params": replace(w.params, steps=runs[0].workload.T).as_dict(), "seeds": list(profile.seeds),
        "capacity_blocks": capacity, "budget_gib": capacity * block_bytes() / GiB,
        "experiments": list(w.experiments),
        "per_seed": [r.workload.summary(BUDGET_GIB) | {"capacity_blocks": capacity,
                                                        "budget_fraction_of_footprint": capacity / r.workload.footprint}
                     for r in runs],
        "references": {"LRU": lru, "LFU": lfu,
                       "Belady": {"policy": "Belady (flattened reads)", "hit_rate": float(np.mean(belady)),
                                  "hit_rate_per_seed": belady}},
        "alpha_sweep": {}, "persistence": {}}
    grid = ALPHAS if "alpha" in w.experiments else tuple(x["alpha"] for _, x in ABLATION if "alpha" in x)
    for reading in READINGS:
        ema = {a: measure("EMA-Block", {"alpha": a, "beta": BETA, "unattended": reading}) for a in grid}
        rows = [ema[a] for a in grid]
        if "alpha" in w.experiments:
            out["alpha_sweep"][reading] = {
                "rows": rows + [lru, lfu],
                "limit": measure("EMA-Block", {"alpha": LIMIT_ALPHA, "beta": BETA, "unattended": reading}),
                "summary": sweep_shape([100 * r["hit_rate"] for r in rows], 100 * lru["hit_rate"],
                                       100 * lfu["hit_rate"])}
        if "persistence" in w.experiments:
            ablation = []
            for name, extra in ABLATION:
                wrapped = extra if name == "LFU" else {**extra, "beta": BETA, "unattended": reading}
                plain = lfu if name == "LFU" else ema[extra["alpha"]]
                kept = measure("Persistent", {"policy": name, "params": wrapped or None})
                ablation.append({"policy": plain["policy"], "key": _ablation_key(name, extra),
                                 "plain_hit_rate": plain["hit_rate"], "persistent_hit_rate": kept["hit_rate"],
                                 "gain_pts": 100 * (kept["hit_rate"] - plain["hit_rate"]),
                                 "gain_pts_per_seed": [100 * (b - a) for a, b in zip(plain["hit_rate_per_seed"],
                                                                                     kept["hit_rate_per_seed"])]})
            out["persistence"][reading] = {
                "rows": ablation,
                "summary": persistence_effect({r["key"]: 100 * r["plain_hit_rate"] for r in ablation},
                                              {r["key"]: 100 * r["persistent_hit_rate"] for r in ablation})}
    return out


def run_block_study(profile: str | StudyProfile = "quick",
                    workloads: tuple[StudyWorkload, ...] = WORKLOADS) -> dict:
    """The alpha sweep and the persistence ablation on every workload of ``workloads``, at ``profile``'s sizes
    (module docstring); a JSON-able dict."""
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise ParameterError(f"block study: profile = {profile!r}: must be one of {sorted(PROFILES)}")
        profile = PROFILES[profile]
    tables = {w.name: measure_workload(w, profile) for w in workloads}
    first = tables[workloads[0].name]
    return {
        "profile": profile.as_dict(), "beta": BETA, "alphas": list(ALPHAS), "readings": list(READINGS),
        "page_reading": PAGE_READING, "flat_pts": FLAT_PTS, "margin_pts": MARGIN_PTS,
        "reported": {"optimum_alpha": REPORTED_OPTIMUM_ALPHA, "margin_pts": REPORTED_MARGIN_PTS},
        "limit_alpha": LIMIT_ALPHA,
        "block_model": {**asdict(BLOCK_MODEL), "block_mib": block_bytes() / MiB},
        # the first workload's tables under the keys the seed-002 figure has always read
        "budget_gib": first["budget_gib"], "capacity_blocks": first["capacity_blocks"],
        "workload": {"name": first["name"], "params": first["params"], "per_seed": first["per_seed"]},
        "upper_bound": {"policy": first["references"]["Belady"]["policy"],
                        "hit_rate_per_seed": first["references"]["Belady"]["hit_rate_per_seed"]},
        "alpha_sweep": first["alpha_sweep"], "persistence": first["persistence"],
        "workloads": tables,
    }


def block_study(profile_name: str, sizes: dict | None = None) -> dict:
    """:func:`run_block_study` at a run profile's size (quick unless the profile is full) or at ``sizes`` (the
    claims' declared ``serving_steps``, ``anchored_steps``, ``seeds``), computed once per run: the seed-002 claims
    and figure read the same one.  Sizes equal to the profile's are the profile, so the figure shares the run."""
    from ..tables import cached

    profile = PROFILES["full" if profile_name == "full" else "quick"]
    if sizes is None or all(getattr(profile, k) == v for k, v in sizes.items()):
        return cached(run_block_study, profile=profile.name)
    resized = StudyProfile(**{**asdict(profile), **sizes, "name": f"{profile.name}, resized"})
    return cached(run_block_study, profile=resized)
