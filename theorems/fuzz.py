"""Fuzz a policy for competitiveness: targeted hypothesis search plus the known constructions (issue 6).

``fuzz_policy`` searches traces on which a policy's ratio to the exact optimum (RM) or its NM regret is as large as
possible.  Search is *targeted*: every example reports its ratio to ``hypothesis.target``, so generation climbs
toward the worst case instead of sampling blindly (MacIver & Donaldson, "Test-Case Reduction via Test-Case
Generation: Insights from the Hypothesis Reducer", ECOOP 2020; Löscher & Sagonas, "Targeted property-based
testing", ISSTA 2017).  When a bound is exceeded, hypothesis shrinks the trace to a minimal one, which is saved as a
trace file that ``python -m paper_check simulate`` replays.

Bounds checked:
    RM, deterministic policy:   ratio <= k/(k-h+1) with h = k, i.e. <= k (Eq. 8 / Sleator-Tarjan);
    RM, randomized policy:      mean ratio over seeds <= 2H_k - 1 (Marking's bound), 95% interval;
    NM (any policy):            regret may not grow with the length of the trace on which OPT's regret is 0
                                (decoy-and-sleeper, Theorem 2 vs Lemma 1): the search maximizes the tracking gap per
                                step and the known constructions test growth with the suffix length.
A policy that breaks the engine contract is reported as a contract violation, never as a ratio.
"""

from __future__ import annotations

import importlib
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings, target
from hypothesis import strategies as st

from kvcore.engine import INTERFACE_METHODS, run
from kvcore.errors import ContractViolation, ParameterError
from kvcore.formulas import harmonic, landlord_bound
from kvcore.optima import optimum
from kvcore.traces import AttentionTrace, PagingTrace, save_trace

from .check import assert_prefix_consistent, describe_trace
from .verify import mean_ci, ratio, within


def load_target(spec: str) -> Callable[[], Any]:
    """A registered policy name, or ``module:Class`` importable from the current directory -> instance factory.

    Raises ParameterError (one line) when the module cannot be imported, the attribute is missing, or the object
    does not follow the policy interface (kvcore.engine: reset, admit, hit, evict, observe).
    """
    import policies

    if ":" not in spec:
        info = policies.get(spec)
        return info.cls
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ParameterError(f"target {spec!r}: expected NAME or module:Class")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(mod_name)
    except Exception as exc:  # any failure while importing user code is reported in one line
        raise ParameterError(f"target {spec!r}: cannot import module {mod_name!r}: "
                             f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ParameterError(f"target {spec!r}: module {mod_name!r} has no attribute {attr!r}")
    if not callable(obj):
        raise ParameterError(f"target {spec!r}: {attr!r} is not a class or factory")
    try:
        probe = obj()
    except Exception as exc:
        raise ParameterError(f"target {spec!r}: cannot construct {attr}(): {type(exc).__name__}: {exc}") from None
    missing = [m for m in INTERFACE_METHODS if not callable(getattr(probe, m, None))]
    if missing:
        raise ParameterError(f"target {spec!r}: does not follow the policy interface (missing {', '.join(missing)})")
    return obj


@dataclass
class FuzzReport:
    target: str
    model: str
    capacity: int
    bound: float
    bound_name: str
    examples: int = 0
    seconds: float = 0.0
    search_worst: float = 0.0
    worst: float = 0.0
    worst_trace: PagingTrace | AttentionTrace | None = None
    worst_source: str = ""
    violation: bool = False
    contract_violation: str | None = None
    trace_file: str | None = None
    constructions: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if self.contract_violation:
            return "contract violation"
        return "violates" if self.violation else "no violation found"

    def as_dict(self) -> dict:
        w = self.worst
        return {"target": self.target, "model": self.model, "capacity": self.capacity, "bound": self.bound,
                "bound_name": self.bound_name, "examples": self.examples, "seconds": round(self.seconds, 2),
                "search_worst": "inf" if math.isinf(self.search_worst) else self.search_worst,
                "worst": "inf" if math.isinf(w) else w, "worst_source": self.worst_source,
                "verdict": self.verdict, "contract_violation": self.contract_violation,
                "trace_file": self.trace_file,
                "constructions": {k: ("inf" if math.isinf(v) else v) for k, v in self.constructions.items()}}


class _Exceeded(Exception):
    """Raised inside the property when a bound is exceeded, so that hypothesis shrinks the trace."""


def _rm_bound(k: int, deterministic: bool) -> tuple[float, str]:
    if deterministic:
        return landlord_bound(k, k), "k/(k-h+1) with h = k (deterministic, Eq. 8)"
    return 2 * harmonic(k) - 1, "2H_k - 1 in expectation (randomized, Marking)"


def _rm_ratio(make, trace: PagingTrace, k: int, deterministic: bool, seeds: int) -> float:
    """The ratio whose excess over the bound counts as a violation: the CI's lower end for randomized policies."""
    opt = optimum(trace, k, "rm").cost
    if deterministic:
        return ratio(run(make(), trace, k, "rm").cost, opt)
    _, lo, _ = mean_ci([run(make(), trace, k, "rm", seed=s).cost for s in range(seeds)])
    return ratio(lo, opt)


def _nm_growth(make, family: tuple[AttentionTrace, ...], k: int) -> tuple[float, AttentionTrace]:
    """Tracking-gap growth per suffix step between the two longest members of a family that only lengthens its
    suffix (Theorem 2: ACC grows ~1 per step on decoy-and-sleeper; Lemma 1: decay stops the growth)."""
    gaps = [run(make(), tr, k, "nm").cost - optimum(tr, k, "nm").cost for tr in family[-2:]]
    return (gaps[1] - gaps[0]) / (family[-1].T - family[-2].T), family[-1]


def _known_constructions(make, k: int, model: str, deterministic: bool, seeds: int) -> dict[str, tuple]:
    """The constructions of the paper and of SPEC section 5, run against the policy: name -> (measure, trace)."""
    from adversary.decoy_sleeper import decoy_and_sleeper
    from adversary.lfu_priming import lfu_priming
    from adversary.lower_bounds import adaptive_k_plus_one, cyclic_k_plus_one, uniform_k_plus_one

    out = {}
    if model == "rm":
        T = 20 * (k + 1)
        traces = {"adaptive k+1": adaptive_k_plus_one(make(), k, T), "cyclic k+1": cyclic_k_plus_one(k, T),
                  "uniform k+1": uniform_k_plus_one(k, T, seed=0), "LFU priming m=k^2": lfu_priming(k, k * k)}
        for name, tr in traces.items():
            out[name] = (_rm_ratio(make, tr, k, deterministic, seeds), tr)
    else:
        fam = [decoy_and_sleeper(k, 0.01, L) for L in (8 * k, 16 * k)]
        gaps = [run(make(), tr, k, "nm").cost - optimum(tr, k, "nm").cost for tr in fam]
        out["decoy-and-sleeper"] = ((gaps[1] - gaps[0]) / (fam[1].T - fam[0].T), fam[1])
    return out


def fuzz_policy(target_spec: str, k: int, model: str = "rm", examples: int = 300, seconds: float = 60.0,
                seed: int = 0, out_dir: str | Path = ".", nm_growth_bound: float = 0.05) -> FuzzReport:
    """Search for a trace on which the policy exceeds its bound (see module docstring); save the shrunk trace."""
    make = load_target(target_spec)
    probe = make()
    deterministic = bool(getattr(probe, "deterministic", True))
    seeds = 8
    if model == "rm":
        bound, bound_name = _rm_bound(k, deterministic)
    else:
        bound, bound_name = nm_growth_bound, "NM tracking-gap growth per suffix step (bounded regret, Lemma 1)"
    rep = FuzzReport(target_spec, model, k, bound, bound_name)
    t_start = time.monotonic()
    deadline = t_start + seconds
    failing: list = []

    def consider(value: float, trace, source: str) -> None:
        if value > rep.worst or rep.worst_trace is None:
            rep.worst, rep.worst_trace, rep.worst_source = value, trace, source

    try:
        for name, (value, trace) in _known_constructions(make, k, model, deterministic, seeds).items():
            rep.constructions[name] = value
            consider(value, trace, f"construction: {name}")
            # the information rule: decisions may not depend on the future (checked by cutting the trace)
            assert_prefix_consistent(make, trace, k, model)
    except ContractViolation as exc:
        rep.contract_violation = str(exc)
        rep.seconds = time.monotonic() - t_start
        return rep
    except Exception as exc:  # a user's policy crashing is a finding about the policy, reported in one line
        rep.contract_violation = f"the policy raised {type(exc).__name__}: {exc}"
        rep.seconds = time.monotonic() - t_start
        return rep

    if model == "rm":
        from adversary.strategies import paging_traces, repeated_motif_traces

        strategy = st.one_of(repeated_motif_traces(k + 2, max_repeat=2 * k * k),
                             paging_traces(max_items=k + 2, min_steps=k + 1, max_steps=10 * (k + 2)))

        def measure(trace):
            return _rm_ratio(make, trace, k, deterministic, seeds), trace
    else:
        from adversary.strategies import repeated_suffix_families

        strategy = repeated_suffix_families(min_prefix=k + 1, max_prefix=3 * k + 3, max_support=k + 1,
                                            suffix_lengths=(4 * k, 8 * k))

        def measure(family):
            return _nm_growth(make, family, k)

    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate, Phase.target, Phase.shrink], suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False, print_blob=False)
    @given(strategy)
    def prop(drawn):
        if time.monotonic() > deadline and not failing:
            return
        rep.examples += 1
        value, trace = measure(drawn)
        target(value if math.isfinite(value) else 1e9, label="ratio" if model == "rm" else "growth")
        rep.search_worst = max(rep.search_worst, value)
        consider(value, trace, "targeted search")
        if not within(value, bound):
            failing.append((value, trace))
            raise _Exceeded()

    try:
        hyp_seed(seed)(prop)()
    except _Exceeded:
        pass
    except ContractViolation as exc:
        rep.contract_violation = str(exc)
    rep.seconds = time.monotonic() - t_start
    if rep.contract_violation:
        return rep
    if failing:
        # hypothesis replays the shrunk example last: that is the minimal counterexample
        value, trace = failing[-1]
        rep.violation = True
        rep.worst, rep.worst_trace, rep.worst_source = value, trace, "targeted search, shrunk to a minimal trace"
    elif not within(rep.worst, bound):
        rep.violation = True
    if rep.worst_trace is not None:
        rep.trace_file = str(_save_worst(rep, Path(out_dir)))
    return rep


def _save_worst(rep: FuzzReport, out_dir: Path) -> Path:
    from kvcore.errors import TraceError

    if not out_dir.is_dir():
        raise ParameterError(f"--out {out_dir}: not a directory")
    stem = "".join(c if c.isalnum() else "_" for c in rep.target) + f"-k{rep.capacity}-{rep.model}"
    trace = rep.worst_trace
    suffix = ".npy" if isinstance(trace, PagingTrace) and trace.is_unit_single else ".npz"
    try:
        return save_trace(trace, out_dir / f"fuzz-{stem}{suffix}")
    except (TraceError, OSError) as exc:
        raise ParameterError(f"cannot write the counterexample to {out_dir}: {exc}") from None


def format_report(rep: FuzzReport) -> str:
    lines = [f"target:        {rep.target} (model {rep.model}, capacity k = {rep.capacity})",
             f"bound checked: {rep.bound_name} = {rep.bound:.6g}"]
    if rep.contract_violation:
        lines += ["verdict:       contract violation", f"               {rep.contract_violation}"]
        return "\n".join(lines)
    for name, v in rep.constructions.items():
        lines.append(f"construction:  {name}: {v:.6g}")
    lines.append(f"search:        {rep.examples} targeted examples in {rep.seconds:.1f} s, "
                 f"largest value {rep.search_worst:.6g}")
    worst = "inf" if math.isinf(rep.worst) else f"{rep.worst:.6g}"
    lines.append(f"reported:      {worst} ({rep.worst_source})")
    if rep.worst_trace is not None:
        lines.append(f"worst trace:   {describe_trace(rep.worst_trace, 40)}")
    if rep.trace_file:
        lines.append(f"trace file:    {rep.trace_file}")
    lines.append(f"verdict:       {rep.verdict}")
    return "\n".join(lines)
