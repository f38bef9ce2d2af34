"""Fuzz a policy: the known constructions, then a targeted hypothesis search, within a hard wall-clock budget and
with a user's policy isolated from the engine (issues 6 and 14).

Questions (one per mode; every number comes from :func:`kvcore.measure.measure`)
    ``bound`` (``model="rm"``): is ``ALG/OPT`` within the bound the policy promises
        (:func:`theorems.check.promised_bound`: its declared guarantee, else ``k/(k-h+1)`` with ``h = k`` for a
        deterministic policy, ``2H_k - 1`` on the seed mean of a randomized one, judged at the lower end of its 95%
        interval)?
    ``premise`` (``model="nm"``): on traces inside Theorem 4's corrected premise (paper Section 7: chain
        persistence at ``(rho, W, tau)`` and a warm-set union within ``k - 1``, built by
        :func:`adversary.strategies.within_theorem4_premise`), is the NM regret within the light-tail mass
        ``sum_t M_t(tau)`` (:func:`adversary.tail_mass`)?  The value searched is ``regret - tail``; R-LRU-H with the
        same ``(rho, tau, W)`` meets it by Theorem 4.  (Unrestricted NM regret is unbounded for *every*
        deterministic policy -- ``adversary.adaptive_k_plus_one_nm`` -- so that question tells a user nothing.)
    ``against`` (``against=NAME``, either model): where is the policy worse than a reference?  The value is
        ``(cost(policy) - cost(reference)) / max(cost(OPT), 0.05)`` (NM: regrets), maximised, and the trace that
        attains the maximum is shrunk to a minimal one.

Stages
    1. every registered construction of the model (:data:`adversary.CONSTRUCTIONS`; NM ones are projected onto
       the premise in ``premise`` mode), each followed by the information-rule check
       :func:`theorems.check.assert_prefix_consistent`; none starts after half the budget (those are named as
       skipped);
    2. a targeted search: every example reports its value to ``hypothesis.target`` so generation climbs toward
       the worst case (Loscher & Sagonas, "Targeted property-based testing", ISSTA 2017), seeded by ``seed``;
    3. shrinking: the search is replayed with the same seed (values come from a cache, so the replay costs only
       generation) until the example to shrink comes up, and hypothesis shrinks it (MacIver & Donaldson, ECOOP
       2020) -- to a minimal trace above the bound (``bound``, ``premise``) or one attaining the maximum found
       (``against``).  The report keeps the worst value found (and where) and the shrunk example apart.

Processes and budget
    The work runs in a forked *worker* process; the caller only collects its events, and kills it (and every
    process it uses) ``GRACE`` seconds after the budget: ``seconds`` bounds everything, constructions and
    shrinking included, whatever the policy or the optimum does (nothing inside the worker is interrupted
    asynchronously -- a half-finished import or JIT compilation would poison the rest of the run; the worker
    checks the clock between traces and the supervisor's kill is the backstop).  A ``module:Class`` policy runs in
    its own process (:mod:`policies.isolated`), created before any trace exists, receiving only the engine's five
    calls; it cannot read the trace, the checker or the engine's state, and a call it does not answer within
    ``call_timeout`` seconds ends the search ("the policy did not answer within S s").  Registered policies are
    project code and run inside the worker.  Hypothesis keeps no database and its home directory is a temporary
    one, removed afterwards.

Verdicts (``FuzzReport.verdict``, exit status of the command line)
    ``no violation found`` (0), ``inconclusive`` (0: nothing finished within the budget), ``violates`` /
    ``worse than REF`` (1), ``contract violation`` (1: including a result below the exact optimum from a
    policy that runs inside the engine's process), ``policy error`` (1: it raised, or its process died),
    ``policy timeout`` (1), ``internal error`` (3: the fuzzer's own failure -- e.g. a MemoryError building a
    construction at a huge ``k``, or a result below the optimum from an isolated policy, which cannot have
    caused it).  An unknown target or one that cannot be imported is a :class:`~kvcore.errors.ParameterError`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Pipe
from pathlib import Path
from typing import Any, Callable

import policies
from adversary import constructions, tail_mass
from adversary.strategies import within_theorem4_premise
from kvcore.atomic import write_text
from kvcore.errors import ContractViolation, ParameterError, TraceError
from kvcore.measure import REL_TOL, measure, within
from kvcore.numbers import integer, real
from kvcore.traces import AttentionTrace, PagingTrace, save_trace
from policies.isolated import PolicyFailed, PolicyHost, PolicyTimeout

from .check import assert_prefix_consistent, describe_trace, promised_bound

SEEDS = 8                   # runs of a randomized policy per trace (kvcore.measure's interval rule)
GRACE = 0.5                 # seconds after the budget before the worker is killed
CONSTRUCTION_SHARE = 0.5    # of the budget, at most, for the constructions
SHRINK_RESERVE = 0.3        # of the search's time, kept for shrinking once something exceeds the bound
AGAINST_FLOOR = 0.05        # denominator floor of the --against value: a twentieth of one row's attention
VALUE_CAP = 1e12            # hypothesis.target needs a finite number
POLICY_FINDINGS = ("contract violation", "policy error", "policy timeout")
PREMISE_PARAMS = ("rho", "tau", "W")


@dataclass(frozen=True)
class Premise:
    """Theorem 4's corrected premise (paper Section 7): warm means ``>= rho*tau``, heavy ``>= tau``, chains of
    warm steps with gaps ``<= W``, and the warm sets of any ``W`` consecutive rows within ``k - 1`` tokens."""

    rho: float = 0.5
    W: int = 4
    tau: float = 0.25

    def checked(self) -> "Premise":
        real(self.rho, "rho", 0.0, 1.0, open_low=True)
        real(self.tau, "tau", 0.0, 1.0, open_low=True)
        integer(self.W, "W", 1)
        return self

    def describe(self) -> str:
        return f"rho = {self.rho:g}, W = {self.W}, tau = {self.tau:g}"


@dataclass(frozen=True)
class FuzzConfig:
    target: str
    k: int
    model: str = "rm"
    examples: int = 300
    seconds: float = 60.0
    seed: int = 0
    against: str | None = None
    premise: Premise = Premise()
    call_timeout: float = 2.0

    @property
    def mode(self) -> str:
        return "against" if self.against else ("premise" if self.model == "nm" else "bound")

    def checked(self) -> "FuzzConfig":
        for name, spec in (("target", self.target), ("against", self.against)):
            if spec is not None and (not isinstance(spec, str) or not spec.strip()):
                raise ParameterError(f"{name} = {spec!r}: expected a registered policy name or module:Class")
        integer(self.k, "capacity k", 1)
        integer(self.examples, "examples", 1)
        integer(self.seed, "seed", 0)
        real(self.seconds, "seconds", 0.0, open_low=True)
        real(self.call_timeout, "call timeout", 0.0, open_low=True)
        if self.model not in ("rm", "nm"):
            raise ParameterError(f"model = {self.model!r}: must be 'rm' or 'nm'")
        if self.mode == "premise":
            self.premise.checked()
            if self.k < 2:
                raise ParameterError(f"capacity k = {self.k}: the NM premise search needs k >= 2 (the union of warm "
                                     f"sets must fit in k - 1 >= 1 tokens)")
        return self


@dataclass
class FuzzReport:
    """What a fuzz run found (see the module docstring); ``as_dict`` is its JSON form."""

    target: str
    model: str
    capacity: int
    mode: str = "bound"
    seed: int = 0
    reference: str | None = None
    policy: str = ""
    policy_params: dict = field(default_factory=dict)
    bound: float = 0.0
    bound_name: str = ""
    value_name: str = ""
    examples: int = 0
    seconds: float = 0.0
    measured: int = 0
    search_worst: float | None = None
    worst: float = -math.inf
    worst_trace: PagingTrace | AttentionTrace | None = None
    worst_source: str = ""
    worst_details: dict = field(default_factory=dict)
    shrunk: float | None = None
    shrunk_trace: PagingTrace | AttentionTrace | None = None
    shrunk_details: dict = field(default_factory=dict)
    constructions: dict[str, Any] = field(default_factory=dict)
    finding: str | None = None
    message: str | None = None
    finding_trace: PagingTrace | AttentionTrace | None = None
    notes: list[str] = field(default_factory=list)
    stage: str = "start-up"
    budget_ran_out: str | None = None
    files: list[str] = field(default_factory=list)
    usage_error: str | None = None

    # -- derived -----------------------------------------------------------------------------------------------------
    def exceeds(self, value: float | None) -> bool:
        """``value`` breaks the question's bound (``bound``: the promised ratio; otherwise 0)."""
        return value is not None and value > -math.inf and not within(value, self.bound)

    @property
    def violation(self) -> bool:
        return self.exceeds(self.worst)

    @property
    def contract_violation(self) -> str | None:
        return self.message if self.finding == "contract violation" else None

    @property
    def verdict(self) -> str:
        if self.finding in POLICY_FINDINGS:
            return self.finding
        if self.violation:
            return f"worse than {self.reference}" if self.mode == "against" else "violates"
        if self.finding == "internal error":
            return "internal error"
        if self.measured == 0:
            return "inconclusive"
        if self.mode == "against":
            return f"not worse than {self.reference} on the traces searched"
        return "no violation found"

    @property
    def has_counterexample(self) -> bool:
        """A finding about the policy worth writing to disk."""
        return self.finding in POLICY_FINDINGS or self.violation

    @property
    def exit_code(self) -> int:
        if self.has_counterexample:
            return 1
        return 3 if self.finding == "internal error" else 0

    @property
    def trace_file(self) -> str | None:
        """The file of the trace behind the verdict: the worst found (it replays to ``worst``), else the failing one
        (the shrunk example, when there is one, is written next to it)."""
        for label in ("-worst", "-failing"):
            for f in self.files:
                if label in Path(f).name:
                    return f
        return None

    def apply(self, event: tuple) -> None:
        """Fold one event of the worker into the report."""
        kind, *rest = event
        if kind == "info":
            for key, value in rest[0].items():
                setattr(self, key, value)
        elif kind == "stage":
            self.stage = rest[0]
        elif kind == "construction":
            self.constructions[rest[0]] = rest[1]
        elif kind == "measured":
            self.measured += 1
        elif kind == "examples":
            self.examples, self.search_worst = rest
        elif kind == "worst":
            self.worst, self.worst_trace, self.worst_source, self.worst_details = rest
        elif kind == "shrunk":
            self.shrunk, self.shrunk_trace, self.shrunk_details = rest
        elif kind == "finding":
            # the policy's findings win over an internal error; a later one of the same rank is a smaller trace
            if self.finding in POLICY_FINDINGS and rest[0] not in POLICY_FINDINGS:
                self.notes.append(f"also: {rest[0]}: {rest[1]}")
                return
            self.finding, self.message, self.finding_trace = rest
        elif kind == "note":
            self.notes.append(rest[0])
        elif kind == "usage":
            self.usage_error = rest[0]

    def as_dict(self) -> dict:
        def num(x):
            if x is None or (isinstance(x, float) and x == -math.inf):
                return None
            return "inf" if isinstance(x, float) and math.isinf(x) else x

        def trace(tr):
            return None if tr is None else describe_trace(tr, 60)

        return {"target": self.target, "policy": self.policy, "policy_params": self.policy_params,
                "model": self.model, "capacity": self.capacity, "mode": self.mode, "reference": self.reference,
                "seed": self.seed, "bound": self.bound, "bound_name": self.bound_name, "value": self.value_name,
                "examples": self.examples, "measured": self.measured, "seconds": round(self.seconds, 2),
                "search_worst": num(self.search_worst), "worst": num(self.worst), "worst_source": self.worst_source,
                "worst_details": self.worst_details, "worst_trace": trace(self.worst_trace),
                "shrunk": num(self.shrunk), "shrunk_details": self.shrunk_details,
                "shrunk_trace": trace(self.shrunk_trace),
                "constructions": {k: num(v) for k, v in self.constructions.items()},
                "verdict": self.verdict, "exit_code": self.exit_code, "finding": self.finding,
                "message": self.message, "contract_violation": self.contract_violation,
                "finding_trace": trace(self.finding_trace), "budget_ran_out": self.budget_ran_out,
                "notes": self.notes, "files": self.files, "trace_file": self.trace_file}


# ---------------------------------------------------------------------------------------------------------------------
# entry point: supervise a worker
# ---------------------------------------------------------------------------------------------------------------------


def fuzz_policy(target_spec: str, k: int, model: str = "rm", examples: int = 300, seconds: float = 60.0,
                seed: int = 0, out_dir: str | Path | None = None, *, against: str | None = None,
                premise: Premise | None = None, call_timeout: float = 2.0) -> FuzzReport:
    """Fuzz ``target_spec`` (a registered name or ``module:Class``) with cache ``k`` (see the module docstring).

    ``out_dir``: checked (created if missing) before the search; the counterexample files and a JSON report are
    written there only when the verdict is a finding about the policy (:func:`write_outputs`).  ``None``: nothing
    is written.  Raises :class:`~kvcore.errors.ParameterError` for bad arguments or a target that cannot be
    imported or built."""
    cfg = FuzzConfig(target_spec, k, model, examples, seconds, seed, against, premise or Premise(),
                     call_timeout).checked()
    out = prepare_out_dir(out_dir) if out_dir is not None else None
    rep = _supervise(cfg)
    if out is not None and rep.has_counterexample:
        write_outputs(rep, out)
    return rep


def _policy_params(spec: str | None, cfg: FuzzConfig) -> dict:
    """A registered policy with parameters named like the premise's runs with the premise's values (R-LRU-H's
    rho, tau, W: Theorem 4 is about the policy built for the premise).  Shown in the report."""
    if spec is None or ":" in spec or cfg.mode != "premise":
        return {}
    info = policies.get(spec)
    return {p: getattr(cfg.premise, p) for p in PREMISE_PARAMS if p in info.params}


def _supervise(cfg: FuzzConfig) -> FuzzReport:
    start = time.monotonic()
    deadline = start + cfg.seconds
    rep = FuzzReport(cfg.target, cfg.model, cfg.k, cfg.mode, cfg.seed, cfg.against)
    for spec in (cfg.target, cfg.against):
        if spec is not None and ":" not in spec:
            policies.get(spec)  # an unknown name fails here, before any process starts
    hosts: dict[str, PolicyHost] = {}
    home = tempfile.mkdtemp(prefix="kv-fuzz-hypothesis-")
    worker = None
    try:
        for spec in dict.fromkeys(s for s in (cfg.target, cfg.against) if s and ":" in s):
            hosts[spec] = PolicyHost(spec, call_timeout=cfg.call_timeout)   # before any trace exists
        rx, tx = Pipe(duplex=False)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _worker(cfg, hosts, tx, rx, deadline, home)  # never returns
        worker = pid
        tx.close()
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        for h in hosts.values():
            h.detach()
        _collect(rep, rx, deadline)
    finally:
        if worker is not None:
            try:
                os.killpg(worker, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(worker, 0)
            except ChildProcessError:
                pass
        for h in hosts.values():
            h.close()
        shutil.rmtree(home, ignore_errors=True)
    rep.seconds = time.monotonic() - start
    if rep.usage_error:
        raise ParameterError(rep.usage_error)
    return rep


def _collect(rep: FuzzReport, rx, deadline: float) -> None:
    while True:
        left = deadline + GRACE - time.monotonic()
        if left <= 0 or not rx.poll(left):
            rep.budget_ran_out = rep.stage
            rep.notes.append(f"the budget ran out during {rep.stage}")
            return
        try:
            event = rx.recv()
        except (EOFError, OSError):
            rep.apply(("finding", "internal error", "the fuzzer's worker process ended unexpectedly", None))
            return
        if event[0] == "done":
            return
        rep.apply(event)


def _worker(cfg: FuzzConfig, hosts: dict, tx, rx, deadline: float, home: str) -> None:
    """The worker process: run the search, stream events, never return into the caller's code."""
    try:
        rx.close()
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor owns Ctrl-C
        os.dup2(2, 1)  # stray prints (a registered policy's, a library's) must not mix into the report on stdout
        from hypothesis.configuration import set_hypothesis_home_dir

        set_hypothesis_home_dir(home)
        _Search(cfg, hosts, tx.send, deadline).run()
    except ParameterError as exc:
        _try_send(tx, ("usage", str(exc)))
    except BaseException as exc:  # noqa: BLE001 -- the fuzzer's own failure: reported, never a traceback
        _try_send(tx, ("finding", "internal error", _internal(exc), None))
    finally:
        _try_send(tx, ("done",))
        os._exit(0)


def _try_send(tx, event) -> None:
    try:
        tx.send(event)
    except (OSError, ValueError):
        pass


def _internal(exc: BaseException) -> str:
    """One line for an error of the fuzzer itself: type, message and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}{': ' + text if text else ''}{where}"


# ---------------------------------------------------------------------------------------------------------------------
# the search (inside the worker)
# ---------------------------------------------------------------------------------------------------------------------


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


class _Search:
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
            make = policies.resolve(spec, _policy_params(spec, self.cfg))
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
        self.objective = {"bound": _RatioBound, "premise": _TailBound, "against": _Against}[cfg.mode](self)
        probe = self.make()
        self.emit(("info", {"policy": getattr(probe, "name", None) or type(probe).__name__,
                            "policy_params": _policy_params(cfg.target, cfg), "bound": self.objective.bound,
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
            return "policy error", f"the policy raised {_internal(exc)}"
        return "internal error", _internal(exc)

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
                self.emit(("finding", "internal error", f"the search: {_internal(exc)}", None))
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
            self.emit(("note", f"shrinking stopped: {_internal(exc)}"))
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


# ---------------------------------------------------------------------------------------------------------------------
# the three questions
# ---------------------------------------------------------------------------------------------------------------------


def _cap(x: int, high: int) -> int:
    return max(1, min(x, high))


def _rm_strategy(k: int):
    from hypothesis import strategies as st

    from adversary.strategies import paging_traces, repeated_motif_traces

    n = k + 2
    return st.one_of(repeated_motif_traces(n, max_repeat=_cap(2 * k * k, 256)),
                     paging_traces(max_items=n, min_steps=_cap(k + 1, 64), max_steps=_cap(10 * n, 400)))


def _nm_sizes(k: int) -> dict:
    """Lengths and row support of the NM strategies at cache ``k``."""
    return {"min_T": _cap(k + 1, 24), "max_T": _cap(8 * (k + 2), 80), "max_support": _cap(k + 3, 8)}


class _Question:
    """What the three questions share: the search maximises ``evaluate``'s value, which breaks the question when it
    exceeds ``bound``; a construction's trace is searched as it is built (RM) or its longest member (an NM
    family)."""

    bound = 0.0

    def __init__(self, search: _Search):
        self.s = search

    def from_construction(self, built):
        return built if self.s.cfg.model == "rm" else built[-1]

    def exceeds(self, value: float) -> bool:
        return not within(value, self.bound)


class _RatioBound(_Question):
    value_name = "ratio ALG/OPT"

    def __init__(self, search: _Search):
        super().__init__(search)
        g = promised_bound(search.make, search.k)
        self.bound = g.value(search.k)
        self.bound_name = (f"{g.name} with h = k" + (" in expectation" if g.expectation else "")
                           + f" ({g.source})")

    def strategy(self):
        return _rm_strategy(self.s.k)

    def evaluate(self, trace):
        m = self.s.measure(self.s.make, trace)
        return m.judged("ratio"), {"cost": m.cost, "opt_cost": m.opt_cost}


class _TailBound(_Question):
    value_name = "regret - tail mass"

    def __init__(self, search: _Search):
        super().__init__(search)
        self.p = search.cfg.premise
        self.bound_name = (f"NM regret <= tail mass sum_t M_t(tau) on traces inside Theorem 4's corrected premise "
                           f"({self.p.describe()}: chain persistence, warm-set union <= k - 1)")

    def strategy(self):
        from adversary.strategies import theorem4_premise_traces

        return theorem4_premise_traces(self.s.k, self.p.rho, self.p.W, self.p.tau, **_nm_sizes(self.s.k))

    def from_construction(self, built):
        return within_theorem4_premise(built[-1], self.p.rho, self.p.W, self.p.tau, self.s.k - 1)

    def evaluate(self, trace):
        m = self.s.measure(self.s.make, trace)
        tail = tail_mass(trace, self.p.tau)
        return m.judged("cost") - tail, {"regret": m.cost, "tail_mass": tail, "opt_regret": m.opt_cost}


class _Against(_Question):
    def __init__(self, search: _Search):
        super().__init__(search)
        cost = "regret" if search.cfg.model == "nm" else "cost"
        self.value_name = f"({cost} - {cost} of {search.cfg.against}) / max(OPT's {cost}, {AGAINST_FLOOR})"
        self.bound_name = f"no worse than {search.cfg.against}: {self.value_name} <= 0"

    def strategy(self):
        if self.s.cfg.model == "rm":
            return _rm_strategy(self.s.k)
        from hypothesis import strategies as st

        from adversary.strategies import repeated_suffix_families, shifted_zipf_traces, sparse_attention_traces

        k, sizes = self.s.k, _nm_sizes(self.s.k)
        return st.one_of(sparse_attention_traces(**sizes), shifted_zipf_traces(**sizes),
                         repeated_suffix_families(min_prefix=sizes["min_T"], max_prefix=_cap(3 * k + 3, 40),
                                                  max_support=_cap(k + 1, 8),
                                                  suffix_lengths=(_cap(4 * k, 40),)).map(lambda f: f[-1]))

    def evaluate(self, trace):
        mine = self.s.measure(self.s.make, trace)
        ref = self.s.measure(self.s.ref, trace, opt=mine.opt if mine.opt is not None else mine.opt_cost)
        value = (mine.cost - ref.cost) / max(mine.opt_cost, AGAINST_FLOOR)
        return value, {"cost": mine.cost, "reference_cost": ref.cost, "opt_cost": mine.opt_cost}


# ---------------------------------------------------------------------------------------------------------------------
# outputs
# ---------------------------------------------------------------------------------------------------------------------


def prepare_out_dir(path: str | Path, create: bool = True) -> Path:
    """Check (and create, with ``create``) the output folder before any search: one ParameterError line if it
    is not a writable directory."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ParameterError(f"--out {p}: not a directory")
    try:
        if create:
            p.mkdir(parents=True, exist_ok=True)
        if not p.is_dir():
            raise ParameterError(f"--out {p}: not a directory")
        fd, probe = tempfile.mkstemp(dir=p, prefix=".fuzz-write-probe-")
        os.close(fd)
        os.unlink(probe)
    except ParameterError:
        raise
    except OSError as exc:
        raise ParameterError(f"--out {p}: cannot write there ({exc.strerror or exc})") from None
    return p


def output_stem(rep: FuzzReport) -> str:
    """``<target>-k<k>-<question>-seed<seed>``: one name per question asked, so runs do not overwrite each other."""
    def clean(s):
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)

    question = {"bound": "rm", "premise": "nm-premise"}.get(rep.mode, f"{rep.model}-vs-{clean(rep.reference or '')}")
    return f"{clean(rep.target)}-k{rep.capacity}-{question}-seed{rep.seed}"


def write_outputs(rep: FuzzReport, out_dir: Path) -> list[str]:
    """Write the counterexample traces (worst found, shrunk, failing) and the JSON report into ``out_dir``,
    atomically and with the permissions of the user's umask; record and return the paths."""
    stem = output_stem(rep)
    written = []
    traces = [("failing", rep.finding_trace)] if rep.finding in POLICY_FINDINGS else []
    if rep.violation:
        traces += [("worst", rep.worst_trace), ("shrunk", rep.shrunk_trace)]
    try:
        for label, trace in traces:
            if trace is None:
                continue
            unit = isinstance(trace, PagingTrace) and trace.is_unit_single
            written.append(str(save_trace(trace, out_dir / f"{stem}-{label}{'.npy' if unit else '.npz'}")))
        rep.files = written + [str(out_dir / f"{stem}-report.json")]
        write_text(out_dir / f"{stem}-report.json", json.dumps(rep.as_dict(), indent=2, sort_keys=True) + "\n")
    except (TraceError, OSError) as exc:
        raise ParameterError(f"cannot write the counterexample to {out_dir}: {exc}") from None
    return rep.files


def _fmt(x: float | None) -> str:
    if x is None or x == -math.inf:
        return "-"
    return "inf" if math.isinf(x) else f"{x:.6g}"


def _short(trace) -> str:
    return describe_trace(trace, 30 if isinstance(trace, PagingTrace) else 8)


def format_report(rep: FuzzReport) -> str:
    """The report as printed by ``fuzz`` (without ``--json``)."""
    who = rep.policy or rep.target
    params = ", ".join(f"{k}={v}" for k, v in rep.policy_params.items())
    lines = [f"target:        {rep.target}" + (f" ({who})" if who != rep.target else "")
             + (f" with {params} (the premise's)" if params else "")
             + f"; model {rep.model}, capacity k = {rep.capacity}, seed {rep.seed}"]
    if rep.bound_name:
        lines.append(f"question:      {rep.bound_name}" + (f" = {rep.bound:.6g}" if rep.mode == "bound" else ""))
    if rep.value_name:
        lines.append(f"value:         {rep.value_name}")
    for name, v in rep.constructions.items():
        lines.append(f"construction:  {name}: {v if isinstance(v, str) else _fmt(v)}")
    lines.append(f"search:        {rep.examples} targeted examples, largest value {_fmt(rep.search_worst)}; "
                 f"{rep.measured} traces measured in {rep.seconds:.1f} s")
    if rep.worst_trace is not None:
        lines.append(f"worst found:   {_fmt(rep.worst)} ({rep.worst_source}) on {_short(rep.worst_trace)}")
    if rep.shrunk_trace is not None:
        lines.append(f"shrunk:        {_fmt(rep.shrunk)} on {_short(rep.shrunk_trace)}")
    if rep.finding:
        text = rep.message if rep.message.startswith(rep.finding) else f"{rep.finding}: {rep.message}"
        lines.append(f"finding:       {text}")
        if rep.finding_trace is not None:
            lines.append(f"               on {_short(rep.finding_trace)}")
    for note in rep.notes:
        lines.append(f"note:          {note}")
    for f in rep.files:
        lines.append(f"file:          {f}")
    lines.append(f"verdict:       {rep.verdict}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m theorems.fuzz ...
    from theorems.fuzz_cli import main

    sys.exit(main())
