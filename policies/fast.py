"""Fast simulation by policy name: a kernel where one exists, the plain checked engine otherwise.

``simulate_fast(policy, trace, capacity)`` returns the miss count: it builds the policy (a registered name with
parameters, or any policy object) and runs :func:`kvcore.engine.run_rm`, which itself takes the array kernel of
:mod:`kvcore.kernels` when the policy is exactly LRU, FIFO or LFU and the trace is unit-cost with one request per
step; ``"belady"`` / ``"opt"`` is :func:`kvcore.optima.belady` (its compiled kernel).  ``hits_per_step`` gives a
kernel's per-request hit flags and ``lru_miss_curve`` LRU's misses at every capacity in one pass.  A 1-D integer
numpy array is accepted wherever a trace is (as a unit-cost trace).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvcore import kernels
from kvcore.engine import check_capacity, run_rm
from kvcore.errors import ParameterError
from kvcore.traces import PagingTrace, require_trace

from .base import Policy
from .registry import make

BELADY_NAMES = ("belady", "opt")
KERNEL_NAMES = ("lru", "fifo", "lfu", *BELADY_NAMES)


def _as_trace(trace: PagingTrace | np.ndarray) -> PagingTrace:
    if isinstance(trace, np.ndarray):
        return PagingTrace.unit(trace, source="<array>")
    require_trace(trace, "trace", (PagingTrace,))
    return trace


def hits_per_step(name: str, trace: PagingTrace | np.ndarray, capacity: int, compiled: bool = True) -> np.ndarray:
    """Per-request hit flags from the kernel for ``name`` (LRU, FIFO, LFU, Belady/OPT) on a unit, single-request
    trace.  ``compiled=False`` runs the kernel's plain-Python form (the reference the compiled code is tested on)."""
    key = name.lower() if isinstance(name, str) else None
    if key not in KERNEL_NAMES:
        raise ParameterError(f"policy {name!r}: no fast kernel (kernels: {', '.join(KERNEL_NAMES)})")
    trace = _as_trace(trace)
    if not trace.is_unit_single:
        raise ParameterError(f"{trace.source}: fast kernels need unit costs and one request per step")
    k = check_capacity(capacity)
    _, hits = kernels.simulate("belady" if key in BELADY_NAMES else key, trace.items, k, record_hits=True,
                               compiled=compiled)
    return hits


def simulate_fast(policy: str | Policy, trace: PagingTrace | np.ndarray, capacity: int, seed: int = 0,
                  **params: Any) -> int:
    """Misses of ``policy`` (a registered name or any policy object) on ``trace`` at ``capacity`` in RM."""
    trace = _as_trace(trace)
    k = check_capacity(capacity)
    if isinstance(policy, str) and policy.lower() in BELADY_NAMES:
        if params:
            raise ParameterError(f"policy {policy!r} takes no parameters (got {sorted(params)})")
        from kvcore.optima import belady  # imported here: the optima module is only needed on this path

        return int(belady(trace, k).misses)
    instance = make(policy, **params) if isinstance(policy, str) else policy
    return int(run_rm(instance, trace, k, seed=seed).misses)


def lru_miss_curve(trace: PagingTrace | np.ndarray) -> np.ndarray:
    """``curve[c - 1]`` = LRU misses at capacity ``c`` for every ``c = 1..n`` (``n`` distinct items), one pass.

    Needs one request per step (costs are ignored: the curve counts misses)."""
    trace = _as_trace(trace)
    if trace.n_requests != trace.T:
        raise ParameterError(f"{trace.source}: the LRU miss curve needs one request per step")
    return kernels.lru_miss_curve(trace.items)
