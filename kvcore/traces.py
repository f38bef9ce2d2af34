"""Trace types, validation, and file formats (SPEC section 1).

Two kinds of trace, both stored as flat arrays so that long traces fit in memory:

``PagingTrace`` (recompute / paging model)
    Steps ``t = 0..T-1`` (the paper counts from 1; we count from 0 everywhere in code).  Step ``t`` requests the items
    ``items[offsets[t]:offsets[t+1]]`` (distinct int64 ids >= 0, at least one) with fault costs ``costs[...]``
    (finite, >= 0, with a finite total; 0 is a free request such as a token's arrival in RM).  A plain 1-D integer
    array is the unit-cost, one-request-per-step trace, stored as that array alone (costs and offsets implicit).

``AttentionTrace`` (both models)
    Token ``t`` arrives at step ``t``.  Row ``t`` is a probability distribution over tokens ``0..t`` stored sparse in
    CSR form: ``indices[indptr[t]:indptr[t+1]]`` (strictly increasing, each ``<= t``) with ``weights[...]`` (finite,
    >= 0).  ``residual[t]`` is mass the row places on tokens that were not stored (a captured trace keeps only its
    top entries); stored weights plus residual sum to 1 within ``ROW_SUM_TOL``.  Residual mass is unattributed: a
    policy's true regret lies in ``[regret, regret + sum(residual)]``, and the same holds for the optimum.

File formats: :mod:`kvcore.trace_files`.

Every problem is reported as one line ``"<source>: step <t>: <problem>"`` through :class:`TraceError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from .errors import TraceError
from .numbers import is_integer

ROW_SUM_TOL = 1e-6


def trace_error(source: str, problem: str, step: int | None = None) -> TraceError:
    where = source if step is None else f"{source}: step {step}"
    return TraceError(f"{where}: {problem}")


def _as_int_array(values, source: str, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise trace_error(source, f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind == "O" and all(is_integer(v) for v in arr.tolist()):
        raise trace_error(source, f"{name} holds a value that does not fit in int64")  # numpy keeps such ints as objects
    if arr.dtype.kind not in "iu":
        raise trace_error(source, f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and int(arr.max()) > INT64_MAX:
        i = _first_bad(arr > INT64_MAX)
        raise trace_error(source, f"{name}[{i}] = {int(arr[i])} does not fit in int64")
    return arr.astype(np.int64, copy=False)


def _as_float_array(values, source: str, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise trace_error(source, f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "fiu":
        raise trace_error(source, f"{name} must hold numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


# --------------------------------------------------------------------------------------------------------------------
# Paging traces
# --------------------------------------------------------------------------------------------------------------------


class PagingTrace:
    """A request sequence for the recompute/paging model (SPEC section 2, RM).

    ``PagingTrace(items, costs=None, offsets=None, source)``: ``costs=None`` means every request costs 1 and
    ``offsets=None`` one request per step.  A unit-cost, one-request-per-step trace (the common case, and every
    ``.npy``/``.txt`` file) stores only ``items``, without a copy when they are already int64 (a memory-mapped file
    stays mapped): ``costs`` is then a read-only broadcast view of 1.0 that takes no memory, and ``offsets`` is built
    on first access only.  Explicit all-ones costs and ``0..T`` offsets are recognised and stored the same way.
    """

    def __init__(self, items, costs=None, offsets=None, source: str = "<trace>"):
        src = str(source)
        self._source = src
        items = _as_int_array(items, src, "items")
        n = items.size
        if costs is not None:
            costs = _as_float_array(costs, src, "costs")
            if costs.shape != items.shape:
                raise trace_error(src, f"costs has {costs.size} entries but items has {n}")
        if offsets is not None:
            offsets = _as_int_array(offsets, src, "offsets")
            if offsets.size < 1 or offsets[0] != 0 or offsets[-1] != n:
                raise trace_error(src, f"offsets must start at 0 and end at len(items) = {n}")
            steps = np.diff(offsets)
            if steps.size and (steps <= 0).any():
                raise trace_error(src, "a step requests no item (offsets not strictly increasing)", _first_bad(steps <= 0))
            if steps.size == n:  # every step requests one item: the offsets carry no information
                offsets = None
        step_of = None if offsets is None else np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        if n and int(items.min()) < 0:
            i = _first_bad(items < 0)
            raise trace_error(src, f"negative item id {int(items[i])}", i if step_of is None else int(step_of[i]))
        if costs is not None:
            _check_costs(costs, src, step_of)
            if bool((costs == 1.0).all()):
                costs = None
        if offsets is not None:
            for t in np.flatnonzero(np.diff(offsets) > 1):
                q = items[offsets[t] : offsets[t + 1]]
                if np.unique(q).size != q.size:
                    raise trace_error(src, "an item is requested twice in the same step", int(t))
        for arr in (items, costs, offsets):
            if arr is not None and arr.flags.writeable:
                arr.setflags(write=False)
        self._items, self._costs, self._offsets = items, costs, offsets

    # -- construction -------------------------------------------------------------------------------------------------
    @classmethod
    def unit(cls, seq: Iterable[int], source: str = "<trace>") -> "PagingTrace":
        """Unit-cost, one request per step (an int64 array is used as it is, without a copy)."""
        # np.asarray, not np.fromiter(dtype=int64): fromiter would silently truncate a float id such as 1.5
        return cls(seq if isinstance(seq, np.ndarray) else _ids_from_sequence(seq, source), None, None, source)

    @classmethod
    def from_steps(cls, steps: Sequence[Sequence[int]], costs: Sequence[Sequence[float]] | None = None,
                   source: str = "<trace>") -> "PagingTrace":
        """Several requests per step; ``costs`` parallels ``steps`` (default all 1)."""
        lengths = [len(q) for q in steps]
        items = _ids_from_sequence([i for q in steps for i in q], source, [t for t, q in enumerate(steps) for _ in q])
        if costs is None:
            c = None
        else:
            if [len(x) for x in costs] != lengths:
                raise trace_error(source, "costs must have one entry per requested item")
            c = np.asarray([x for q in costs for x in q])
            if c.size == 0:
                c = np.zeros(0)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(items, c, offsets, source)

    # -- views --------------------------------------------------------------------------------------------------------
    @property
    def items(self) -> np.ndarray:
        return self._items

    @property
    def costs(self) -> np.ndarray:
        """Fault cost per request (a read-only broadcast view of 1.0 for a unit-cost trace: no memory)."""
        if self._costs is None:
            return np.broadcast_to(_ONE, self._items.shape)
        return self._costs

    @property
    def offsets(self) -> np.ndarray:
        """Step boundaries: step ``t`` requests ``items[offsets[t]:offsets[t+1]]`` (built on first access when every
        step requests one item)."""
        if self._offsets is None:
            off = np.arange(self._items.size + 1, dtype=np.int64)
            off.setflags(write=False)
            return off
        return self._offsets

    @property
    def source(self) -> str:
        return self._source

    @property
    def T(self) -> int:
        return self._items.size if self._offsets is None else self._offsets.size - 1

    @property
    def n_requests(self) -> int:
        return int(self._items.size)

    @property
    def is_unit_single(self) -> bool:
        """True when every step requests exactly one item at cost 1 (Belady and the array kernels apply)."""
        return self._costs is None and self._offsets is None

    def step(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        if self._offsets is None:
            a, b = t, t + 1
        else:
            a, b = self._offsets[t], self._offsets[t + 1]
        return self._items[a:b], self.costs[a:b]

    def steps(self):
        """Yield ``(t, items, costs)`` for every step."""
        items, costs = self._items, self.costs
        if self._offsets is None:
            for t in range(items.size):
                yield t, items[t : t + 1], costs[t : t + 1]
            return
        off = self._offsets
        for t in range(self.T):
            a, b = off[t], off[t + 1]
            yield t, items[a:b], costs[a:b]

    def prefix(self, T: int) -> "PagingTrace":
        """The first ``T`` steps."""
        end = T if self._offsets is None else self._offsets[T]
        return PagingTrace(self._items[:end], None if self._costs is None else self._costs[:end],
                           None if self._offsets is None else self._offsets[: T + 1], self._source)

    def distinct_items(self) -> np.ndarray:
        return np.unique(self._items)

    def __len__(self) -> int:
        return self.T

    def __repr__(self) -> str:
        return f"PagingTrace(T={self.T}, requests={self.n_requests}, distinct={self.distinct_items().size})"


_ONE = np.float64(1.0)


def _check_costs(costs: np.ndarray, src: str, step_of: np.ndarray | None) -> None:
    """Fault costs must be finite and >= 0 (0 is a free request, e.g. a token's arrival in RM), and so must their
    total: a sum that overflows float64 would make every cost comparison meaningless."""
    def step(i: int) -> int:
        return i if step_of is None else int(step_of[i])

    if not costs.size:
        return
    if not np.isfinite(costs).all():
        i = _first_bad(~np.isfinite(costs))
        raise trace_error(src, f"fault cost is {costs[i]} (must be finite)", step(i))
    if (costs < 0).any():
        i = _first_bad(costs < 0)
        raise trace_error(src, f"negative fault cost {costs[i]}", step(i))
    with np.errstate(over="ignore"):
        total = costs.sum()
    if not np.isfinite(total):
        raise trace_error(src, f"the fault costs sum to more than the largest float ({np.finfo(np.float64).max:.3g})")


def _ids_from_sequence(seq: Iterable[int], source: str, step_of: Sequence[int] | None = None) -> np.ndarray:
    """A Python sequence of ids as an array, refusing anything that is not an integer (bools, floats, strings,
    numbers written as text) instead of letting numpy convert it; ``step_of[i]`` names the step of request ``i``
    (default: request ``i`` is step ``i``)."""
    values = list(seq)
    for i, v in enumerate(values):
        if not is_integer(v):
            raise trace_error(source, f"item id {v!r} is not an integer", i if step_of is None else step_of[i])
        if not (_INT64_MIN <= int(v) <= INT64_MAX):
            raise trace_error(source, f"item id {int(v)} does not fit in int64", i if step_of is None else step_of[i])
    return np.asarray(values, dtype=np.int64) if values else np.zeros(0, np.int64)


_INT64_MIN, INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def require_trace(trace: Any, argument: str = "trace", kinds: tuple[type, ...] | None = None) -> None:
    """Raise a one-line TypeError naming ``argument`` unless ``trace`` is one of ``kinds`` (default: either trace
    type).  Guards the Python API: a list or an array where a trace belongs would otherwise fail deep inside."""
    kinds = kinds or (PagingTrace, AttentionTrace)
    if isinstance(trace, kinds):
        return
    want = " or ".join(k.__name__ for k in kinds)
    hint = ""
    if isinstance(trace, (list, tuple, np.ndarray)) and PagingTrace in kinds:
        hint = " (wrap item ids with kvcore.traces.PagingTrace.unit(ids), or read a file with load_trace(path))"
    raise TypeError(f"{argument}: expected a {want}, got {type(trace).__name__}{hint}")


# --------------------------------------------------------------------------------------------------------------------
# Attention traces
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Sparse attention rows ``a[t, .]`` over tokens ``0..t`` (SPEC section 1)."""

    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    residual: np.ndarray | None = None
    source: str = field(default="<trace>", compare=False)

    def __post_init__(self):
        src = self.source
        indptr = _as_int_array(self.indptr, src, "indptr")
        indices = _as_int_array(self.indices, src, "indices")
        weights = _as_float_array(self.weights, src, "weights")
        T = indptr.size - 1
        residual = np.zeros(max(T, 0)) if self.residual is None else _as_float_array(self.residual, src, "residual")
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "residual", residual)
        if indptr.size < 1 or indptr[0] != 0 or indptr[-1] != indices.size:
            raise trace_error(src, f"indptr must start at 0 and end at len(indices) = {indices.size} (truncated file?)")
        if weights.shape != indices.shape:
            raise trace_error(src, f"weights has {weights.size} entries but indices has {indices.size}")
        if residual.size != T:
            raise trace_error(src, f"residual has {residual.size} entries but the trace has {T} rows")
        lengths = np.diff(indptr)
        if (lengths < 0).any():
            raise trace_error(src, "indptr decreases", _first_bad(lengths < 0))
        row = np.repeat(np.arange(T), lengths)
        if indices.size:
            if (indices < 0).any():
                i = _first_bad(indices < 0)
                raise trace_error(src, f"negative token id {int(indices[i])}", int(row[i]))
            if (indices > row).any():
                i = _first_bad(indices > row)
                raise trace_error(src, f"references future token {int(indices[i])}", int(row[i]))
            same_row = row[1:] == row[:-1]
            bad = same_row & (indices[1:] <= indices[:-1])
            if bad.any():
                i = _first_bad(bad) + 1
                raise trace_error(src, "token ids in a row must be strictly increasing (duplicate or unsorted)",
                            int(row[i]))
            if not np.isfinite(weights).all():
                i = _first_bad(~np.isfinite(weights))
                raise trace_error(src, f"weight is {weights[i]} for token {int(indices[i])}", int(row[i]))
            if (weights < 0).any():
                i = _first_bad(weights < 0)
                raise trace_error(src, f"negative weight {weights[i]} for token {int(indices[i])}", int(row[i]))
        if T and not np.isfinite(residual).all():
            t = _first_bad(~np.isfinite(residual))
            raise trace_error(src, f"residual mass is {residual[t]}", t)
        if T and (residual < 0).any():
            t = _first_bad(residual < 0)
            raise trace_error(src, f"negative residual mass {residual[t]}", t)
        # bincount, not add.reduceat: reduceat fails on a trailing empty row (all mass in the residual)
        sums = np.bincount(row, weights=weights, minlength=T) + residual
        off = np.abs(sums - 1.0) > ROW_SUM_TOL
        if off.any():
            t = _first_bad(off)
            raise trace_error(src, f"row sums to {sums[t]:.9g}, not 1 (tolerance {ROW_SUM_TOL:g})", t)
        for arr in (indptr, indices, weights, residual):
            arr.setflags(write=False)

    # -- construction -------------------------------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, rows: Sequence[dict[int, float] | Sequence[tuple[int, float]]],
                  source: str = "<trace>") -> "AttentionTrace":
        """Build from one mapping (or list of pairs) ``token -> weight`` per row; entries are sorted here."""
        indptr = [0]
        idx: list[int] = []
        w: list[float] = []
        for r in rows:
            pairs = sorted((r.items() if isinstance(r, dict) else r))
            idx.extend(int(i) for i, _ in pairs)
            w.extend(float(x) for _, x in pairs)
            indptr.append(len(idx))
        return cls(np.asarray(indptr, dtype=np.int64), np.asarray(idx, dtype=np.int64),
                   np.asarray(w, dtype=np.float64), None, source)

    @classmethod
    def from_dense(cls, a: np.ndarray, source: str = "<trace>") -> "AttentionTrace":
        """From a dense lower-triangular ``T x T`` matrix (tests and small examples only)."""
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise trace_error(source, f"dense attention must be square, got shape {a.shape}")
        if np.triu(a, 1).any():
            r, c = np.argwhere(np.triu(a, 1))[0]
            raise trace_error(source, f"references future token {int(c)}", int(r))
        rows = [{int(i): float(a[t, i]) for i in np.flatnonzero(a[t, : t + 1])} for t in range(a.shape[0])]
        return cls.from_rows(rows, source)

    # -- views --------------------------------------------------------------------------------------------------------
    @property
    def T(self) -> int:
        return self.indptr.size - 1

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def row(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.indptr[t], self.indptr[t + 1]
        return self.indices[a:b], self.weights[a:b]

    def rows(self):
        """Yield ``(t, indices, weights)`` for every row."""
        ip, ix, w = self.indptr, self.indices, self.weights
        for t in range(self.T):
            a, b = ip[t], ip[t + 1]
            yield t, ix[a:b], w[a:b]

    def to_dense(self) -> np.ndarray:
        """Dense ``T x T`` matrix (small traces only: tests and figures)."""
        d = np.zeros((self.T, self.T))
        rows = np.repeat(np.arange(self.T), np.diff(self.indptr))
        d[rows, self.indices] = self.weights
        return d

    def total_mass(self) -> float:
        """Total stored (attributed) mass, the regret of an empty cache."""
        return float(self.weights.sum())

    def prefix(self, T: int) -> "AttentionTrace":
        end = self.indptr[T]
        return AttentionTrace(self.indptr[: T + 1], self.indices[:end], self.weights[:end], self.residual[:T],
                              self.source)

    def __len__(self) -> int:
        return self.T

    def __repr__(self) -> str:
        return f"AttentionTrace(T={self.T}, nnz={self.nnz})"


def recompute_weights(T: int, slope: float = 1.0) -> np.ndarray:
    """Default recompute weight of token ``i`` (0-based): ``w_i = 1 + slope * (i + 1) / T`` (SPEC section 2, RM).

    Rebuilding token ``i``'s keys and values needs a forward pass over its prefix, so the weight grows with position
    (paper Section 3); ``slope = 1`` gives the SPEC default ``w_i = 1 + i/T`` in the paper's 1-based numbering.
    """
    return 1.0 + slope * (np.arange(T, dtype=np.float64) + 1.0) / max(T, 1)


def rm_requests_from_attention(trace: AttentionTrace, theta: float,
                               weights: np.ndarray | None = None) -> PagingTrace:
    """The recompute-model request sequence of an attention trace (SPEC section 2).

    ``Q_t = {t} U {i < t : a[t, i] >= theta}``.  The arrival of token ``t`` is free (cost 0: it is computed anyway);
    re-requesting an earlier token ``i`` costs ``weights[i]`` (default :func:`recompute_weights`).  ``theta`` must
    be in ``(0, 1]``: at ``theta = 0`` every token would be requested at every step and no budget below ``T`` fits.
    """
    if not (0.0 < theta <= 1.0):
        from .errors import ParameterError

        raise ParameterError(f"theta = {theta}: the request threshold must be in (0, 1]")
    T = trace.T
    w = recompute_weights(T) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (T,):
        raise trace_error(trace.source, f"recompute weights need one entry per token ({T}), got shape {w.shape}")
    rows = np.repeat(np.arange(T), np.diff(trace.indptr))
    keep = (trace.weights >= theta) & (trace.indices < rows)
    # one arrival per step, placed first, then the above-threshold earlier tokens in increasing id order
    req_rows = np.concatenate([np.arange(T), rows[keep]])
    req_items = np.concatenate([np.arange(T), trace.indices[keep]])
    req_costs = np.concatenate([np.zeros(T), w[trace.indices[keep]]])
    order = np.lexsort((np.concatenate([np.zeros(T), np.ones(int(keep.sum()))]), req_rows))
    counts = np.bincount(req_rows, minlength=T)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return PagingTrace(req_items[order], req_costs[order], offsets, f"{trace.source} (RM, theta={theta:g})")
