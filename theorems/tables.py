"""Result tables: the rows the proof-checking suite asserts on and ``paper_check`` renders (SPEC section 4).

A :class:`Row` is one policy on one workload: ALG's cost, the optimum's cost with cache ``h`` (resource augmentation,
Eq. 8), the ratio, the NM tracking gap, the bound the result predicts and whether it held.  A :class:`Table` collects
the rows of one result.  :func:`evaluate` measures one policy through :func:`kvcore.measure.measure` (the single
measurement path) and returns its row; :func:`cached` memoizes a table function by the function and its sizes, so
that figures and claims share one computation per run.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from kvcore.measure import measure
from kvcore.traces import AttentionTrace, PagingTrace


def to_jsonable(x: Any) -> Any:
    """Numbers, strings, lists and dicts as JSON: floats rounded to 10 significant digits (stable reports), infinities
    and NaN as strings (JSON has neither), numpy scalars and arrays as Python values, paths as strings."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if math.isnan(x):
            return "nan"
        return float(f"{x:.10g}")
    if isinstance(x, Path):
        return str(x)
    return x


@dataclass
class Row:
    """One policy on one workload."""

    result: str
    policy: str
    model: str
    workload: str
    k: int
    h: int
    alg_cost: float
    opt_cost: float
    ratio: float
    bound: float | None = None
    holds: bool | None = None
    seeds: int = 1
    ci_low: float | None = None
    ci_high: float | None = None
    tracking_gap: float | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return to_jsonable(asdict(self))

    @classmethod
    def of(cls, result: str, m, workload: str, bound: float | None = None, holds: bool | None = None,
           params: dict | None = None) -> "Row":
        """The row of a :class:`kvcore.measure.Measurement`."""
        mean, lo, hi = m.ci
        many = len(m.costs) > 1
        return cls(result, m.policy, m.model, workload, m.k, m.h, mean, m.opt_cost, m.ratio, bound, holds,
                   len(m.costs), lo if many else None, hi if many else None, m.tracking_gap, dict(params or {}))


@dataclass
class Table:
    """Rows of one result; ``holds`` is True when every row with a bound holds."""

    result: str
    statement: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    @property
    def holds(self) -> bool:
        return all(r.holds is not False for r in self.rows)

    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.holds is False]

    def explain(self) -> str:
        """Assertion message: the rows that broke the bound (the test modules print it on failure)."""
        rows = self.failures()
        lines = [f"{self.result}: {len(rows)} of {len(self.rows)} rows break '{self.statement}'"]
        for r in rows[:10]:
            lines.append(f"  {r.policy} on {r.workload}: k={r.k} h={r.h} ALG={r.alg_cost:.6g} OPT={r.opt_cost:.6g} "
                         f"ratio={r.ratio:.6g} bound={r.bound} {r.params}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"result": self.result, "statement": self.statement, "holds": self.holds,
                "rows": [r.as_dict() for r in self.rows], "notes": list(self.notes)}


def evaluate(result: str, policy: Any, trace: PagingTrace | AttentionTrace, k: int, *, model: str = "rm",
             h: int | None = None, workload: str = "", seeds: Iterable[int] = (0,), bound: float | None = None,
             bound_on: str = "ratio", theta: float = 0.1, opt_cost: float | None = None,
             params: dict | None = None, confidence: float = 0.95) -> Row:
    """Measure ``policy`` (an instance, class or zero-argument factory) with cache ``k`` against OPT with cache ``h``
    and return its row.  ``bound_on`` says what ``bound`` limits: ``"ratio"``, ``"cost"`` (e.g. a regret bound) or
    ``"gap"`` (the NM tracking gap); ``holds`` is :meth:`kvcore.measure.Measurement.within` (randomized policies
    are judged at the lower end of the seed mean's confidence interval)."""
    m = measure(policy, trace, k, h, model=model, seeds=seeds, theta=theta, opt=opt_cost, confidence=confidence)
    return Row.of(result, m, workload, bound, None if bound is None else m.within(bound, bound_on), params)


_TABLES: dict[tuple, Any] = {}  # (fn, sorted sizes) -> fn(**sizes), this process's
_SHARED: Path | None = None  # the directory the processes of one parallel run share tables through
_MAY_DEFER = False  # set by :func:`deferring`: a busy table raises TableBusy instead of being waited for
_LOCKS_HELD = 0  # tables this process is making now (nested: a table made from another)


class TableBusy(Exception):
    """Another process is making a table this one asked for, and the caller (:func:`deferring`) would rather do
    other work than wait: ``paper_check.runner`` puts the item back in its queue, and a core is not left idle."""


def cached(fn: Callable[..., Any], **sizes: Any) -> Any:
    """``fn(**sizes)``, computed once per run: paper_check's figures and claims share one computation.  Sizes must
    be hashable (tuples, not lists).  Inside :func:`shared_between_processes` the run's processes share them too.
    A table made while another model's input sets are read (:func:`realtrace.reading_model`) is that model's: the
    model is part of its key."""
    from realtrace import DATA_MODEL, current_model

    model = () if current_model() == DATA_MODEL else (("reading model", current_model()),)
    key = (fn, tuple(sorted(sizes.items())) + model)
    if key not in _TABLES:
        _TABLES[key] = fn(**sizes) if _SHARED is None else _shared(fn, key[1], sizes)
    return _TABLES[key]


def _shared(fn: Callable[..., Any], items: tuple, sizes: dict) -> Any:
    """The table from the shared directory, made here first if no process has made it: under an exclusive lock per
    table, so a second process that needs it waits for the first instead of computing it again.  A process waits
    while holding locks only for a table that the one it is making needs, so the waits follow the tables'
    dependencies, which have no cycle (a cycle would recurse forever in a serial run too): no deadlock.  Inside
    :func:`deferring`, a process that holds no lock raises :class:`TableBusy` instead of waiting (one that holds
    one waits, so the table it is making is not abandoned half made)."""
    import fcntl  # Unix; a parallel run forks, so it is Unix too

    global _LOCKS_HELD
    name = hashlib.sha256(f"{fn.__module__}.{fn.__qualname__}{items!r}".encode()).hexdigest()
    stored = _SHARED / f"{name}.pickle"
    with open(_SHARED / f"{name}.lock", "a") as lock:  # the lock is released when the file is closed
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if _MAY_DEFER and not _LOCKS_HELD:
                raise TableBusy(f"{fn.__qualname__}{items!r}") from None
            fcntl.flock(lock, fcntl.LOCK_EX)
        if stored.exists():
            return pickle.loads(stored.read_bytes())
        _LOCKS_HELD += 1
        try:
            value = fn(**sizes)
        finally:
            _LOCKS_HELD -= 1
        stored.write_bytes(pickle.dumps(value))  # whole before the lock is released: readers take the lock first
        return value


@contextmanager
def deferring(allowed: bool = True):
    """While open (and ``allowed``), asking for a table another process is making raises :class:`TableBusy`."""
    global _MAY_DEFER
    before, _MAY_DEFER = _MAY_DEFER, allowed
    try:
        yield
    finally:
        _MAY_DEFER = before


@contextmanager
def shared_between_processes(directory: Path):
    """While open, tables are shared through ``directory`` with every process forked inside the block
    (``paper_check.runner``): each table is made by one of them.  ``fn`` must be a module-level function."""
    global _SHARED
    _SHARED = Path(directory)
    try:
        yield
    finally:
        _SHARED = None
