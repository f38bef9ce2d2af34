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

Step order (SPEC section 2)
    RM: hits are reported, then victims are evicted (eviction before insertion), then misses are admitted and paid.
    NM: token ``t`` arrives (admitted), victims are dropped from ``R_{t-1} U {t}``, the step's regret
    ``sum_{i not in R_t} a[t, i]`` is charged, then the policy observes ``a[t, i]`` for ``i in R_t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from .errors import ContractViolation, ParameterError
from .traces import AttentionTrace, PagingTrace, rm_requests_from_attention

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
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
        raise ParameterError(f"{what} = {capacity!r}: must be a positive integer")
    if capacity < 1:
        raise ParameterError(f"{what} = {capacity}: must be at least 1")
    return int(capacity)


def make_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(0 if seed is None else seed)


def _takes_model(reset) -> bool:
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
        if _takes_model(policy.reset):
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
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
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
        """Serve one step's requests; return the step's fault cost.  ``observe`` is the step's attention row."""
        t, res, pol = self.t, self._res, self.policy
        items = [int(i) for i in items]
        costs = [1.0] * len(items) if costs is None else [float(c) for c in costs]
        # zip() below would silently drop requests without a cost; a repeated item would be fetched and paid twice
        if len(costs) != len(items):
            raise ParameterError(f"step {t}: {len(items)} items requested but {len(costs)} costs given")
        if len(set(items)) != len(items):
            raise ParameterError(f"step {t}: an item is requested twice in the same step")
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
        """Token ``t`` arrives, victims are dropped, regret is charged, the policy observes; return the regret."""
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


def run_rm(policy: EvictionPolicy, trace: PagingTrace, capacity: int, seed=0, record: bool = False,
           observe: AttentionTrace | None = None) -> RunResult:
    """Run ``policy`` on a paging trace in the recompute model.  ``observe`` (same T) feeds attention rows."""
    if observe is not None and observe.T != trace.T:
        raise ParameterError(f"observe trace has {observe.T} rows but the paging trace has {trace.T} steps")
    sim = RMSimulator(policy, capacity, seed, record)
    if observe is None:
        for _, items, costs in trace.steps():
            sim.step(items.tolist(), costs.tolist())
    else:
        for (_, items, costs), (_, idx, w) in zip(trace.steps(), observe.rows()):
            sim.step(items.tolist(), costs.tolist(), (idx, w))
    return sim.result()


def run_nm(policy: EvictionPolicy, trace: AttentionTrace, capacity: int, seed=0, record: bool = False) -> RunResult:
    """Run ``policy`` on an attention trace in the no-refetch model; ``cost`` is the regret of Eq. 4."""
    sim = NMSimulator(policy, capacity, seed, record)
    res = trace.residual
    for t, idx, w in trace.rows():
        sim.step(idx, w, float(res[t]))
    return sim.result()


def run(policy: EvictionPolicy, trace: PagingTrace | AttentionTrace, capacity: int, model: str = "rm", seed=0,
        record: bool = False, theta: float = 0.1) -> RunResult:
    """Dispatch on model and trace type.  An attention trace in RM is turned into requests with threshold ``theta``
    (:func:`kvcore.traces.rm_requests_from_attention`) and its rows are observed by the policy."""
    if model not in MODELS:
        raise ParameterError(f"model = {model!r}: must be one of {MODELS}")
    if model == "nm":
        if not isinstance(trace, AttentionTrace):
            raise ParameterError("model 'nm' needs an attention trace (a paging trace has no attention rows)")
        return run_nm(policy, trace, capacity, seed, record)
    if isinstance(trace, AttentionTrace):
        return run_rm(policy, rm_requests_from_attention(trace, theta), capacity, seed, record, observe=trace)
    return run_rm(policy, trace, capacity, seed, record)
