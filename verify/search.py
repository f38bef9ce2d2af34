"""The search, inside the fuzzer's worker process (:mod:`verify.supervisor`): it asks one question of the policy
(:mod:`verify.questions`) on trace after trace and streams what it finds as events (``emit``), checking the clock
between traces.

Stages
    1. every registered construction of the model (:data:`adversary.CONSTRUCTIONS`; NM ones are projected onto
       the premise in ``premise`` mode), each followed by the information-rule check
       :func:`verify.check.assert_prefix_consistent`; none starts after ``CONSTRUCTION_SHARE`` of the budget (those
       are named as skipped); then (RM) each construction's trace renamed by an id family of
       :mod:`adversary.relabel`, the families in turn;
    2. a targeted search (its traces' items renamed by an id family, or not): every example reports its value to ``hypothesis.target`` so generation climbs toward
       the worst case (Loscher & Sagonas, "Targeted property-based testing", ISSTA 2017), seeded by ``seed``;
    3. deepening (:mod:`verify.deepen`): the constructions at doubling lengths, after warm-ups, and a climbing
       search, until a violation is found or the budget is spent (the longest trace measured is reported);
    4. shrinking: when the search's examples broke the bound, the search is replayed with the same seed (values
       come from a cache, so the replay costs only generation) until the example to shrink comes up, and hypothesis
       shrinks it (MacIver & Donaldson, ECOOP 2020) -- to a small trace above the bound (``bound``, ``premise``) or
       one attaining the maximum found (``against``); that trace, or else the shortest violating trace found, is
       then made locally minimal by :func:`verify.shrink.minimize` (removing any one step loses the violation),
       or the report says the budget cut it short.  The worst value found (and where) and the shrunk example are
       reported apart.

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
from adversary import constructions, relabel
from kvcore.errors import ContractViolation, ParameterError
from kvcore.measure import CONFIDENCE, REL_TOL, measure, within
from kvcore.traces import PagingTrace

from .check import assert_prefix_consistent
from .config import FuzzConfig, policy_params
from .deepen import Deepening
from .isolated import PolicyFailed, PolicyHost, PolicyTimeout
from .questions import QUESTIONS, SEEDS
from .report import POLICY_FINDINGS
from .shrink import minimize, structured

CONSTRUCTION_SHARE = 0.5    # of the budget, at most, for the constructions
SEARCH_SHARE = 0.25         # of what is left, at most, for the targeted search (deepening needs the rest)
SHRINK_RESERVE = 0.3        # of the search's time, kept for shrinking once something exceeds the bound
HYPOTHESIS_SHRINK_SHARE = 0.6   # of the time left for shrinking; the rest makes the result locally minimal
REPORT_RESERVE = 0.02       # of the budget, left after deepening for the report to reach the supervisor
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
        self.found_by: dict[tuple, str] = {}    # trace key -> the stage that first measured it
        self.worst = -math.inf
        self.worst_trace = None
        self.search_worst: float | None = None
        self.examples = 0
        self.first_exceed: float | None = None
        self.policy_fault = False   # a failure of the policy is being shrunk by hypothesis
        self.stopped = False
        self.t_search = 0.0
        self.last_progress = 0.0
        self.longest = 0
        self.smallest_hit = None        # the shortest trace found above the bound
        self.hypothesis_shrunk = None   # (value, trace) hypothesis shrank to
        self.worst_unit_items = None    # the worst unit paging trace's requests (the climber starts from them)

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
        self.prepare()
        budget = self.deadline - time.monotonic()
        self.constructions()
        if not self.stopped:
            self.explore()
        if not self.stopped and not self.objective.exceeds(self.worst):
            Deepening(self).run(self.deadline - REPORT_RESERVE * budget)
        if not self.stopped:
            self.shrink()

    def prepare(self) -> None:
        """The policy factories, the question, and the ``info`` event: what every stage needs."""
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

    # -- measuring ---------------------------------------------------------------------------------------------------
    def measure(self, make, trace, opt=None, seeds=range(SEEDS), confidence: float = CONFIDENCE):
        m = measure(make, trace, self.k, model=self.cfg.model, seeds=seeds, opt=opt, confidence=confidence)
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
        key = _trace_key(trace)
        self.cache[key] = (value, details)
        self.found_by.setdefault(key, source)
        self.consider(value, trace, details, source)
        return value, details

    def evaluate_guarded(self, trace, source: str) -> float:
        """``evaluate``'s value, or ``-inf`` after a failure, which is recorded like one in the constructions (a
        finding about the policy stops the search)."""
        try:
            value = self.evaluate(trace, source)[0]
            for h in self.hosts.values():
                h.finish()
            return value
        except BaseException as exc:  # noqa: BLE001
            self._record_failure(exc, trace, source, deep=True)
            return -math.inf

    def consider(self, value: float, trace, details: dict, source: str) -> None:
        if trace.T > self.longest:
            self.longest = trace.T
            self.emit(("longest", trace.T))
        if self.objective.exceeds(value) and (self.smallest_hit is None or trace.T < self.smallest_hit.T):
            self.smallest_hit = trace
        if value > self.worst:
            self.worst, self.worst_trace = value, trace
            if isinstance(trace, PagingTrace) and trace.is_unit_single:
                self.worst_unit_items = trace.items
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
                self.emit(("cut", f"construction {c.name!r} skipped"))
                continue
            self.emit(("stage", f"construction {c.name!r}"))
            self.run_construction(c, f"construction {c.name!r}")
            if self.stopped:
                return
        if self.cfg.model == "rm":
            self.renamed_constructions(end)

    def renamed_constructions(self, end: float) -> None:
        """Every RM construction's trace (as built for the policy, at the base length) again, its items renamed by
        the ids of one of :data:`adversary.relabel.ID_FAMILIES`, each family in turn: a policy keyed on id values
        meets its own worst cases renamed (one family each: a randomized policy's measurement is not cheap)."""
        families = relabel.ID_FAMILIES
        for n, c in enumerate(constructions("rm") if families else ()):
            if time.monotonic() > end or self.stopped:
                return
            family = families[(n + self.cfg.seed) % len(families)]
            label = f"construction {c.name!r} with {family} ids"
            trace = None
            try:
                trace = relabel.relabel(c.built(self.k, self.make), family, self.cfg.seed)
                self.evaluate(trace, label)
                for h in self.hosts.values():
                    h.finish()
            except BaseException as exc:  # noqa: BLE001
                self._record_failure(exc, trace, label, deep=True)

    def run_construction(self, c, label: str, scale: int = 1, prefix=None, deep: bool = False) -> bool:
        """Build construction ``c`` at ``scale`` after ``prefix`` and evaluate it (at the base length, check the
        information rule on it too); False when it failed.  A failure of the policy stops the search; one of the
        fuzzer is an internal error at the base length, and a note when ``deep`` (a length that exhausts memory
        is not a finding)."""
        trace = None
        try:
            trace = self.objective.from_construction(c.built(self.k, self.make, scale, prefix))
            for h in self.hosts.values():
                h.finish()
            value = self.evaluate(trace, label)[0]
            if not deep:
                self.emit(("construction", c.name, value))
                assert_prefix_consistent(self.make, trace, self.k, self.cfg.model)
            for h in self.hosts.values():
                h.finish()
        except BaseException as exc:  # noqa: BLE001
            self._record_failure(exc, trace, label, c.name, deep)
            return False
        return True

    def _record_failure(self, exc: BaseException, trace, label: str, construction: str | None = None,
                        deep: bool = False) -> None:
        kind, message = self.fault_of(exc)
        if kind in POLICY_FINDINGS or isinstance(exc, _BelowOptimum):
            self.emit(("finding", kind, f"{message} ({label})", trace))
            self.stopped = True
            return
        if deep:
            self.emit(("note", f"deepening: {label} failed ({message}); not tried again"))
            return
        if construction is not None:
            self.emit(("construction", construction, f"failed: internal error: {message}"))
        self.emit(("finding", "internal error", f"{label} at k = {self.k}: {message}", None))

    # -- stage 2 -----------------------------------------------------------------------------------------------------
    def _explore_until(self) -> float:
        if not self.policy_fault and self.first_exceed is not None:
            return self.deadline - SHRINK_RESERVE * (self.deadline - self.t_search)
        return self.t_search + SEARCH_SHARE * (self.deadline - self.t_search)

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
        except _OutOfTime:
            self.emit(("note", f"the targeted search stopped after {self.examples} of {self.cfg.examples} examples "
                               f"(its share of the budget)"))
            self.emit(("cut", f"the targeted search, after {self.examples} of {self.cfg.examples} examples"))
        except (_Stop, _PolicyFault):
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

    # -- stage 4 -----------------------------------------------------------------------------------------------------
    def shrink(self) -> None:
        """Shrink the search's example with hypothesis (when the search broke the bound), then make that trace, or
        else the shortest violating one found, locally minimal (module docstring)."""
        if not self.objective.exceeds(self.worst):
            return
        self.emit(("stage", "shrinking"))
        if self.search_worst is not None and self.objective.exceeds(self.search_worst):
            self._shrink_with_hypothesis()
            if self.stopped:
                return
        if self.hypothesis_shrunk is not None:
            start, start_value = self.hypothesis_shrunk[1], self.hypothesis_shrunk[0]
        elif self.cfg.mode == "against":
            start, start_value = self.worst_trace, self.worst
        else:
            start = self.smallest_hit
            start_value = self.cache[_trace_key(start)][0]
        hit = self._hit(start_value)
        label = f"shrinking the counterexample found by {self.found_by.get(_trace_key(start), 'the search')}"

        def violates(trace) -> bool:
            cached = self.cache.get(_trace_key(trace))
            value = cached[0] if cached is not None else self.evaluate_guarded(trace, label)
            if self.stopped:
                raise _Stop()
            return hit(value)

        seconds = self.deadline - time.monotonic()
        try:
            smaller, how = structured(start, violates, self.deadline)
            small, complete = minimize(smaller, violates, self.deadline, self.objective.admissible)
        except _Stop:
            return
        value, details = self.cache[_trace_key(small)]
        how.append("delta debugging: locally minimal (removing any one step loses the violation)" if complete else
                   f"delta debugging: cut short by the budget at {small.T} steps, so not known to be locally minimal")
        self.emit(("shrunk", value, small, details))
        self.emit(("minimal", complete, start.T))
        self.emit(("shrunk_how", how, round(seconds, 2)))
        if not complete:
            self.emit(("cut", f"the local minimization, at {small.T} of {start.T} steps"))

    def _hit(self, best: float):
        """What a shrunk trace must keep: a value above the bound (``bound``, ``premise``), or the value ``best``
        of the trace being shrunk (``against``: the maximum, not merely a positive difference)."""
        if self.cfg.mode == "against":
            return lambda v: v >= best - REL_TOL * max(1.0, abs(best))
        return self.objective.exceeds

    def _shrink_with_hypothesis(self) -> None:
        from hypothesis import given, seed as hyp_seed, target

        hit = self._hit(self.search_worst)
        until = time.monotonic() + HYPOTHESIS_SHRINK_SHARE * (self.deadline - time.monotonic())
        found = []

        def one(trace):
            if time.monotonic() > until:
                raise _OutOfTime()
            cached = self.cache.get(_trace_key(trace))
            if cached is None:
                try:
                    value, details = self.evaluate(trace, "shrinking the targeted search's example")
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
                self.hypothesis_shrunk = (value, trace)
                self.emit(("shrunk", value, trace, details))
                raise _Exceeded()

        try:
            hyp_seed(self.cfg.seed)(self._settings(True)(given(self.objective.strategy())(one)))()
        except _Exceeded:
            pass
        except _OutOfTime:
            self.emit(("note", "shrinking was cut short by the budget (the smallest trace so far is reported)"
                       if found else "the budget ran out before the example to shrink came up again"))
            self.emit(("cut", "shrinking with hypothesis"))
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
