"""The experiments the paper asks for and does not run, on real traces.

``section11``  (paper Section 11, "Empirical validation of Greedy-Dual-Attention")
    GD-A, H2O, StreamingLLM, TOVA and ACC at matched budgets ``k`` in NM, each against the exact NM optimum, on a
    *benign* window and on a *suffix* window of the same run.  With the built-in ``recall`` prompt the suffix is the
    question and the answer, which must read a code stated in the first line and idle ever since (long-idle early
    tokens: the shifted/adversarial suffix); the benign window is the same number of steps at the end of the plain
    passage just before it.  Per window: mean regret per step of each policy and of the optimum, the tracking gap
    per step, and the share of the suffix's attention on the sleeper tokens (segment ``code``) that was still
    resident.
    The prediction checked (Section 11): GD-A matches the heavy-hitter policies on the benign window and separates
    from them on the suffix, where undecayed accumulation (ACC) degrades.

``alpha_beta_sweep``  (figure page, seed 002: "beta interacts with alpha and must be swept jointly against real
    attention traces")
    The trace is aggregated into blocks of 16 tokens (``block_trace``); step ``t`` writes the block ``t // 16`` (a
    request of cost 0: it must be resident but is not a read) and reads every other block holding ``>= theta`` of
    row ``t``'s mass (cost 1 each; ``block_requests``; RM with refetch).  The registered EMA block policy runs at
    every ``(alpha, beta)`` with the block attention observed; its hit rate is ``1 - read misses / reads`` (SPEC
    section 4's hits / block accesses, over reads: counting the written block would add one near-certain hit per
    step), beside LRU's and the exact RM optimum's (which minimizes read misses, the same cost).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvcore.engine import run_nm, run_rm
from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace, PagingTrace

from .analysis import regret_per_step_of_schedule
from .traceset import TraceSet

SECTION11_POLICIES = (("GD-A", "GDA"), ("H2O",), ("StreamingLLM",), ("TOVA",), ("ACC",))


def resolve_policy(aliases: tuple[str, ...]) -> str | None:
    """The registered name of the first alias found in the policy registry, or None."""
    from policies import REGISTRY

    for a in aliases:
        if a.lower() in REGISTRY:
            return REGISTRY[a.lower()].name
    return None


def _lost_mass(trace: AttentionTrace, evictions, steps: range, tokens: range | None = None) -> float:
    """Stored mass lost on ``steps`` (optionally only on entries of ``tokens``) under a drop schedule."""
    return float(regret_per_step_of_schedule(trace, evictions, tokens)[steps.start:steps.stop].sum())


def _mass_on(trace: AttentionTrace, steps: range, tokens: range) -> float:
    rows = np.repeat(np.arange(trace.T), np.diff(trace.indptr))
    sel = (rows >= steps.start) & (rows < steps.stop) & (trace.indices >= tokens.start) & (trace.indices < tokens.stop)
    return float(trace.weights[sel].sum())


@dataclass
class WindowResult:
    policy: str
    k: int
    window: str
    steps: int
    regret_per_step: float
    opt_per_step: float
    sleeper_kept: float | None
    sleeper_mass_per_step: float | None

    @property
    def gap_per_step(self) -> float:
        return self.regret_per_step - self.opt_per_step

    def as_dict(self) -> dict:
        return {"policy": self.policy, "k": self.k, "window": self.window, "steps": self.steps,
                "regret_per_step": self.regret_per_step, "opt_per_step": self.opt_per_step,
                "gap_per_step": self.gap_per_step, "sleeper_kept": self.sleeper_kept,
                "sleeper_mass_per_step": self.sleeper_mass_per_step}


def section11_windows(ts: TraceSet) -> tuple[range, range, range | None]:
    """``(benign, suffix, sleeper)`` step/token ranges from the manifest's segments (see module docstring)."""
    seg = ts.segments
    if "question" in seg and "passage" in seg:
        suffix = range(seg["question"][0], seg.get("continuation", seg["question"])[1])
        end = seg["passage"][1]
    elif "continuation" in seg and seg["continuation"][1] > seg["continuation"][0]:
        suffix = range(*seg["continuation"])
        end = suffix.start
    else:
        raise ParameterError(f"{ts.source}: Section 11 needs a 'question' or non-empty 'continuation' segment")
    benign = range(max(0, end - len(suffix)), end)
    sleeper = range(*seg["code"]) if "code" in seg else None
    return benign, suffix, sleeper


def section11(trace: AttentionTrace, budgets, benign: range, suffix: range, sleeper: range | None = None,
              policies=SECTION11_POLICIES, configure=None, seeds=(0,)) -> list[WindowResult]:
    """The Section 11 comparison on one trace (see module docstring); missing policies are skipped by name.

    ``configure(name, k)``, when given, returns the parameters of a policy at budget ``k`` (default: registered
    defaults); a randomized policy runs once per seed of ``seeds`` and its window numbers are the seed means."""
    from kvcore.optima import nm_opt
    from policies import make

    names = [n for n in (resolve_policy(a) for a in policies) if n is not None]
    out: list[WindowResult] = []
    for k in budgets:
        opt = nm_opt(trace, k, record=True)
        schedules = {"OPT": [opt.evictions or []]}
        for n in names:
            params = configure(n, k) if configure is not None else {}
            runs = seeds if not make(n, **params).deterministic else tuple(seeds)[:1]
            schedules[n] = [run_nm(make(n, **params), trace, k, seed=s, record=True).evictions or [] for s in runs]
        for label, win in (("benign", benign), ("suffix", suffix)):
            opt_lost = _lost_mass(trace, schedules["OPT"][0], win) / max(len(win), 1)
            total = _mass_on(trace, win, sleeper) if sleeper is not None and label == "suffix" else 0.0
            for n, scheds in schedules.items():
                kept = None
                if total > 0:  # clipped: 1 - lost/total can round to -1e-17 when everything was lost
                    kept = float(np.mean([min(1.0, max(0.0, 1.0 - _lost_mass(trace, sc, win, sleeper) / total))
                                          for sc in scheds]))
                lost = float(np.mean([_lost_mass(trace, sc, win) for sc in scheds]))
                out.append(WindowResult(n, k, label, len(win), lost / max(len(win), 1), opt_lost, kept,
                                        total / len(win) if total > 0 else None))
    return out


# --------------------------------------------------------------------------------------------------------------------
# Block-level alpha x beta sweep
# --------------------------------------------------------------------------------------------------------------------


def block_trace(trace: AttentionTrace, block: int = 16) -> AttentionTrace:
    """Row ``t`` over blocks: ``a_B[t, b] = sum_{i // block = b} a[t, i]``; the residual is carried over."""
    if block < 1:
        raise ParameterError(f"block = {block}: must be at least 1")
    rows = np.repeat(np.arange(trace.T), np.diff(trace.indptr))
    key = rows * (trace.T // block + 1) + trace.indices // block
    uniq, inv = np.unique(key, return_inverse=True)
    w = np.bincount(inv, weights=trace.weights)
    brow, bidx = uniq // (trace.T // block + 1), uniq % (trace.T // block + 1)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(brow, minlength=trace.T))])
    return AttentionTrace(indptr, bidx, w, trace.residual, f"{trace.source} (blocks of {block})")


def block_requests(btrace: AttentionTrace, theta: float, block: int = 16) -> PagingTrace:
    """Step ``t`` requests block ``t // block`` (being written, cost 0) and reads every other block with
    ``a_B[t, b] >= theta`` (cost 1)."""
    if not 0 < theta <= 1:
        raise ParameterError(f"theta = {theta}: must be in (0, 1]")
    items, costs, offsets = [], [], [0]
    for t, idx, w in btrace.rows():
        cur = t // block
        reads = [int(b) for b in idx[w >= theta] if b != cur]
        items.extend([cur] + reads)
        costs.extend([0.0] + [1.0] * len(reads))
        offsets.append(len(items))
    return PagingTrace(np.asarray(items, dtype=np.int64), np.asarray(costs), np.asarray(offsets, dtype=np.int64),
                       f"{btrace.source} (requests, theta={theta:g})")


def ema_block_policy_name() -> str:
    """The registered policy defined in ``policies/ema_block.py``."""
    from policies import REGISTRY

    for info in REGISTRY.values():
        if info.cls.__module__ == "policies.ema_block":
            return info.name
    raise ParameterError("no policy from policies/ema_block.py is registered")


def alpha_beta_sweep(trace: AttentionTrace, capacity: int, alphas, betas, theta: float = 0.05,
                     block: int = 16) -> dict:
    """Hit rates of the EMA block policy over ``alphas x betas`` and of LRU and the RM optimum (module docstring)."""
    from kvcore.optima import rm_opt
    from policies import make

    btr = block_trace(trace, block)
    req = block_requests(btr, theta, block)
    if int(np.diff(req.offsets).max()) > capacity:
        raise ParameterError(f"capacity = {capacity}: a step requests {int(np.diff(req.offsets).max())} blocks")
    reads = float(req.costs.sum())
    if reads == 0:
        raise ParameterError(f"theta = {theta}: no block other than the one being written reaches it")
    name = ema_block_policy_name()
    grid = np.zeros((len(alphas), len(betas)))
    for a_i, a in enumerate(alphas):
        for b_i, b in enumerate(betas):
            grid[a_i, b_i] = 1.0 - run_rm(make(name, alpha=a, beta=b), req, capacity, observe=btr).cost / reads
    lru = run_rm(make("LRU"), req, capacity, observe=btr)
    opt = rm_opt(req, capacity)
    return {"policy": name, "capacity": capacity, "theta": theta, "block": block, "reads": int(reads),
            "alphas": list(alphas), "betas": list(betas), "hit_rate": grid.tolist(),
            "lru_hit_rate": 1.0 - lru.cost / reads, "opt_hit_rate": 1.0 - opt.cost / reads}
