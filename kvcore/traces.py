"""Trace types, validation, and file formats (SPEC section 1).

Two kinds of trace, both stored as flat arrays so that long traces fit in memory:

``PagingTrace`` (recompute / paging model)
    Steps ``t = 0..T-1`` (the paper counts from 1; we count from 0 everywhere in code).  Step ``t`` requests the items
    ``items[offsets[t]:offsets[t+1]]`` (distinct, at least one) with fault costs ``costs[...]`` (finite, >= 0).
    A plain 1-D integer array is the unit-cost, one-request-per-step trace.

``AttentionTrace`` (both models)
    Token ``t`` arrives at step ``t``.  Row ``t`` is a probability distribution over tokens ``0..t`` stored sparse in
    CSR form: ``indices[indptr[t]:indptr[t+1]]`` (strictly increasing, each ``<= t``) with ``weights[...]`` (finite,
    >= 0).  ``residual[t]`` is mass the row places on tokens that were not stored (a captured trace keeps only its
    top entries); stored weights plus residual sum to 1 within ``ROW_SUM_TOL``.  Residual mass is unattributed: a
    policy's true regret lies in ``[regret, regret + sum(residual)]``, and the same holds for the optimum.

File formats (``load_trace`` / ``save_trace``):

* ``*.npy`` holding a 1-D integer array, or ``*.txt`` with one non-negative integer id per line (blank lines and
  lines starting with ``#`` are skipped): a unit-cost paging trace.
* ``*.npz`` with ``kind = "paging"``: arrays ``items`` (int), ``costs`` (float, optional: default all 1) and
  ``offsets`` (int, optional: default one request per step).
* ``*.npz`` with ``kind = "attention"``: arrays ``indptr``, ``indices`` (int), ``weights`` (float) and optionally
  ``residual`` (float, one per row).

Every problem is reported as one line ``"<source>: step <t>: <problem>"`` through :class:`TraceError`.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .errors import TraceError

ROW_SUM_TOL = 1e-6


def _fail(source: str, problem: str, step: int | None = None) -> TraceError:
    where = source if step is None else f"{source}: step {step}"
    return TraceError(f"{where}: {problem}")


def _as_int_array(values, source: str, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise _fail(source, f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iu":
        raise _fail(source, f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise _fail(source, f"{name} has an id too large for int64")
    return arr.astype(np.int64, copy=False)


def _as_float_array(values, source: str, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise _fail(source, f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "fiu":
        raise _fail(source, f"{name} must hold numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


# --------------------------------------------------------------------------------------------------------------------
# Paging traces
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PagingTrace:
    """A request sequence for the recompute/paging model (SPEC section 2, RM)."""

    items: np.ndarray
    costs: np.ndarray
    offsets: np.ndarray
    source: str = field(default="<trace>", compare=False)

    def __post_init__(self):
        src = self.source
        items = _as_int_array(self.items, src, "items")
        costs = _as_float_array(self.costs, src, "costs")
        offsets = _as_int_array(self.offsets, src, "offsets")
        object.__setattr__(self, "items", items)
        object.__setattr__(self, "costs", costs)
        object.__setattr__(self, "offsets", offsets)
        if costs.shape != items.shape:
            raise _fail(src, f"costs has {costs.size} entries but items has {items.size}")
        if offsets.size < 1 or offsets[0] != 0 or offsets[-1] != items.size:
            raise _fail(src, f"offsets must start at 0 and end at len(items) = {items.size}")
        steps = np.diff(offsets)
        if steps.size and (steps <= 0).any():
            raise _fail(src, "a step requests no item (offsets not strictly increasing)", _first_bad(steps <= 0))
        step_of = np.repeat(np.arange(steps.size), steps)
        if items.size and (items < 0).any():
            i = _first_bad(items < 0)
            raise _fail(src, f"negative item id {int(items[i])}", int(step_of[i]))
        if costs.size and not np.isfinite(costs).all():
            i = _first_bad(~np.isfinite(costs))
            raise _fail(src, f"fault cost is {costs[i]} (must be finite)", int(step_of[i]))
        if costs.size and (costs < 0).any():
            i = _first_bad(costs < 0)
            raise _fail(src, f"negative fault cost {costs[i]}", int(step_of[i]))
        multi = steps > 1
        if multi.any():
            for t in np.flatnonzero(multi):
                q = items[offsets[t] : offsets[t + 1]]
                if np.unique(q).size != q.size:
                    raise _fail(src, "an item is requested twice in the same step", int(t))
        for arr in (items, costs, offsets):
            arr.setflags(write=False)

    # -- construction -------------------------------------------------------------------------------------------------
    @classmethod
    def unit(cls, seq: Iterable[int], source: str = "<trace>") -> "PagingTrace":
        """Unit-cost, one request per step."""
        # np.asarray, not np.fromiter(dtype=int64): fromiter would silently truncate a float id such as 1.5
        items = _as_int_array(seq if isinstance(seq, np.ndarray) else np.asarray(list(seq)), source, "items")
        return cls(items, np.ones(items.size), np.arange(items.size + 1, dtype=np.int64), source)

    @classmethod
    def from_steps(cls, steps: Sequence[Sequence[int]], costs: Sequence[Sequence[float]] | None = None,
                   source: str = "<trace>") -> "PagingTrace":
        """Several requests per step; ``costs`` parallels ``steps`` (default all 1)."""
        lengths = [len(q) for q in steps]
        items = np.asarray([i for q in steps for i in q])  # validated (not truncated) in __post_init__
        if costs is None:
            c = np.ones(items.size)
        else:
            if [len(x) for x in costs] != lengths:
                raise _fail(source, "costs must have one entry per requested item")
            c = np.fromiter((x for q in costs for x in q), dtype=np.float64, count=items.size)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(items, c, offsets, source)

    # -- views --------------------------------------------------------------------------------------------------------
    @property
    def T(self) -> int:
        return self.offsets.size - 1

    @property
    def n_requests(self) -> int:
        return int(self.items.size)

    @property
    def is_unit_single(self) -> bool:
        """True when every step requests exactly one item at cost 1 (Belady applies)."""
        return self.items.size == self.T and bool((self.costs == 1.0).all())

    def step(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.offsets[t], self.offsets[t + 1]
        return self.items[a:b], self.costs[a:b]

    def steps(self):
        """Yield ``(t, items, costs)`` for every step."""
        items, costs, off = self.items, self.costs, self.offsets
        for t in range(self.T):
            a, b = off[t], off[t + 1]
            yield t, items[a:b], costs[a:b]

    def prefix(self, T: int) -> "PagingTrace":
        """The first ``T`` steps."""
        end = self.offsets[T]
        return PagingTrace(self.items[:end], self.costs[:end], self.offsets[: T + 1], self.source)

    def distinct_items(self) -> np.ndarray:
        return np.unique(self.items)

    def __len__(self) -> int:
        return self.T

    def __repr__(self) -> str:
        return f"PagingTrace(T={self.T}, requests={self.n_requests}, distinct={self.distinct_items().size})"


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
            raise _fail(src, f"indptr must start at 0 and end at len(indices) = {indices.size} (truncated file?)")
        if weights.shape != indices.shape:
            raise _fail(src, f"weights has {weights.size} entries but indices has {indices.size}")
        if residual.size != T:
            raise _fail(src, f"residual has {residual.size} entries but the trace has {T} rows")
        lengths = np.diff(indptr)
        if (lengths < 0).any():
            raise _fail(src, "indptr decreases", _first_bad(lengths < 0))
        row = np.repeat(np.arange(T), lengths)
        if indices.size:
            if (indices < 0).any():
                i = _first_bad(indices < 0)
                raise _fail(src, f"negative token id {int(indices[i])}", int(row[i]))
            if (indices > row).any():
                i = _first_bad(indices > row)
                raise _fail(src, f"references future token {int(indices[i])}", int(row[i]))
            same_row = row[1:] == row[:-1]
            bad = same_row & (indices[1:] <= indices[:-1])
            if bad.any():
                i = _first_bad(bad) + 1
                raise _fail(src, "token ids in a row must be strictly increasing (duplicate or unsorted)",
                            int(row[i]))
            if not np.isfinite(weights).all():
                i = _first_bad(~np.isfinite(weights))
                raise _fail(src, f"weight is {weights[i]} for token {int(indices[i])}", int(row[i]))
            if (weights < 0).any():
                i = _first_bad(weights < 0)
                raise _fail(src, f"negative weight {weights[i]} for token {int(indices[i])}", int(row[i]))
        if T and not np.isfinite(residual).all():
            t = _first_bad(~np.isfinite(residual))
            raise _fail(src, f"residual mass is {residual[t]}", t)
        if T and (residual < 0).any():
            t = _first_bad(residual < 0)
            raise _fail(src, f"negative residual mass {residual[t]}", t)
        # bincount, not add.reduceat: reduceat fails on a trailing empty row (all mass in the residual)
        sums = np.bincount(row, weights=weights, minlength=T) + residual
        off = np.abs(sums - 1.0) > ROW_SUM_TOL
        if off.any():
            t = _first_bad(off)
            raise _fail(src, f"row sums to {sums[t]:.9g}, not 1 (tolerance {ROW_SUM_TOL:g})", t)
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
            raise _fail(source, f"dense attention must be square, got shape {a.shape}")
        if np.triu(a, 1).any():
            r, c = np.argwhere(np.triu(a, 1))[0]
            raise _fail(source, f"references future token {int(c)}", int(r))
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
        raise _fail(trace.source, f"recompute weights need one entry per token ({T}), got shape {w.shape}")
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


# --------------------------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------------------------


def load_trace(path: str | os.PathLike) -> PagingTrace | AttentionTrace:
    """Load a trace file (format chosen by its extension, see module docstring); raise TraceError on any problem."""
    p = Path(path)
    src = str(p)
    if not p.exists():
        raise TraceError(f"{src}: no such file")
    if p.is_dir():
        raise TraceError(f"{src}: is a directory, not a trace file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
            if arr.ndim != 1:
                raise _fail(src, f"a .npy paging trace must be 1-D, got shape {arr.shape}")
            if arr.dtype.kind not in "iu":
                raise _fail(src, f"a .npy paging trace must hold integers, got dtype {arr.dtype}")
            return PagingTrace.unit(arr, src)
        if suffix == ".txt":
            return PagingTrace.unit(_read_text_ids(p), src)
        if suffix == ".npz":
            return _load_npz(p)
    except TraceError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:  # corrupt/truncated
        raise TraceError(f"{src}: cannot read: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    raise TraceError(f"{src}: unknown trace format {suffix!r} (use .npy, .txt or .npz)")


def _read_text_ids(p: Path) -> np.ndarray:
    ids = []
    with open(p, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            try:
                v = int(s)
            except ValueError:
                raise TraceError(f"{p}: step {len(ids)}: line {lineno}: {s[:40]!r} is not an integer id") from None
            if v < 0:
                raise TraceError(f"{p}: step {len(ids)}: line {lineno}: negative item id {v}")
            ids.append(v)
    return np.asarray(ids, dtype=np.int64)


def _load_npz(p: Path) -> PagingTrace | AttentionTrace:
    src = str(p)
    with np.load(p, allow_pickle=False) as z:
        keys = set(z.files)
        kind = str(z["kind"]) if "kind" in keys else ("attention" if "indptr" in keys else "paging")
        if kind == "paging":
            if "items" not in keys:
                raise _fail(src, "paging .npz needs an 'items' array")
            items = z["items"]
            costs = z["costs"] if "costs" in keys else np.ones(np.asarray(items).size)
            offsets = z["offsets"] if "offsets" in keys else np.arange(np.asarray(items).size + 1)
            return PagingTrace(items, costs, offsets, src)
        if kind == "attention":
            missing = {"indptr", "indices", "weights"} - keys
            if missing:
                raise _fail(src, f"attention .npz lacks array(s) {sorted(missing)}")
            return AttentionTrace(z["indptr"], z["indices"], z["weights"],
                                  z["residual"] if "residual" in keys else None, src)
        raise _fail(src, f"unknown kind {kind!r} (expected 'paging' or 'attention')")


def save_trace(trace: PagingTrace | AttentionTrace, path: str | os.PathLike) -> Path:
    """Write a trace atomically (a temporary file renamed into place: no partial file is ever left behind).

    Unit-cost single-request paging traces may go to ``.npy`` or ``.txt``; everything goes to ``.npz``.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".txt", ".npz"):
        raise TraceError(f"{p}: unknown trace format {suffix!r} (use .npy, .txt or .npz)")
    if suffix in (".npy", ".txt") and not (isinstance(trace, PagingTrace) and trace.is_unit_single):
        raise TraceError(f"{p}: only unit-cost one-request-per-step paging traces fit {suffix}; use .npz")
    if not p.parent.exists():
        raise TraceError(f"{p}: directory {p.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            if suffix == ".npy":
                np.save(fh, np.asarray(trace.items))
            elif suffix == ".txt":
                fh.write(("\n".join(map(str, trace.items.tolist())) + "\n").encode())
            elif isinstance(trace, PagingTrace):
                np.savez_compressed(fh, kind="paging", items=trace.items, costs=trace.costs, offsets=trace.offsets)
            else:
                np.savez_compressed(fh, kind="attention", indptr=trace.indptr, indices=trace.indices,
                                    weights=trace.weights, residual=trace.residual)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p
