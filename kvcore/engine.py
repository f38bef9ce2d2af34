"""The cost-model engine: runs any policy under RM or NM and enforces the contract on every step (SPEC section 2).

The policy interface
--------------------
An eviction policy is any object with these five methods (``policies.base.Policy`` implements them with the
bookkeeping done, so a concrete policy only chooses victims):

``reset(capacity, rng[, model])``
    Start a new run with cache size ``capacity`` and a seeded ``numpy.random.Generator``; a policy whose ``reset``
    takes a third parameter is also told the cost model (``"rm"`` or ``"nm"``), so that e.g. a classic policy can
    ignore the attention rows an RM run built from attention also feeds it.
``admit(t, item, cost)``
    ``item`` became resident at step ``t``: a fetched miss in RM (``cost`` = its fault cost), an arriving token in
    NM (``cost`` = 0).
``hit(t, item, cost)``
    ``item`` was requested at step ``t`` and was resident (RM only).
``evict(t, need, protected) -> sequence of items``
    Room is needed: return at least ``need`` distinct resident items, none in ``protected`` (the items requested at
    this step in RM; empty in NM, where the arriving token itself may be dropped).
``observe(t, items, weights)``
    Attention at step ``t`` on the resident items only (NM; RM when the trace came from attention).  Read-only
    arrays; raw weights, not renormalized.

Information rule: the engine never hands the policy the trace, a future step, an evicted item's attention, or the
optimum.  Contract: every victim is resident, distinct and unprotected, at least ``need`` of them; so capacity holds
after every step, every requested item is resident after its step (RM), and an evicted token can never come back
(NM: items enter only by arriving).  A violation raises :class:`ContractViolation` naming policy, step and item.

Fast path: :func:`run` / :func:`run_rm` hand a run to an array kernel (:mod:`kvcore.kernels`) when the policy is
exactly a registered kernel rule (LRU, FIFO, LFU), the model is RM, the trace is unit-cost with one request per step
and no per-step record is asked for.  The kernels are property-tested equal to the checked loop; any other policy --
a subclass, a user's policy, a replaced method -- takes the checked loop.  ``kernel=False`` forces the loop.

Input checks: :meth:`RMSimulator.step` and :meth:`NMSimulator.step` (the API adaptive adversaries and users call)
refuse anything that is not exactly the expected type -- a float or bool item id, a negative or future token, a
NaN cost -- with a one-line ``TypeError`` or :class:`ParameterError` naming the step; the ``run*`` functions refuse
an argument that is not a trace.  Traces are validated once when built, so the ``run*`` loops skip the per-step
checks.

Step order (SPEC section 2)
    RM: hits are reported, then victims are evicted (eviction before insertion), then misses are admitted and paid.
    NM: token ``t`` arrives (admitted), victims are dropped from ``R_{t-1} U {t}``, the step's regret
    ``sum_{i not in R_t} a[t, i]`` is charged, then the policy observes ``a[t, i]`` for ``i in R_t``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from . import kernels
from .errors import ContractViolation, ParameterError
from .numbers import integer, is_integer, is_real
from .traces import AttentionTrace, PagingTrace, require_trace, rm_requests_from_attention

MODELS = ("rm", "nm")
_EMPTY: frozenset = frozenset()


@runtime_checkable
class EvictionPolicy(Protocol):
    """The engine-facing policy interface (see module docstring)."""

    def reset(self, capacity: int, rng: np.random.Generator, model: str = "rm") -> None: ...
    def admit(self, t: int, item: int, cost: float) -> None: ...
    def hit(self, t: int, item: int, cost: float) -> None: ...
    def evict(self, t: int, need: int, protected: frozenset) -> Sequence[int]: ...
    def observe(self, t: int, items: np.ndarray, weights: np.ndarray) -> None: ...


INTERFACE_METHODS = ("reset", "admit", "hit", "evict", "observe")


def policy_name(policy: Any) -> str:
    return str(getattr(policy, "name", None) or type(policy).__name__)


def check_capacity(capacity: Any, what: str = "capacity") -> int:
    return integer(capacity, what, 1)


def make_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """The run's generator: ``seed`` is a ``Generator`` (used as it is), ``None`` (seed 0) or an integer >= 0."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        seed = 0
    if not is_integer(seed):
        raise TypeError(f"seed = {seed!r}: must be an integer >= 0 or a numpy Generator, got {type(seed).__name__}")
    if seed < 0:
        raise ParameterError(f"seed = {seed}: must be an integer >= 0")
    return np.random.default_rng(int(seed))


def takes_model(reset) -> bool:
    import inspect

    try:
        params = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in params)


@dataclass
class RunResult:
    """Outcome of one run.  ``cost`` is the total fault cost (RM) or the attention-mass regret (NM, Eq. 4)."""

    policy: str
    model: str
    capacity: int
    steps: int
    requests: int
    cost: float
    misses: int
    per_step: np.ndarray | None = None
    evictions: list[tuple[int, int]] | None = None
    unattributed: float = 0.0

    def as_dict(self) -> dict:
        return {"policy": self.policy, "model": self.model, "capacity": self.capacity, "steps": self.steps,
                "requests": self.requests, "cost": self.cost, "misses": self.misses,
                "unattributed_mass": self.unattributed}


class _Simulator:
    """Shared contract checking for both models."""

    model = ""

    def __init__(self, policy: EvictionPolicy, capacity: int, seed: int | np.random.Generator | None = 0,
                 record: bool = False):
        self.policy = policy
        self.name = policy_name(policy)
        self.capacity = check_capacity(capacity)
        missing = [m for m in INTERFACE_METHODS if not callable(getattr(policy, m, None))]
        if missing:
            raise ParameterError(f"policy {self.name!r} lacks interface method(s) {missing}")
        if takes_model(policy.reset):
            policy.reset(self.capacity, make_rng(seed), self.model)
        else:
            policy.reset(self.capacity, make_rng(seed))
        self.t = 0
        self.cost = 0.0
        self.misses = 0
        self.requests = 0
        self.record = record
        self.per_step: list[float] = []
        self.evictions: list[tuple[int, int]] = []

    def _take_victims(self, need: int, protected: frozenset, is_resident) -> list[int]:
        t = self.t
        raw = self.policy.evict(t, need, protected)
        victims = [] if raw is None else list(raw)
        if len(victims) < need:
            raise ContractViolation(self.name, t, f"returned {len(victims)} victim(s) but {need} are needed "
                                    f"(capacity {self.capacity} would be exceeded)")
        seen = set()
        for v in victims:
            if not is_integer(v):
                raise ContractViolation(self.name, t, f"victim {v!r} is not an item id")
            v = int(v)
            if v in seen:
                raise ContractViolation(self.name, t, "evicts the same item twice", v)
            if not is_resident(v):
                raise ContractViolation(self.name, t, "evicts an item that is not resident", v)
            if v in protected:
                raise ContractViolation(self.name, t, "evicts an item requested at this step", v)
            seen.add(v)
        if self.record:
            self.evictions.extend((t, int(v)) for v in victims)
        return [int(v) for v in victims]


class RMSimulator(_Simulator):
    """Step-by-step recompute/paging model.  ``resident`` is the authoritative resident set (read it, never write it).

    Adaptive adversaries drive a policy through this class: they look at ``resident`` and choose the next request.
    """

    model = "rm"

    def __init__(self, policy, capacity, seed=0, record=False):
        super().__init__(policy, capacity, seed, record)
        self._res: set[int] = set()

    @property
    def resident(self) -> frozenset:
        return frozenset(self._res)

    def is_resident(self, item: int) -> bool:
        return item in self._res

    def step(self, items: Iterable[int], costs: Iterable[float] | None = None,
             observe: tuple[np.ndarray, np.ndarray] | None = None) -> float:
        """Serve one step's requests; return the step's fault cost.  ``observe`` is the step's attention row.

        Checked strictly (nothing is coerced): ``items`` are distinct non-negative integers (``1.7``, ``True`` or
        ``"3"`` raise TypeError), ``costs`` one finite real ``>= 0`` per item, ``observe`` a pair of equal-length 1-D
        arrays (integer tokens, real weights)."""
        t = self.t
        items = _step_items(items, t)
        costs = [1.0] * len(items) if costs is None else _step_costs(costs, t)
        # zip() below would silently drop requests without a cost; a repeated item would be fetched and paid twice
        if len(costs) != len(items):
            raise ParameterError(f"step {t}: {len(items)} items requested but {len(costs)} costs given")
        if len(set(items)) != len(items):
            raise ParameterError(f"step {t}: an item is requested twice in the same step")
        if observe is not None:
            observe = _row(observe, t, "observe")
        return self._serve(items, costs, observe)

    def _serve(self, items: list[int], costs: list[float], observe) -> float:
        """One step on already-checked input (``run_rm`` feeds a validated trace straight here)."""
        t, res, pol = self.t, self._res, self.policy
        if len(items) > self.capacity:
            raise ParameterError(f"step {t}: {len(items)} items requested but capacity is {self.capacity}")
        misses = []
        for item, c in zip(items, costs):
            if item in res:
                pol.hit(t, item, c)
            else:
                misses.append((item, c))
        need = len(res) + len(misses) - self.capacity
        if need > 0:
            for v in self._take_victims(need, frozenset(items), res.__contains__):
                res.discard(v)
        step_cost = 0.0
        for item, c in misses:
            res.add(item)
            pol.admit(t, item, c)
            step_cost += c
        if observe is not None:
            idx, w = observe
            keep = np.fromiter((int(i) in res for i in idx), dtype=bool, count=len(idx))
            pol.observe(t, idx[keep], w[keep])
        self.cost += step_cost
        self.misses += len(misses)
        self.requests += len(items)
        if self.record:
            self.per_step.append(step_cost)
        self.t = t + 1
        return step_cost

    def result(self) -> RunResult:
        return RunResult(self.name, "rm", self.capacity, self.t, self.requests, self.cost, self.misses,
                         np.asarray(self.per_step) if self.record else None,
                         self.evictions if self.record else None)


class NMSimulator(_Simulator):
    """Step-by-step no-refetch model.  Token ``t`` arrives at step ``t``; rows come one per step."""

    model = "nm"

    def __init__(self, policy, capacity, seed=0, record=False):
        super().__init__(policy, capacity, seed, record)
        self._mask = np.zeros(1024, dtype=bool)
        self._count = 0
        self.unattributed = 0.0

    @property
    def resident(self) -> frozenset:
        return frozenset(np.flatnonzero(self._mask[: self.t]).tolist())

    def is_resident(self, item: int) -> bool:
        return 0 <= item < self.t and bool(self._mask[item])

    def step(self, idx: np.ndarray, w: np.ndarray, residual: float = 0.0) -> float:
        """Token ``t`` arrives, victims are dropped, regret is charged, the policy observes; return the regret.

        ``idx`` (integer tokens, strictly increasing, each in ``0..t``) and ``w`` (finite weights ``>= 0``) are the
        row's stored entries; ``residual`` (finite, ``>= 0``) its unstored mass.  Checked strictly: a negative or
        future token, a float token or a NaN weight raises instead of indexing the wrong token."""
        t = self.t
        idx, w = _row((idx, w), t, "row")
        if idx.size and (idx[0] < 0 or idx[-1] > t or (idx.size > 1 and (np.diff(idx) <= 0).any())):
            raise ParameterError(f"step {t}: row tokens must be strictly increasing integers in 0..{t}, "
                                 f"got {idx.tolist()[:8]}")
        return self._serve(idx, w, _amount(residual, t, "residual"))

    def _serve(self, idx: np.ndarray, w: np.ndarray, residual: float) -> float:
        """One step on an already-checked row (``run_nm`` feeds a validated trace straight here)."""
        t, pol = self.t, self.policy
        if t >= self._mask.size:
            self._mask = np.concatenate([self._mask, np.zeros(self._mask.size, dtype=bool)])
        mask = self._mask
        mask[t] = True
        self._count += 1
        pol.admit(t, t, 0.0)
        need = self._count - self.capacity
        if need > 0:
            victims = self._take_victims(need, _EMPTY, lambda v: 0 <= v <= t and bool(mask[v]))
            mask[victims] = False
            self._count -= len(victims)
        present = mask[idx]
        regret = float(w.sum() - w[present].sum())
        self.cost += regret
        self.misses += int(np.count_nonzero(~present & (w > 0)))
        self.requests += len(idx)
        self.unattributed += residual
        if self.record:
            self.per_step.append(regret)
        pol.observe(t, idx[present], w[present])
        self.t = t + 1
        return regret

    def result(self) -> RunResult:
        return RunResult(self.name, "nm", self.capacity, self.t, self.requests, self.cost, self.misses,
                         np.asarray(self.per_step) if self.record else None,
                         self.evictions if self.record else None, self.unattributed)


def _step_items(items: Any, t: int) -> list[int]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise TypeError(f"step {t}: items must be a sequence of integer item ids, got {type(items).__name__}")
    out = []
    for v in items:
        if not is_integer(v):
            raise TypeError(f"step {t}: item {v!r} is not an integer item id ({type(v).__name__})")
        if v < 0:
            raise ParameterError(f"step {t}: item id {int(v)} is negative")
        out.append(int(v))
    return out


def _step_costs(costs: Any, t: int) -> list[float]:
    if isinstance(costs, (str, bytes)) or not isinstance(costs, Iterable):
        raise TypeError(f"step {t}: costs must be a sequence of numbers, got {type(costs).__name__}")
    return [_amount(c, t, "cost") for c in costs]


def _amount(x: Any, t: int, what: str) -> float:
    """A finite real ``>= 0`` (a cost or a residual mass); a bool, a string or None is a TypeError."""
    if not is_real(x):
        raise TypeError(f"step {t}: {what} {x!r} is not a number ({type(x).__name__})")
    if not (math.isfinite(x) and x >= 0):
        raise ParameterError(f"step {t}: {what} {x!r} must be finite and >= 0")
    return float(x)


def _row(row: Any, t: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """An attention row ``(tokens, weights)`` as arrays, refusing float tokens and non-finite or negative weights."""
    try:
        idx, w = row
    except (TypeError, ValueError):
        raise TypeError(f"step {t}: {what} must be a pair (tokens, weights)") from None
    idx, w = np.asarray(idx), np.asarray(w)
    if idx.ndim != 1 or w.ndim != 1 or idx.size != w.size:
        raise ParameterError(f"step {t}: {what} tokens and weights must be 1-D of equal length, got shapes "
                             f"{idx.shape} and {w.shape}")
    if idx.size and idx.dtype.kind not in "iu":
        raise TypeError(f"step {t}: {what} tokens must be integers, got dtype {idx.dtype}")
    if w.size and w.dtype.kind not in "iuf":
        raise TypeError(f"step {t}: {what} weights must be real numbers, got dtype {w.dtype}")
    w = w.astype(np.float64, copy=False)
    if w.size and not (np.isfinite(w).all() and (w >= 0).all()):
        raise ParameterError(f"step {t}: {what} weights must be finite and >= 0")
    return idx.astype(np.int64, copy=False), w


def _kernel_run(policy: EvictionPolicy, trace: PagingTrace, capacity: int) -> RunResult | None:
    """The array kernel's result when ``policy`` is a registered kernel rule and ``trace`` is unit-cost with one
    request per step (:mod:`kvcore.kernels`), else None.  The policy object is not driven (nor reset) by this path."""
    name = kernels.kernel_for(policy)
    if name is None or not trace.is_unit_single:
        return None
    k = check_capacity(capacity)
    misses, _ = kernels.simulate(name, trace.items, k)
    return RunResult(policy_name(policy), "rm", k, trace.T, trace.n_requests, float(misses), misses)


def run_rm(policy: EvictionPolicy, trace: PagingTrace, capacity: int, seed=0, record: bool = False,
           observe: AttentionTrace | None = None, kernel: bool = True) -> RunResult:
    """Run ``policy`` on a paging trace in the recompute model.  ``observe`` (same T) feeds attention rows.

    With ``kernel=True`` (default), no ``record`` and no ``observe``, a policy that is exactly a registered kernel
    rule (LRU, FIFO, LFU) on a unit-cost single-request trace runs as an array kernel: same cost and misses as the
    checked loop (property-tested), tens of millions of requests per second.  ``kernel=False`` forces the loop."""
    require_trace(trace, "trace", (PagingTrace,))
    if observe is not None:
        require_trace(observe, "observe", (AttentionTrace,))
        if observe.T != trace.T:
            raise ParameterError(f"observe trace has {observe.T} rows but the paging trace has {trace.T} steps")
    elif kernel and not record:
        fast = _kernel_run(policy, trace, capacity)
        if fast is not None:
            return fast
    sim = RMSimulator(policy, capacity, seed, record)
    if observe is None:
        for _, items, costs in trace.steps():
            sim._serve(items.tolist(), costs.tolist(), None)
    else:
        for (_, items, costs), (_, idx, w) in zip(trace.steps(), observe.rows()):
            sim._serve(items.tolist(), costs.tolist(), (idx, w))
    return sim.result()


def run_nm(policy: EvictionPolicy, trace: AttentionTrace, capacity: int, seed=0, record: bool = False) -> RunResult:
    """Run ``policy`` on an attention trace in the no-refetch model; ``cost`` is the regret of Eq. 4."""
    require_trace(trace, "trace", (AttentionTrace,))
    sim = NMSimulator(policy, capacity, seed, record)
    res = trace.residual
    for t, idx, w in trace.rows():
        sim._serve(idx, w, float(res[t]))
    return sim.result()


def run(policy: EvictionPolicy, trace: PagingTrace | AttentionTrace, capacity: int, model: str = "rm", seed=0,
        record: bool = False, theta: float = 0.1, kernel: bool = True) -> RunResult:
    """Dispatch on model and trace type.  An attention trace in RM is turned into requests with threshold ``theta``
    (:func:`kvcore.traces.rm_requests_from_attention`) and its rows are observed by the policy.  ``kernel``: see
    :func:`run_rm`."""
    if model not in MODELS:
        raise ParameterError(f"model = {model!r}: must be one of {MODELS}")
    require_trace(trace, "trace")
    if model == "nm":
        if not isinstance(trace, AttentionTrace):
            raise ParameterError("model 'nm' needs an attention trace (a paging trace has no attention rows)")
        return run_nm(policy, trace, capacity, seed, record)
    if isinstance(trace, AttentionTrace):
        return run_rm(policy, rm_requests_from_attention(trace, theta), capacity, seed, record, observe=trace)
    return run_rm(policy, trace, capacity, seed, record, kernel=kernel)
