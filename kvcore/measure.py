"""The measurement core: one policy on one trace with cache ``k``, against the exact optimum with cache ``h``.

Every number the toolkit reports about a policy -- a table row of the proof-checking suite, the user assertion API,
the fuzzer, ``paper_check simulate``, the real-trace replay -- comes from :func:`measure`, so a fix here reaches
all of them.

Measures (SPEC section 4)
    ``ratio = cost(ALG) / cost(OPT)``; ``inf`` when ``OPT = 0 < ALG`` and 1 when both are 0.
    NM: ``cost`` is the attention-mass regret (paper Eq. 4); ``tracking gap = regret(ALG) - regret(OPT)``.
    Randomized policies: the mean over seeds with a two-sided Student-t 95% confidence interval.

The randomized-policy rule (the only place it is written down)
    A bound on an *expectation* is contradicted only when the whole confidence interval lies above it, so a
    randomized policy is judged at the interval's lower end; a deterministic policy, which runs once, at its value.
    :meth:`Measurement.judged` returns that value and :meth:`Measurement.within` compares it with a bound.

A policy is given as an instance, a class, or a zero-argument factory; :func:`policy_factory` turns each into a
factory of fresh instances (an instance is reused: the engine resets it before every run).  Registered names and
``module:Class`` strings are turned into factories by :func:`policies.resolve`, which builds on this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .engine import INTERFACE_METHODS, MODELS, check_capacity, policy_name, run
from .errors import ParameterError
from .optima import OptResult, optimum
from .traces import AttentionTrace, PagingTrace, require_trace

# Floating-point slack for comparing a computed cost with a bound: costs are sums of up to ~1e7 terms.
REL_TOL = 1e-9
CONFIDENCE = 0.95
BOUND_ON = ("ratio", "cost", "gap")


def ratio(alg: float, opt: float) -> float:
    """``alg / opt``; ``inf`` when ``opt = 0 < alg``, 1 when both are 0 (SPEC section 4)."""
    if opt > 0:
        return alg / opt
    return math.inf if alg > 0 else 1.0


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval; one value (or no spread) gives a zero-width interval."""
    v = np.asarray(values, dtype=float)
    m = float(v.mean())
    if v.size < 2 or float(v.std(ddof=1)) == 0.0:
        return m, m, m
    from scipy import stats  # imported here: scipy.stats costs about a second of every command's startup

    half = float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return m, m - half, m + half


def familywise(n: int, confidence: float = CONFIDENCE) -> float:
    """The per-interval confidence that keeps ``n`` simultaneous intervals at ``confidence`` together (Bonferroni;
    Dunn, JASA 1961): ``1 - (1 - confidence) / n``.  Without it, 60 intervals at 95% put about three bounds "outside"
    by chance -- the failure mode of a check that grows with the profile's sizes."""
    if n < 1:
        raise ParameterError(f"n = {n}: at least one interval")
    return 1.0 - (1.0 - confidence) / n


def within(value: float, bound: float) -> bool:
    """``value <= bound`` up to floating-point slack."""
    return value <= bound + REL_TOL * max(1.0, abs(bound))


def is_policy(obj: Any) -> bool:
    """True when ``obj`` has the five engine interface methods (:mod:`kvcore.engine`)."""
    return all(callable(getattr(obj, m, None)) for m in INTERFACE_METHODS)


def policy_factory(policy: Any) -> Callable[[], Any]:
    """A policy instance, class, or zero-argument factory -> a factory of instances (an instance is reused)."""
    if isinstance(policy, type):
        return policy
    if is_policy(policy):
        return lambda: policy
    if callable(policy):
        return policy
    raise TypeError(f"policy = {policy!r}: expected a policy instance, a policy class or a zero-argument factory")


@dataclass(frozen=True)
class Measurement:
    """One policy on one trace: its cost on every seed it ran with, and the optimum's cost with cache ``h``."""

    policy: str
    model: str
    k: int
    h: int
    deterministic: bool
    seeds: tuple[int, ...]
    costs: tuple[float, ...]
    misses: tuple[int, ...]
    opt_cost: float
    opt_misses: int | None = None
    opt: OptResult | None = None
    evictions: list[tuple[int, int]] | None = None    # the first run's schedule, with record=True
    confidence: float = CONFIDENCE

    @property
    def cost(self) -> float:
        """ALG's cost: the value of a deterministic run, the seed mean of a randomized one."""
        return self.ci[0]

    @cached_property  # read by cost, ratio, judged and as_dict; the t quantile is worth computing once
    def ci(self) -> tuple[float, float, float]:
        """``(mean, low, high)`` of the cost over seeds at ``confidence`` (zero width for one run)."""
        return mean_ci(self.costs, self.confidence)

    @property
    def ratio(self) -> float:
        return ratio(self.cost, self.opt_cost)

    @property
    def tracking_gap(self) -> float | None:
        """NM: ``regret(ALG) - regret(OPT)``; None in RM."""
        return self.cost - self.opt_cost if self.model == "nm" else None

    def value(self, on: str = "ratio", cost: float | None = None) -> float:
        """The measure ``on`` (``"ratio"``, ``"cost"`` or ``"gap"``) of ``cost`` (default: the mean cost)."""
        c = self.cost if cost is None else cost
        if on == "ratio":
            return ratio(c, self.opt_cost)
        if on == "cost":
            return c
        if on == "gap":
            return c - self.opt_cost
        raise ParameterError(f"on = {on!r}: must be one of {BOUND_ON}")

    def judged(self, on: str = "ratio") -> float:
        """The value a bound is checked against: the run's value (deterministic) or the lower end of the seed
        mean's confidence interval (randomized: an expectation bound fails only when the whole interval is above)."""
        return self.value(on, self.cost if self.deterministic else self.ci[1])

    def within(self, bound: float, on: str = "ratio") -> bool:
        return within(self.judged(on), bound)

    def as_dict(self) -> dict:
        mean, lo, hi = self.ci
        out = {"policy": self.policy, "model": self.model, "capacity": self.k, "opt_capacity": self.h,
               "cost": mean, "misses": float(np.mean(self.misses)) if len(self.misses) > 1 else self.misses[0],
               "opt_cost": self.opt_cost, "opt_misses": self.opt_misses, "ratio": self.ratio,
               "seeds": list(self.seeds)}
        if len(self.costs) > 1:
            out.update(ci_low=lo, ci_high=hi, confidence=self.confidence)
        if self.model == "nm":
            out["tracking_gap"] = self.tracking_gap
        return out


def measure(policy: Any, trace: PagingTrace | AttentionTrace, k: int, h: int | None = None, *, model: str = "rm",
            seeds: Iterable[int] = range(16), theta: float = 0.1, opt: OptResult | float | None = None,
            with_opt: bool = True, record: bool = False, confidence: float = CONFIDENCE) -> Measurement:
    """Run ``policy`` with cache ``k`` on ``trace`` in ``model`` and compare with the exact optimum with cache ``h``.

    A deterministic policy (``policy.deterministic`` true or absent) runs once, with the first seed; a randomized
    one once per seed.  ``opt`` may be passed when the caller already has the optimum for this trace and ``h``
    (an :class:`~kvcore.optima.OptResult` or its cost); ``with_opt=False`` skips it (``opt_cost`` is then NaN).
    ``record=True`` keeps the first run's eviction schedule (``evictions``; the checked engine, no kernel).
    ``confidence``: of the seed mean's interval; a caller judging many measurements at once passes the
    family-wise level (:func:`familywise`), so that chance alone does not produce a violation.
    """
    require_trace(trace, "trace")
    k = check_capacity(k, "k")
    h = k if h is None else check_capacity(h, "h")
    if h > k:
        raise ParameterError(f"h = {h} exceeds k = {k} (resource augmentation compares with a smaller optimum)")
    if model not in MODELS:
        raise ParameterError(f"model = {model!r}: must be one of {MODELS}")
    make = policy_factory(policy)
    first = make()
    deterministic = bool(getattr(first, "deterministic", True))
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ParameterError("seeds: at least one seed is needed")
    if deterministic:
        seeds = seeds[:1]
    costs, misses, evictions = [], [], None
    for i, s in enumerate(seeds):
        res = run(first if i == 0 else make(), trace, k, model, seed=s, theta=theta, record=record and i == 0)
        costs.append(float(res.cost))
        misses.append(int(res.misses))
        if i == 0 and record:
            evictions = res.evictions
    opt_res = None
    if isinstance(opt, OptResult):
        opt_res, opt_cost, opt_misses = opt, float(opt.cost), opt.misses
    elif opt is not None:
        opt_cost, opt_misses = float(opt), None
    elif with_opt:
        opt_res = optimum(trace, h, model, theta=theta)
        opt_cost, opt_misses = float(opt_res.cost), opt_res.misses
    else:
        opt_cost, opt_misses = math.nan, None
    return Measurement(policy_name(first), model, k, h, deterministic, seeds, tuple(costs), tuple(misses),
                       opt_cost, opt_misses, opt_res, evictions, confidence)


def schedule_regret(trace: AttentionTrace, evictions: Iterable[tuple[int, int]], tokens: range | None = None,
                    min_weight: float = 0.0) -> np.ndarray:
    """Per-step NM regret (paper Eq. 4) of a drop schedule ``[(t, token), ...]``.

    Token ``i`` is resident on ``[i, drop_i)`` (``drop_i = T`` when it is never dropped), so step ``t`` loses its
    stored entries ``a[t, i]`` with ``t >= drop_i``.  ``tokens`` restricts the count to those tokens, ``min_weight``
    to entries ``a[t, i] >= min_weight`` (e.g. the heavy entries Theorem 4 says are never lost).  Stored entries
    only: the trace's residual is never charged.
    """
    T = trace.T
    drop = np.full(T, T, dtype=np.int64)
    for t, i in evictions:
        drop[i] = min(drop[i], t)
    rows = np.repeat(np.arange(T), np.diff(trace.indptr))
    lost = rows >= drop[trace.indices]
    if tokens is not None:
        lost &= (trace.indices >= tokens.start) & (trace.indices < tokens.stop)
    if min_weight > 0.0:
        lost &= trace.weights >= min_weight
    return np.bincount(rows[lost], weights=trace.weights[lost], minlength=T)
