"""Checking API for a user's own policy: assert the bounds that apply, inside any test.

Usage in a user's hypothesis test (five lines)::

    from hypothesis import given
    from adversary.strategies import paging_traces
    from verify.check import assert_competitive

    @given(paging_traces(max_items=5))
    def test_my_policy(trace):
        assert_competitive(MyPolicy, trace, k=3)

Bounds (SPEC section 5), chosen by :func:`promised_bound`: the policy's declared ``guarantee``
(:data:`kvcore.formulas.GUARANTEES`) when it has one, otherwise ``k/(k-h+1)`` for a deterministic policy
(``ALG_k(σ) <= k/(k-h+1) OPT_h(σ)``, additive constant 0, both caches start empty) and Marking's ``2H_k - 1`` on the
expectation of a randomized one (h = k).  Every number comes from :func:`kvcore.measure.measure`; a randomized
policy is judged at the lower end of its seed mean's 95% interval (the rule lives there).  NM: regret on a family of
traces that only lengthens a suffix must stop growing (:func:`assert_bounded_regret`).
A contract violation is raised as :class:`kvcore.errors.ContractViolation`, never reported as a ratio.

Importing this module loads the exact optima's compiled kernels (Belady, the network simplex) once, so that the
one-time cost -- importing numba and reading the cached machine code, about 0.3 s -- is paid at import and not inside
the first example of a user's hypothesis test, whose default deadline is 200 ms.
"""

from __future__ import annotations

from typing import Any

from kvcore.engine import policy_name, run
from kvcore.errors import ContractViolation, ParameterError
from kvcore.formulas import GUARANTEES, Guarantee
from kvcore.measure import Measurement, measure, policy_factory
from kvcore.optima import optimum
from kvcore.traces import AttentionTrace, PagingTrace


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


def promised_bound(policy: Any, k: int, h: int | None = None) -> Guarantee:
    """The competitive bound ``policy`` promises at ``k`` and ``h``: its declared ``guarantee`` (policy metadata,
    :mod:`policies.registry`) or, when it declares none, the bound its kind admits -- ``k/(k-h+1)`` for a
    deterministic policy, ``2H_k - 1`` in expectation for a randomized one.  Raises a ParameterError when the
    declared guarantee is not one of :data:`~kvcore.formulas.GUARANTEES` or the bound is not stated for ``h < k``."""
    probe = policy_factory(policy)()
    name = getattr(probe, "guarantee", None)
    if name is None:
        name = "k/(k-h+1)" if getattr(probe, "deterministic", True) else "2H_k-1"
    g = GUARANTEES.get(name) if isinstance(name, str) else None
    if g is None:
        raise ParameterError(f"policy {policy_name(probe)}: declares guarantee {name!r}, not one of "
                             f"{sorted(GUARANTEES)}")
    h = k if h is None else h
    if not g.applies(k, h):
        raise ParameterError(f"h = {h}: the bound {g.name} of {policy_name(probe)} is stated for h = k only")
    return g


def assert_competitive(policy: Any, trace: PagingTrace | AttentionTrace, k: int, h: int | None = None,
                       model: str = "rm", seeds: int = 16, theta: float = 0.1) -> Measurement:
    """Raise :class:`BoundViolation` (an AssertionError) when the policy exceeds :func:`promised_bound` on ``trace``.

    The message holds the ratio, the bound and the trace; the measurement is returned otherwise.
    """
    g = promised_bound(policy, k, h)
    m = measure(policy, trace, k, h, model=model, seeds=range(seeds), theta=theta)
    bound = g.value(k, m.h)
    if not m.within(bound):
        kind = g.name if m.deterministic else f"{g.name} in expectation (mean of {len(m.costs)} seeds, 95% interval)"
        raise BoundViolation(
            f"{m.policy} violates the bound {kind} at k={k}, h={m.h}, model={model}: ratio {m.ratio:.6g} "
            f"(ALG {m.cost:.6g} / OPT {m.opt_cost:.6g}) > bound {bound:.6g} on trace {describe_trace(trace)}",
            m.ratio, bound, trace)
    return m


def assert_prefix_consistent(policy: Any, trace: PagingTrace | AttentionTrace, k: int, model: str = "rm",
                             seed: int = 0, theta: float = 0.1, cuts: int = 4) -> None:
    """Information rule: a decision at step ``t`` may depend only on steps ``<= t``.

    The policy is run on ``trace`` and on prefixes of it (``cuts`` cut points); its evictions during each prefix must
    be identical.  A policy that reads the future through any side channel (e.g. by walking up the call stack to the
    engine's trace) decides differently once the future is cut off, and is reported as a
    :class:`~kvcore.errors.ContractViolation` naming the first differing step and item.
    """
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
            raise ContractViolation(policy_name(make()), int(step), f"its decision depends on steps after {step} "
                                    f"(the run cut at step {cut} evicts differently): the policy reads the future",
                                    item)


def gap_growth(policy: Any, family: list[AttentionTrace], k: int) -> tuple[float, list[float]]:
    """NM tracking gap of ``policy`` on each member of a family that only lengthens a suffix (same prefix), and its
    growth per added step between the two longest members: ``(gap[-1] - gap[-2]) / (T[-1] - T[-2])``.  An
    unbounded policy such as ACC on decoy-and-sleeper grows by close to 1 per step (Theorem 2); a bounded one by 0
    (Lemma 1)."""
    if len(family) < 2:
        raise ParameterError("a regret family needs at least two traces of increasing length")
    added = family[-1].T - family[-2].T
    if added <= 0:
        raise ParameterError("the traces of a regret family must grow in length")
    gaps = [measure(policy, tr, k, model="nm", seeds=(0,)).tracking_gap for tr in family]
    return (gaps[-1] - gaps[-2]) / added, gaps


def assert_bounded_regret(policy: Any, traces: list[AttentionTrace], k: int, per_step: float = 0.05) -> list[float]:
    """NM: raise when the tracking gap keeps growing along a family of traces with longer and longer suffixes.

    Bounded regret (Lemma 1) means :func:`gap_growth` is at most ``per_step``.  Returns the gaps."""
    slope, gaps = gap_growth(policy, traces, k)
    if slope > per_step:
        raise BoundViolation(
            f"{policy_name(policy_factory(policy)())}: NM regret keeps growing with the suffix ({slope:.4g} per step "
            f"> {per_step}); tracking gaps {[round(g, 4) for g in gaps]} at lengths {[t.T for t in traces]}; "
            f"longest trace {describe_trace(traces[-1], 12)}", slope, per_step, traces[-1])
    return gaps


def _load_optimum_kernels() -> None:
    """Solve one tiny RM and one tiny NM optimum (see the module docstring: the kernels load here, not in a test)."""
    optimum(PagingTrace.unit([0, 1, 0]), 1)
    optimum(AttentionTrace.from_rows([{0: 1.0}, {0: 0.5, 1: 0.5}]), 1, model="nm")


_load_optimum_kernels()
