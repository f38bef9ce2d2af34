"""The search, inside the fuzzer's worker process (:mod:`verify.supervisor`): it asks one question of the policy
(:mod:`verify.questions`) on trace after trace and streams what it finds as events (``emit``), checking the clock
between traces.

Stages
    1. every registered construction of the model (:data:`adversary.CONSTRUCTIONS`; NM ones are projected onto
       the premise in ``premise`` mode), each followed by the information-rule check
       :func:`verify.check.assert_prefix_consistent`; none starts after ``CONSTRUCTION_SHARE`` of the budget (those
       are named as skipped);
    2. a targeted search: every example reports its value to ``hypothesis.target`` so generation climbs toward
       the worst case (Loscher & Sagonas, "Targeted property-based testing", ISSTA 2017), seeded by ``seed``;
    3. shrinking: the search is replayed with the same seed (values come from a cache, so the replay costs only
       generation) until the example to shrink comes up, and hypothesis shrinks it (MacIver & Donaldson, ECOOP
       2020) -- to a minimal trace above the bound (``bound``, ``premise``) or one attaining the maximum found
       (``against``).  The worst value found (and where) and the shrunk example are reported apart.

A failure is classified by :meth:`Search.fault_of`: the policy's own (a contract violation, an exception raised in
its source files, a failure or timeout of its isolated process) or the fuzzer's (``internal error``).
"""

from __future__ import annotations

import math
import os
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import policies
from adversary import constructions
from kvcore.errors import ContractViolation, ParameterError
from kvcore.measure import REL_TOL, measure, within
from kvcore.traces import PagingTrace

from .check import assert_prefix_consistent
from .config import FuzzConfig, policy_params
from .isolated import PolicyFailed, PolicyHost, PolicyTimeout
from .questions import QUESTIONS
from .report import POLICY_FINDINGS

SEEDS = 8                   # runs of a randomized policy per trace (kvcore.measure's interval rule)
CONSTRUCTION_SHARE = 0.5    # of the budget, at most, for the constructions
SHRINK_RESERVE = 0.3        # of the search's time, kept for shrinking once something exceeds the bound
VALUE_CAP = 1e12            # hypothesis.target needs a finite number


def internal_error_line(exc: BaseException) -> str:
    """One line for an error of the fuzzer itself: type, message and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}{': ' + text if text else ''}{where}"


class _OutOfTime(BaseException):
    """The budget is spent: stops hypothesis at once (a BaseException is not a test failure to it)."""


class _Stop(BaseException):
    """A finding that ends the search (timeout, internal error) was recorded: stop without shrinking."""


class _PolicyFault(Exception):
    """The policy failed on an example: hypothesis shrinks it like any failure."""


class _Exceeded(Exception):
    """The example to shrink came up: hypothesis shrinks it."""


class _BelowOptimum(Exception):
    def __init__(self, message: str, isolated: bool):
        super().__init__(message)
        self.isolated = isolated


def _trace_key(trace) -> tuple:
    if isinstance(trace, PagingTrace):
        return ("p", trace.items.tobytes(), trace.costs.tobytes(), trace.offsets.tobytes())
    return ("a", trace.indptr.tobytes(), trace.indices.tobytes(), trace.weights.tobytes())


def _finite(x: float) -> float:
    return max(-VALUE_CAP, min(VALUE_CAP, x)) if not math.isnan(x) else 0.0


class Search:
    """One fuzz run inside the worker: :meth:`run` performs the three stages (module docstring) for ``cfg``, with the
    isolated policies of ``hosts`` (``module:Class`` specs), sending each event through ``emit`` and stopping at the
    monotonic-clock ``deadline``."""

    def __init__(self, cfg: FuzzConfig, hosts: dict[str, PolicyHost], emit: Callable, deadline: float):
        self.cfg, self.hosts, self.emit, self.deadline = cfg, hosts, emit, deadline
        self.k = cfg.k
        self.cache: dict[tuple, tuple[float, dict]] = {}
        self.worst = -math.inf
        self.search_worst: float | None = None
        self.examples = 0
        self.first_exceed: float | None = None
        self.policy_fault = False   # a failure of the policy is being shrunk by hypothesis
        self.stopped = False
        self.t_search = 0.0
        self.last_progress = 0.0

    # -- set-up ------------------------------------------------------------------------------------------------------
    def _factory(self, spec: str) -> Callable[[], Any]:
        if spec in self.hosts:
            make = self.hosts[spec].factory()
            models = self.hosts[spec].info["models"]
        else:
            make = policies.resolve(spec, policy_params(spec, self.cfg))
            models = policies.get(spec).models
        if models is not None and self.cfg.model not in models:
            raise ParameterError(f"policy {spec}: declares models {sorted(models)}, not {self.cfg.model!r} "
                                 f"(set its class variable models to include {self.cfg.model!r})")
        return make

    def run(self) -> None:
        cfg = self.cfg
        self.make = self._factory(cfg.target)
        self.ref = self._factory(cfg.against) if cfg.against else None
        self.isolated = cfg.target in self.hosts
        self.policy_files = set() if self.isolated else _source_files(self.make())
        if self.ref is not None and cfg.against not in self.hosts:
            self.policy_files |= _source_files(self.ref())
        self.objective = QUESTIONS[cfg.mode](self)
        probe = self.make()
        self.emit(("info", {"policy": getattr(probe, "name", None) or type(probe).__name__,
                            "policy_params": policy_params(cfg.target, cfg), "bound": self.objective.bound,
                            "bound_name": self.objective.bound_name, "value_name": self.objective.value_name}))
        self.constructions()
        if not self.stopped:
            self.explore()
        if not self.stopped:
            self.shrink()

    # -- measuring ---------------------------------------------------------------------------------------------------
    def measure(self, make, trace, opt=None):
        m = measure(make, trace, self.k, model=self.cfg.model, seeds=range(SEEDS), opt=opt)
        for h in self.hosts.values():
            h.finish()
        if not within(m.opt_cost, min(m.costs)):
            isolated = (make is self.make and self.isolated) or (make is self.ref and self.cfg.against in self.hosts)
            raise _BelowOptimum(f"{m.policy}: its cost {min(m.costs):.6g} is below the exact optimum's "
                                f"{m.opt_cost:.6g} on this trace, which no run can do", isolated)
        return m

    def evaluate(self, trace, source: str) -> tuple[float, dict]:
        value, details = self.objective.evaluate(trace)
        self.emit(("measured",))
        self.cache[_trace_key(trace)] = (value, details)
        self.consider(value, trace, details, source)
        return value, details

    def consider(self, value: float, trace, details: dict, source: str) -> None:
        if value > self.worst:
            self.worst = value
            self.emit(("worst", value, trace, source, details))

    def fault_of(self, exc: BaseException) -> tuple[str, str]:
        """(kind, message) of a failure; kind is one of POLICY_FINDINGS or "internal error"."""
        if isinstance(exc, PolicyTimeout):
            return "policy timeout", str(exc)
        if isinstance(exc, ContractViolation):
            return "contract violation", str(exc)
        if isinstance(exc, PolicyFailed):
            return "policy error", str(exc)
        if isinstance(exc, _BelowOptimum):
            if exc.isolated:
                return "internal error", f"{exc} (the policy ran isolated, so the engine or the optimum is wrong)"
            return "contract violation", f"{exc}: the policy altered the run's accounting"
        if isinstance(exc, Exception) and _raised_in(exc, self.policy_files):
            return "policy error", f"the policy raised {internal_error_line(exc)}"
        return "internal error", internal_error_line(exc)

    # -- stage 1 -----------------------------------------------------------------------------------------------------
    def constructions(self) -> None:
        end = time.monotonic() + CONSTRUCTION_SHARE * (self.deadline - time.monotonic())
        for c in constructions("rm" if self.cfg.model == "rm" else "nm"):
            if time.monotonic() > end:
                self.emit(("construction", c.name, "skipped: the constructions' share of the budget is spent"))
                continue
            self.emit(("stage", f"construction {c.name!r}"))
            trace = None
            try:
                trace = self.objective.from_construction(c.build(self.k, self.make))
                for h in self.hosts.values():
                    h.finish()
                self.emit(("construction", c.name, self.evaluate(trace, f"construction {c.name!r}")[0]))
                assert_prefix_consistent(self.make, trace, self.k, self.cfg.model)
                for h in self.hosts.values():
                    h.finish()
            except BaseException as exc:  # noqa: BLE001
                kind, message = self.fault_of(exc)
                if kind in POLICY_FINDINGS or isinstance(exc, _BelowOptimum):
                    self.emit(("finding", kind, f"{message} (construction {c.name!r})", trace))
                    self.stopped = True
                    return
                self.emit(("construction", c.name, f"failed: internal error: {message}"))
                self.emit(("finding", "internal error", f"construction {c.name!r} at k = {self.k}: {message}",
                           None))

    # -- stage 2 -----------------------------------------------------------------------------------------------------
    def _explore_until(self) -> float:
        if not self.policy_fault and self.first_exceed is not None:
            return self.deadline - SHRINK_RESERVE * (self.deadline - self.t_search)
        return self.deadline

    def _settings(self, shrink: bool):
        from hypothesis import HealthCheck, Phase, Verbosity, settings

        phases = [Phase.generate, Phase.target] + ([Phase.shrink] if shrink else [])
        return settings(max_examples=self.cfg.examples, database=None, deadline=None, derandomize=False,
                        phases=phases, suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                        print_blob=False, verbosity=Verbosity.quiet)

    def explore(self) -> None:
        from hypothesis import given, seed as hyp_seed, target

        self.emit(("stage", "the targeted search"))
        self.t_search = time.monotonic()

        def one(trace):
            if time.monotonic() > self._explore_until():
                raise _OutOfTime()
            try:
                value, details = self.evaluate(trace, f"targeted search, example {self.examples + 1}")
            except BaseException as exc:  # noqa: BLE001
                self._on_failure(exc, trace)
            self.examples += 1
            target(_finite(value), label="value")
            self.search_worst = value if self.search_worst is None else max(self.search_worst, value)
            if self.first_exceed is None and self.objective.exceeds(value):
                self.first_exceed = time.monotonic()
            if time.monotonic() - self.last_progress > 0.2:
                self.last_progress = time.monotonic()
                self.emit(("examples", self.examples, self.search_worst))

        try:
            hyp_seed(self.cfg.seed)(self._settings(False)(given(self.objective.strategy())(one)))()
        except (_OutOfTime, _Stop, _PolicyFault):
            pass
        except Exception as exc:  # noqa: BLE001 -- hypothesis' own errors (e.g. a flaky failure)
            if not self.policy_fault:
                self.emit(("finding", "internal error", f"the search: {internal_error_line(exc)}", None))
                self.stopped = True
        self.emit(("examples", self.examples, self.search_worst))
        if self.policy_fault:
            self.stopped = True

    def _on_failure(self, exc: BaseException, trace) -> None:
        """Record a failure during the search; a failure of the policy is shrunk by hypothesis, anything else stops."""
        kind, message = self.fault_of(exc)
        self.emit(("finding", kind, message, trace))
        if kind in ("contract violation", "policy error") and not isinstance(exc, _BelowOptimum):
            self.policy_fault = True
            raise _PolicyFault(message)
        self.stopped = True
        raise _Stop()

    # -- stage 3 -----------------------------------------------------------------------------------------------------
    def shrink(self) -> None:
        from hypothesis import given, seed as hyp_seed, target

        if self.search_worst is None or not self.objective.exceeds(self.search_worst):
            return
        best = self.search_worst
        if self.cfg.mode == "against":   # the trace attaining the maximum, made minimal
            def hit(v):
                return v >= best - REL_TOL * max(1.0, abs(best))
        else:                            # a minimal trace above the bound
            hit = self.objective.exceeds
        self.emit(("stage", "shrinking"))
        found = []

        def one(trace):
            if time.monotonic() > self.deadline:
                raise _OutOfTime()
            cached = self.cache.get(_trace_key(trace))
            if cached is None:
                try:
                    value, details = self.evaluate(trace, "shrinking")
                except BaseException as exc:  # noqa: BLE001
                    kind, message = self.fault_of(exc)
                    self.emit(("finding", kind, message, trace))
                    self.stopped = True
                    raise _Stop() from None
            else:
                value, details = cached
            target(_finite(value), label="value")
            if hit(value):
                found.append(1)
                self.emit(("shrunk", value, trace, details))
                raise _Exceeded()

        try:
            hyp_seed(self.cfg.seed)(self._settings(True)(given(self.objective.strategy())(one)))()
        except _Exceeded:
            pass
        except _OutOfTime:
            self.emit(("note", "shrinking was cut short by the budget (the smallest trace so far is reported)"
                       if found else "the budget ran out before the example to shrink came up again"))
        except _Stop:
            pass
        except Exception as exc:  # noqa: BLE001
            self.emit(("note", f"shrinking stopped: {internal_error_line(exc)}"))
        else:  # every example that hits raises _Exceeded, so none did
            self.emit(("note", "the shrinking pass did not come upon the example again"))


def _source_files(policy: Any) -> set[str]:
    """The source files of a policy object's classes: a failure raised there is the policy's."""
    import inspect

    out = set()
    for cls in type(policy).__mro__:
        if cls is object:
            continue
        try:
            out.add(os.path.realpath(inspect.getsourcefile(cls) or ""))
        except TypeError:
            pass
    return out - {os.path.realpath("")}


def _raised_in(exc: BaseException, files: set[str]) -> bool:
    return any(os.path.realpath(f.filename) in files for f in traceback.extract_tb(exc.__traceback__))
