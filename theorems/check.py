"""Checking API for a user's own policy (issue 6): assert the bounds that apply, inside any test.

Usage in a user's hypothesis test (five lines)::

    from hypothesis import given
    from adversary.strategies import paging_traces
    from theorems.check import assert_competitive

    @given(paging_traces(max_items=5))
    def test_my_policy(trace):
        assert_competitive(MyPolicy, trace, k=3)

Bounds (SPEC section 5):
    deterministic policy, RM: ``ALG_k(σ) <= k/(k-h+1) * OPT_h(σ)`` (additive constant 0, both caches start empty);
    randomized policy, RM, h = k: ``E[ALG_k(σ)] <= (2H_k - 1) * OPT_k(σ)`` (Marking's bound; the mean over seeds with
    a 95% Student-t interval: violated only when the whole interval lies above the bound);
    NM: regret on decoy-and-sleeper must stop growing with the suffix length (:func:`assert_bounded_regret`).
A contract violation is raised as :class:`kvcore.errors.ContractViolation`, never reported as a ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kvcore.engine import INTERFACE_METHODS, run
from kvcore.errors import ParameterError
from kvcore.formulas import harmonic, landlord_bound
from kvcore.optima import optimum
from kvcore.traces import AttentionTrace, PagingTrace

from .verify import mean_ci, ratio, within


class BoundViolation(AssertionError):
    """A policy exceeded a bound that applies to it; carries the ratio, the bound and the trace."""

    def __init__(self, message: str, ratio: float, bound: float, trace: PagingTrace | AttentionTrace):
        super().__init__(message)
        self.ratio = ratio
        self.bound = bound
        self.trace = trace


def describe_trace(trace: PagingTrace | AttentionTrace, limit: int = 60) -> str:
    """A short printable form: the request list (paging) or the rows (attention), cut at ``limit`` steps."""
    if isinstance(trace, PagingTrace):
        if trace.is_unit_single:
            seq = trace.items.tolist()
            body = ", ".join(map(str, seq[:limit])) + (", ..." if len(seq) > limit else "")
            return f"[{body}] (T={trace.T})"
        steps = [f"{q.tolist()}@{c.tolist()}" for _, q, c in list(trace.steps())[:limit]]
        return "[" + ", ".join(steps) + (", ..." if trace.T > limit else "") + f"] (T={trace.T})"
    rows = [{int(i): round(float(w), 4) for i, w in zip(ix, ww)} for _, ix, ww in list(trace.rows())[:limit]]
    return f"rows {rows}" + (" ..." if trace.T > limit else "") + f" (T={trace.T})"


def policy_factory(policy: Any) -> Callable[[], Any]:
    """Accept a policy class, a zero-argument factory, or an instance; return a factory of fresh instances."""
    if isinstance(policy, type):
        return policy
    if all(callable(getattr(policy, m, None)) for m in INTERFACE_METHODS):
        return lambda: policy
    if callable(policy):
        return policy
    raise ParameterError(f"{policy!r} is neither a policy class, a policy instance nor a factory")


@dataclass
class Measured:
    ratio: float
    bound: float
    alg: float
    opt: float
    seeds: int
    ci: tuple[float, float] | None


def measure_ratio(policy: Any, trace: PagingTrace | AttentionTrace, k: int, h: int | None = None,
                  model: str = "rm", seeds: int = 16, theta: float = 0.1) -> Measured:
    """Ratio of ``policy`` (cache k) to OPT (cache h) on ``trace`` and the bound that applies to the policy."""
    make = policy_factory(policy)
    h = k if h is None else h
    first = make()
    deterministic = bool(getattr(first, "deterministic", True))
    opt = optimum(trace, h, model, theta=theta).cost
    if deterministic:
        alg = run(first, trace, k, model, seed=0, theta=theta).cost
        return Measured(ratio(alg, opt), landlord_bound(k, h), alg, opt, 1, None)
    if h != k:
        raise ParameterError(f"h = {h}: the randomized bound 2H_k - 1 is stated for h = k only")
    costs = [run(make() if s else first, trace, k, model, seed=s, theta=theta).cost for s in range(seeds)]
    mean, lo, hi = mean_ci(costs)
    return Measured(ratio(mean, opt), 2 * harmonic(k) - 1, mean, opt, seeds, (ratio(lo, opt), ratio(hi, opt)))


def assert_competitive(policy: Any, trace: PagingTrace | AttentionTrace, k: int, h: int | None = None,
                       model: str = "rm", seeds: int = 16, theta: float = 0.1) -> Measured:
    """Raise :class:`BoundViolation` (an AssertionError) when the policy exceeds its competitive bound on ``trace``.

    Deterministic: ``ALG_k <= k/(k-h+1) OPT_h``.  Randomized (h = k): the seed-mean ratio's 95% interval must reach
    down to ``2H_k - 1``.  The message holds the ratio, the bound and the trace.
    """
    m = measure_ratio(policy, trace, k, h, model, seeds, theta)
    low = m.ratio if m.ci is None else m.ci[0]
    if not within(low, m.bound):
        kind = "deterministic k/(k-h+1)" if m.ci is None else f"randomized 2H_k-1 (mean of {m.seeds} seeds)"
        name = getattr(policy, "name", None) or getattr(policy, "__name__", type(policy).__name__)
        raise BoundViolation(
            f"{name} violates the {kind} bound at k={k}, h={k if h is None else h}, model={model}: "
            f"ratio {m.ratio:.6g} (ALG {m.alg:.6g} / OPT {m.opt:.6g}) > bound {m.bound:.6g} on trace "
            f"{describe_trace(trace)}", m.ratio, m.bound, trace)
    return m


def assert_prefix_consistent(policy: Any, trace: PagingTrace | AttentionTrace, k: int, model: str = "rm",
                             seed: int = 0, theta: float = 0.1, cuts: int = 4) -> None:
    """Information rule: a decision at step ``t`` may depend only on steps ``<= t``.

    The policy is run on ``trace`` and on prefixes of it (``cuts`` cut points); its evictions during each prefix must
    be identical.  A policy that reads the future through any side channel (e.g. by walking up the call stack to the
    engine's trace) decides differently once the future is cut off, and is reported as a
    :class:`~kvcore.errors.ContractViolation` naming the first differing step and item.
    """
    from kvcore.errors import ContractViolation

    make = policy_factory(policy)
    full = run(make(), trace, k, model, seed=seed, theta=theta, record=True).evictions
    T = trace.T
    for cut in sorted({max(1, T * j // (cuts + 1)) for j in range(1, cuts + 1)}):
        part = trace.prefix(cut)
        got = run(make(), part, k, model, seed=seed, theta=theta, record=True).evictions
        want = [e for e in full if e[0] < cut]
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            step, item = (got + want)[first] if first < len(got) + len(want) else (cut, None)
            name = getattr(make(), "name", type(make()).__name__)
            raise ContractViolation(str(name), int(step), f"its decision depends on steps after {step} (the run "
                                    f"cut at step {cut} evicts differently): the policy reads the future", item)


def regret_growth(policy: Any, traces: list[AttentionTrace], k: int) -> list[float]:
    """NM regret of ``policy`` on each trace of a family that only lengthens the suffix (same prefix)."""
    make = policy_factory(policy)
    return [run(make(), tr, k, "nm").cost for tr in traces]


def assert_bounded_regret(policy: Any, traces: list[AttentionTrace], k: int, per_step: float = 0.05) -> list[float]:
    """NM: raise when regret keeps growing along a family of traces with longer and longer suffixes.

    Bounded regret (Lemma 1) means the increase between the two longest members, per added suffix step, is at most
    ``per_step`` (an unbounded policy such as ACC on decoy-and-sleeper pays close to 1 per step).
    """
    if len(traces) < 2:
        raise ParameterError("assert_bounded_regret needs at least two traces of increasing length")
    regrets = regret_growth(policy, traces, k)
    added = traces[-1].T - traces[-2].T
    if added <= 0:
        raise ParameterError("the traces must grow in length")
    slope = (regrets[-1] - regrets[-2]) / added
    if slope > per_step:
        name = getattr(policy, "name", None) or getattr(policy, "__name__", type(policy).__name__)
        raise BoundViolation(
            f"{name}: NM regret keeps growing with the suffix ({slope:.4g} per step > {per_step}); regrets "
            f"{[round(r, 4) for r in regrets]} at lengths {[t.T for t in traces]}; longest trace "
            f"{describe_trace(traces[-1], 12)}", slope, per_step, traces[-1])
    return regrets
