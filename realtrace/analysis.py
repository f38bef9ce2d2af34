"""Measurements on any attention trace: sinks, heavy sets, (rho, W) persistence, Section 7's threshold recipe, and the
replay of the registered NM policies against the exact NM optimum (paper Sections 3, 7 and 11).

Notation (paper Section 7, 0-based steps): the heavy set of row ``s`` at level ``x`` is ``H_s(x) = {i : a[s,i] >= x}``;
the light-tail mass of row ``t`` is ``M_t(tau) = sum_{i : a[t,i] < tau} a[t,i]``.

Rules chosen where the paper is silent (each is used consistently by every function here):

* **Persistence counts earlier tokens only.**  ``(rho, W)``-persistence asks that every token with ``a[t,i] >= tau``
  had ``a[s,i] >= rho*tau`` at some step ``s in [t-W, t-1]``.  The arriving token ``i = t`` has no earlier step, so
  read literally the property fails whenever a token attends strongly to itself; its entry is therefore excluded
  (the arrival is resident by arrival, and the budget rule below reserves its slot).
* **Budget condition** ``|U_t| <= k - 1`` with ``U_t = U_{s in [t-W, t-1]} H_s(rho*tau)``: the union must fit
  together with the arriving token, the rule of the registered ``R-LRU-H`` policy (:mod:`policies.rlruh`).
* **Best threshold** ``tau*`` = the smallest ``tau`` whose union fits at every step (the paper's "the heavy set
  just fills the budget"; the union only shrinks as ``tau`` grows, so this is well defined).
* **Stored entries only.**  A captured trace keeps the top entries of each row; the rest is the row's ``residual``.
  An unstored entry is at most the row's smallest stored weight, and is counted here as 0: heavy-set sizes are
  exact for ``tau`` above that weight, persistence is measured conservatively, and tail masses are given both
  without the residual and with it (the residual is tail mass whenever ``tau`` exceeds the row's smallest stored
  weight).  Regrets are of the stored mass; the true regret lies in ``[regret, regret + sum(residual)]``.

Relation to :mod:`adversary.persistence` (Theorem 4's quantities for generated workloads): the tail mass is taken
from there; ``persistence_violations`` there agrees with :func:`persistence_fraction` here (a test checks it).
Here the lookback of every heavy entry is kept, which the window and rho quantiles need, and the union is the one
over ``[t-W, t-1]`` with budget ``k - 1`` that the registered ``R-LRU-H`` protects (``heavy_union_size`` there is
the paper's ``[t-W, t]`` with budget ``k``, a maximum only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from adversary.persistence import tail_mass_per_step
from kvcore.engine import run_nm
from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace


def _rows(trace: AttentionTrace) -> np.ndarray:
    return np.repeat(np.arange(trace.T), np.diff(trace.indptr))


def _check_tau(tau: float, what: str = "tau") -> None:
    if not (tau > 0 and math.isfinite(tau)):
        raise ParameterError(f"{what} = {tau}: must be a positive number")


def _check_window(W: int) -> None:
    if isinstance(W, bool) or not isinstance(W, (int, np.integer)) or W < 1:
        raise ParameterError(f"W = {W!r}: the persistence window must be a positive integer")


def sink_mass(trace: AttentionTrace, n_sink: int = 4) -> np.ndarray:
    """Per step, the stored mass on the first ``n_sink`` tokens (StreamingLLM's attention sinks, Xiao et al., ICLR
    2024): ``sum_{i < n_sink} a[t, i]``."""
    if n_sink < 1:
        raise ParameterError(f"n_sink = {n_sink}: must be at least 1")
    w = np.where(trace.indices < n_sink, trace.weights, 0.0)
    return np.bincount(_rows(trace), weights=w, minlength=trace.T)


def heavy_set_sizes(trace: AttentionTrace, tau: float) -> np.ndarray:
    """Per step, ``|H_t(tau)|`` counted over stored entries (all ``i <= t``)."""
    _check_tau(tau)
    return np.bincount(_rows(trace)[trace.weights >= tau], minlength=trace.T)


def tail_mass(trace: AttentionTrace, tau: float) -> np.ndarray:
    """Per step, the stored light-tail mass ``M_t(tau) = sum_{i : a[t,i] < tau} a[t,i]`` (Section 7), by
    :func:`adversary.persistence.tail_mass_per_step`; a threshold above 1 (``tau* = x*/rho`` can be) makes every
    stored weight light."""
    _check_tau(tau)
    if tau > 1.0:
        return np.bincount(_rows(trace), weights=trace.weights, minlength=trace.T)
    return tail_mass_per_step(trace, tau)


def heavy_lookback(trace: AttentionTrace, tau: float, rho: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every heavy entry ``a[t,i] >= tau`` with ``i < t``, and how far back token ``i`` was last ``>= rho*tau``.

    Returns ``(steps, tokens, lookback)`` with ``lookback = t - max{s : i <= s < t, a[s,i] >= rho*tau}``, or
    ``inf`` when there is no such step.  ``(rho, W)``-persistence holds at an entry exactly when ``lookback <= W``.
    """
    _check_tau(tau)
    if not (0 < rho <= 1):
        raise ParameterError(f"rho = {rho}: must be in (0, 1]")
    last = np.full(trace.T, -1, dtype=np.int64)
    steps, tokens, back = [], [], []
    level = rho * tau
    for t, idx, w in trace.rows():
        heavy = (w >= tau) & (idx < t)
        if heavy.any():
            hi = idx[heavy]
            prev = last[hi]
            steps.append(np.full(hi.size, t))
            tokens.append(hi)
            back.append(np.where(prev >= 0, t - prev, np.inf))
        last[idx[w >= level]] = t
    if not steps:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(steps), np.concatenate(tokens), np.concatenate(back).astype(np.float64)


def persistence_fraction(trace: AttentionTrace, tau: float, rho: float, W: int) -> tuple[float, int]:
    """``(fraction, count)``: the share of the ``count`` heavy entries (``i < t``) at which ``(rho, W)``-persistence
    holds; ``(1.0, 0)`` when there are none (the property holds vacuously)."""
    _check_window(W)
    _, _, back = heavy_lookback(trace, tau, rho)
    return (float(np.mean(back <= W)) if back.size else 1.0), int(back.size)


def _quantile_needed(n: int, q: float) -> int:
    if not (0 < q <= 1):
        raise ParameterError(f"q = {q}: the fraction of heavy entries must be in (0, 1]")
    return max(1, math.ceil(q * n - 1e-12))


def persistence_window(trace: AttentionTrace, tau: float, rho: float, q: float = 1.0) -> float:
    """The smallest window ``W >= 1`` such that ``(rho, W)``-persistence holds at a fraction ``>= q`` of the heavy
    entries; ``inf`` if no window does (too many heavy entries have no earlier ``rho*tau`` step); ``1`` if vacuous."""
    _, _, back = heavy_lookback(trace, tau, rho)
    if back.size == 0:
        return 1.0
    need = _quantile_needed(back.size, q)
    return max(1.0, float(np.sort(back)[need - 1]))


def persistence_rho(trace: AttentionTrace, tau: float, W: int, q: float = 1.0) -> float:
    """The largest ``rho`` such that ``(rho, W)``-persistence holds at a fraction ``>= q`` of the heavy entries:
    per entry ``m = max_{s in [max(i, t-W), t-1]} a[s,i] / tau`` (0 if no such stored entry), and ``rho`` is the
    ``need``-th largest ``m``.  Values above 1 are reported as measured (the paper's ``rho`` lives in ``(0, 1]``);
    ``inf`` if there are no heavy entries."""
    _check_tau(tau)
    _check_window(W)
    rows = _rows(trace)
    order = np.lexsort((rows, trace.indices))  # by token, then step: each token's column in time order
    col_tok, col_step, col_w = trace.indices[order], rows[order], trace.weights[order]
    heavy = (trace.weights >= tau) & (trace.indices < rows)
    if not heavy.any():
        return math.inf
    ht, hi = rows[heavy], trace.indices[heavy]
    # positions of (token, step) in the column order: the window is the block [lo, pos) of the same token
    stride = trace.T + 1
    composite = col_tok * stride + col_step
    pos = np.searchsorted(composite, hi * stride + ht)
    lo = np.searchsorted(composite, hi * stride + np.maximum(hi, ht - W))
    m = np.array([col_w[a:b].max() if b > a else 0.0 for a, b in zip(lo, pos)]) / tau
    need = _quantile_needed(m.size, q)
    return float(np.sort(m)[::-1][need - 1])


def heavy_union_sizes(trace: AttentionTrace, level: float, W: int) -> np.ndarray:
    """Per step ``t``, ``|U_{s in [t-W, t-1]} H_s(level)|``: token ``i`` is in the union at ``t`` when one of its
    entries ``>= level`` lies in the ``W`` rows before ``t``.  Computed by merging, per token, the cover intervals
    ``[s+1, s+W]`` of its heavy rows (a difference array; no dense matrix)."""
    _check_tau(level, "level")
    _check_window(W)
    T = trace.T
    rows = _rows(trace)
    sel = trace.weights >= level
    tok, s = trace.indices[sel], rows[sel]
    order = np.lexsort((s, tok))
    tok, s = tok[order], s[order]
    start, end = s + 1, np.minimum(s + W, T - 1)
    same = np.zeros(tok.size, dtype=bool)
    same[1:] = tok[1:] == tok[:-1]
    prev_end = np.concatenate([[-1], end[:-1]])
    start = np.where(same, np.maximum(start, prev_end + 1), start)
    ok = start <= end
    diff = np.zeros(T + 1, dtype=np.int64)
    np.add.at(diff, start[ok], 1)
    np.add.at(diff, end[ok] + 1, -1)
    return np.cumsum(diff)[:T]


@dataclass
class ThresholdRecipe:
    """Section 7's recipe at budget ``k``: the best threshold and the regret bound Theorem 4 would give there."""

    k: int
    rho: float
    W: int
    tau_star: float
    max_union: int
    tail_stored: float
    tail_with_residual: float
    persistent_fraction: float
    heavy_entries: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def best_threshold(trace: AttentionTrace, k: int, rho: float, W: int) -> ThresholdRecipe:
    """``tau* = min{tau : max_t |U_t(rho*tau)| <= k - 1}`` and the tail mass ``sum_t M_t(tau*)`` (Section 7).

    The union at level ``x`` only changes when ``x`` crosses a stored weight, so ``x* = rho*tau*`` is a stored weight
    (found by bisection over the sorted distinct weights) or, if even the largest weight's union does not fit, just
    above the largest weight (empty union).  ``tail_with_residual`` adds every row's residual: an upper bound, and
    exact when ``tau*`` exceeds each row's smallest stored weight.
    """
    if k < 2:
        raise ParameterError(f"k = {k}: the recipe needs k >= 2 (one slot is the arriving token's)")
    if not (0 < rho <= 1):
        raise ParameterError(f"rho = {rho}: must be in (0, 1]")
    cand = np.unique(trace.weights[trace.weights > 0])

    def fits(x: float) -> bool:
        return int(heavy_union_sizes(trace, x, W).max(initial=0)) <= k - 1

    lo, hi = 0, cand.size  # answer index in [0, size]; index size means "above every weight"
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(float(cand[mid])):
            hi = mid
        else:
            lo = mid + 1
    if lo < cand.size:
        x = float(cand[lo])
    else:  # no stored weight's union fits: the level just above them all has an empty union
        x = float(np.nextafter(cand[-1], np.inf)) if cand.size else 1.0
    return recipe_at(trace, k, rho, W, x / rho)


# --------------------------------------------------------------------------------------------------------------------
# Replay against the exact optimum
# --------------------------------------------------------------------------------------------------------------------


def regret_per_step_of_schedule(trace: AttentionTrace, evictions, tokens: range | None = None) -> np.ndarray:
    """Per-step NM regret of a drop schedule ``[(t, token)]``, by :func:`kvcore.measure.schedule_regret` (token ``i``
    is resident on ``[i, drop_i)``; only the entries of ``tokens`` when given)."""
    from kvcore.measure import schedule_regret

    return schedule_regret(trace, evictions, tokens)


@dataclass
class ReplayRow:
    """One policy on one trace at budget ``k``: mean regret over ``seeds`` runs and its gap to the optimum."""

    policy: str
    k: int
    regret: float
    ci95: float
    seeds: int
    opt_regret: float
    per_step: np.ndarray

    @property
    def tracking_gap(self) -> float:
        return self.regret - self.opt_regret

    def as_dict(self) -> dict:
        return {"policy": self.policy, "k": self.k, "regret": self.regret, "ci95": self.ci95, "seeds": self.seeds,
                "opt_regret": self.opt_regret, "tracking_gap": self.tracking_gap}


def nm_policy_names() -> list[str]:
    """Every registered policy that runs in NM (``policies.all_policies("nm")``), by name."""
    from policies import all_policies

    return [p.name for p in all_policies("nm")]


def replay_policy(trace: AttentionTrace, k: int, name: str, opt_regret: float, seeds: int = 5,
                  **params) -> ReplayRow:
    """Run one registered policy in NM; a randomized policy runs with seeds ``0..seeds-1`` and reports the mean with
    a normal-approximation 95% half-width ``1.96 * sd / sqrt(seeds)`` (a deterministic one runs once)."""
    from policies import get, make

    runs = [run_nm(make(name, **params), trace, k, seed=s, record=True)
            for s in range(1 if get(name).deterministic else seeds)]
    costs = np.array([r.cost for r in runs])
    ci = 1.96 * costs.std(ddof=1) / math.sqrt(costs.size) if costs.size > 1 else 0.0
    per_step = np.mean([r.per_step for r in runs], axis=0)
    return ReplayRow(get(name).name, k, float(costs.mean()), float(ci), costs.size, opt_regret, per_step)


def replay_all(trace: AttentionTrace, k: int, names: list[str] | None = None, seeds: int = 5
               ) -> tuple[list[ReplayRow], np.ndarray, float]:
    """Every NM policy (default: all registered) at budget ``k`` against the exact optimum ``nm_opt``.

    Returns ``(rows, opt_per_step, opt_regret)``; each row's ``tracking_gap = regret - opt_regret`` (SPEC section 4)
    is ``>= 0`` up to the LP's proven gap bound, since the optimum is exact.
    """
    from kvcore.optima import nm_opt

    opt = nm_opt(trace, k, record=True)
    opt_steps = regret_per_step_of_schedule(trace, opt.evictions or [])
    rows = [replay_policy(trace, k, n, opt.cost, seeds) for n in (names or nm_policy_names())]
    return rows, opt_steps, float(opt.cost)


@dataclass
class Theorem4Check:
    """Theorem 4 on one trace at budget ``k``: premise, bound, and R-LRU-H's measured regret."""

    recipe: ThresholdRecipe
    rlruh_regret: float
    opt_regret: float

    @property
    def premise_holds(self) -> bool:
        return self.recipe.persistent_fraction == 1.0 and self.recipe.max_union <= self.recipe.k - 1

    @property
    def bound_holds(self) -> bool:
        return self.rlruh_regret <= self.recipe.tail_stored + 1e-9

    def as_dict(self) -> dict:
        return {**self.recipe.as_dict(), "rlruh_regret": self.rlruh_regret, "opt_regret": self.opt_regret,
                "premise_holds": self.premise_holds, "bound_holds": self.bound_holds}


def recipe_at(trace: AttentionTrace, k: int, rho: float, W: int, tau: float) -> ThresholdRecipe:
    """The quantities of :class:`ThresholdRecipe` at a given threshold ``tau`` instead of ``tau*``."""
    tail = tail_mass(trace, tau)
    frac, n = persistence_fraction(trace, tau, rho, W)
    return ThresholdRecipe(k, rho, W, tau, int(heavy_union_sizes(trace, rho * tau, W).max(initial=0)),
                           float(tail.sum()), float(tail.sum() + trace.residual.sum()), frac, n)


def theorem4_check(trace: AttentionTrace, k: int, rho: float, W: int, opt_regret: float | None = None,
                   tau: float | None = None) -> Theorem4Check:
    """Run the registered ``R-LRU-H`` with ``(rho, tau, W)`` at budget ``k`` (``tau`` defaults to ``tau*``) and
    compare its stored-mass regret with ``sum_t M_t(tau)`` (Eq. 13).  The premise (full persistence of earlier
    tokens, union fits) is reported beside the verdict: a violated bound with the premise holding refutes the
    theorem on that trace."""
    from kvcore.optima import nm_opt
    from policies import make

    recipe = best_threshold(trace, k, rho, W) if tau is None else recipe_at(trace, k, rho, W, tau)
    regret = run_nm(make("R-LRU-H", rho=rho, tau=recipe.tau_star, W=W), trace, k).cost
    opt = nm_opt(trace, k).cost if opt_regret is None else opt_regret
    return Theorem4Check(recipe, float(regret), float(opt))
