"""The verifier: run policies through workloads under a cost model against the exact optimum (SPEC section 4).

``evaluate`` runs one policy (several seeds when it is randomized) on one trace and returns a :class:`Row` with the
policy's cost, the optimum's cost with cache ``h`` (resource augmentation, Eq. 8), the ratio, the regret and tracking
gap (NM), the bound the result predicts and whether it held.  A :class:`Table` collects rows and writes JSON; the
theorem modules assert on tables and ``paper_check`` renders the same tables, so nothing is computed twice.

Measures (SPEC section 4):
    ratio = cost(ALG) / cost(OPT); ``inf`` when OPT = 0 < ALG, 1 when both are 0.
    NM: cost is the attention-mass regret (paper Eq. 4); tracking gap = regret(ALG) - regret(OPT).
    Randomized policies: the mean over seeds with a Student-t 95% confidence interval; a bound on an expectation
    holds when the interval's lower end is at most the bound (the mean may exceed it by noise only).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from scipy import stats

from kvcore.engine import run
from kvcore.optima import optimum
from kvcore.traces import AttentionTrace, PagingTrace

# Floating-point slack for comparing a computed cost with a bound: costs are sums of up to ~1e6 terms.
REL_TOL = 1e-9


def ratio(alg: float, opt: float) -> float:
    if opt > 0:
        return alg / opt
    return math.inf if alg > 0 else 1.0


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval; a single value gives a zero-width interval."""
    v = np.asarray(values, dtype=float)
    m = float(v.mean())
    if v.size < 2 or float(v.std(ddof=1)) == 0.0:
        return m, m, m
    half = float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return m, m - half, m + half


def within(value: float, bound: float) -> bool:
    """``value <= bound`` up to floating-point slack."""
    return value <= bound + REL_TOL * max(1.0, abs(bound))


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

    def as_dict(self) -> dict:
        return {"result": self.result, "statement": self.statement, "holds": self.holds,
                "rows": [r.as_dict() for r in self.rows], "notes": list(self.notes)}

    def write_json(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n")
        return p


PolicyFactory = Callable[[], Any]


def _instantiate(policy: Any | PolicyFactory):
    return policy() if callable(policy) and not hasattr(policy, "reset") else policy


def evaluate(result: str, policy: Any | PolicyFactory, trace: PagingTrace | AttentionTrace, k: int, *,
             model: str = "rm", h: int | None = None, workload: str = "", seeds: Iterable[int] = (0,),
             bound: float | None = None, bound_on: str = "ratio", theta: float = 0.1,
             opt_cost: float | None = None, params: dict | None = None) -> Row:
    """Run ``policy`` (an instance, or a zero-argument factory) with cache ``k`` against OPT with cache ``h``.

    ``bound_on`` says what ``bound`` limits: ``"ratio"`` (ALG/OPT), ``"cost"`` (ALG's cost itself, e.g. a regret
    bound) or ``"gap"`` (the NM tracking gap).  Deterministic policies run once whatever ``seeds`` says.
    ``opt_cost`` may be passed when the caller already solved the optimum for this trace and ``h``.
    """
    h = k if h is None else h
    first = _instantiate(policy)
    seeds = list(seeds)
    if getattr(first, "deterministic", True):
        seeds = seeds[:1]
    costs = []
    for i, s in enumerate(seeds):
        pol = first if i == 0 else _instantiate(policy)
        costs.append(run(pol, trace, k, model, seed=s, theta=theta).cost)
    if opt_cost is None:
        opt_cost = optimum(trace, h, model, theta=theta).cost
    mean, lo, hi = mean_ci(costs)
    r = ratio(mean, opt_cost)
    holds = None
    if bound is not None:
        measured = {"ratio": lambda c: ratio(c, opt_cost), "cost": lambda c: c,
                    "gap": lambda c: c - opt_cost}[bound_on]
        # an expectation bound is refuted only when the whole confidence interval lies above it
        holds = within(measured(lo), bound)
    name = getattr(first, "name", type(first).__name__)
    return Row(result, str(name), model, workload, k, h, mean, opt_cost, r, bound, holds, len(costs),
               lo if len(costs) > 1 else None, hi if len(costs) > 1 else None,
               (mean - opt_cost) if model == "nm" else None, dict(params or {}))
