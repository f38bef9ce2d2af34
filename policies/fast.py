"""Fast simulation: a kernel where one exists, the plain checked engine otherwise.

``simulate_fast(policy, trace, capacity)`` returns the miss count.  It uses an array kernel from
:mod:`policies.kernels` when the policy is LRU, FIFO, LFU (registered defaults) or Belady/OPT and the trace is
unit-cost with one request per step; every other case -- a policy instance (user-written ones included), other
registered names, parameters, multi-request or weighted traces -- runs through :func:`kvcore.engine.run_rm`, and
Belady on such a trace through :func:`kvcore.optima.belady`.  The answer is the same either way; the kernels are
checked equal to the engine by property tests.

``lru_miss_curve(trace)`` gives LRU's misses at every capacity ``1..n`` (``n`` = distinct items) in one pass.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from kvcore.engine import check_capacity, run_rm
from kvcore.errors import ParameterError
from kvcore.traces import PagingTrace

from . import kernels
from .base import Policy
from .registry import make

BELADY_NAMES = ("belady", "opt")


def dense_ids(items: np.ndarray) -> tuple[np.ndarray, int]:
    """Item ids mapped into ``[0, n)``.  Ids that are already compact (``max + 1 <= 2 * len``) are used as they are,
    so the kernels' per-item arrays stay O(T); otherwise ``np.unique(return_inverse=True)`` renumbers them."""
    items = np.asarray(items)
    if items.size == 0:
        return np.zeros(0, np.int64), 0
    top = int(items.max()) + 1
    if top <= 2 * items.size:
        return np.ascontiguousarray(items, dtype=np.int64), top
    uniq, inverse = np.unique(items, return_inverse=True)
    return inverse.astype(np.int64).ravel(), int(uniq.size)


def _pick(kernel, compiled: bool):
    return kernel if compiled else kernels.interpreted(kernel)


def _lru(ids, n, k, compiled=True):
    return _pick(kernels.lru_hits, compiled)(ids, n, k)


def _fifo(ids, n, k, compiled=True):
    return _pick(kernels.fifo_hits, compiled)(ids, n, k)


def _lfu(ids, n, k, compiled=True):
    max_count = int(np.bincount(ids, minlength=1).max()) if ids.size else 0
    return _pick(kernels.lfu_hits, compiled)(ids, n, k, max_count)


def _belady(ids, n, k, compiled=True):
    return _pick(kernels.belady_hits, compiled)(ids, n, k, _pick(kernels.next_request, compiled)(ids, n))


KERNELS: dict[str, Callable[..., np.ndarray]] = {
    "lru": _lru, "fifo": _fifo, "lfu": _lfu, **{name: _belady for name in BELADY_NAMES}}


def _as_trace(trace: PagingTrace | np.ndarray) -> PagingTrace:
    if isinstance(trace, PagingTrace):
        return trace
    if isinstance(trace, np.ndarray):
        return PagingTrace.unit(trace, source="<array>")
    raise ParameterError(f"trace: expected a PagingTrace or a 1-D integer numpy array, got {type(trace).__name__}")


def hits_per_step(name: str, trace: PagingTrace | np.ndarray, capacity: int, compiled: bool = True) -> np.ndarray:
    """Per-request hit flags from the kernel for ``name`` (one of ``KERNELS``) on a unit, single-request trace.
    ``compiled=False`` runs the kernel's plain-Python form (what runs when numba is absent)."""
    key = name.lower() if isinstance(name, str) else None
    if key not in KERNELS:
        raise ParameterError(f"policy {name!r}: no fast kernel (kernels: {sorted(KERNELS)})")
    trace = _as_trace(trace)
    if not trace.is_unit_single:
        raise ParameterError(f"{trace.source}: fast kernels need unit costs and one request per step")
    k = check_capacity(capacity)
    ids, n = dense_ids(trace.items)
    return KERNELS[key](ids, n, k, compiled)


def simulate_fast(policy: str | Policy, trace: PagingTrace | np.ndarray, capacity: int, seed: int = 0,
                  **params: Any) -> int:
    """Misses of ``policy`` (a registered name or any policy object) on ``trace`` at ``capacity`` in RM."""
    trace = _as_trace(trace)
    k = check_capacity(capacity)
    key = policy.lower() if isinstance(policy, str) else None
    if key in KERNELS and not params and trace.is_unit_single:
        return int(trace.T - np.count_nonzero(hits_per_step(key, trace, k)))
    if key in BELADY_NAMES:
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
    ids, n = dense_ids(trace.items)
    return kernels.miss_curve_from_distances(kernels.lru_stack_distances(ids, n))
