"""A press's eviction schedule on a captured trace, against the exact NM optimum at the same budget (pure numpy and
the toolkit; no torch).

What is charged.  Row ``t`` of a trace is the attention of query ``t`` with nothing evicted; a schedule loses, at
step ``t``, the weights ``a[t, i]`` of positions it dropped at or before ``t`` (NM regret, Eq. 4).  By default the
trace holds the complete rows of the full cache (:mod:`realtrace.press.rows`: every entry, residual 0), so every
charge is exact and ``unattributed`` is 0.  On a trace set's stored rows (``--rows stored``) only what the trace
stores is charged: each row's ``residual`` (the entries below its top-``k`` cut) is attributed to no position, so a
true regret lies in ``[regret, regret + unattributed]``, and the optimum solved there is the optimum of the
truncation.  Every value below is computed on the same trace, whichever it is.
Rows before the press's first decoding step ``start`` (the prefill) are not charged to anyone: they are computed in
the prefill forward with the whole prompt in the cache, before any press acts.

The budget.  A prefill press keeps ``n_kept`` prompt positions and then every decoded token, and a decoding press
lets its cache grow between compressions, so the cache size changes over the charged steps.  ``budget`` is its
largest value there, ``K = max_{t >= start} |R_t|``; the press's schedule is feasible for an NM cache of ``K``
slots on the charged rows (a position it drops at ``start`` can as well be dropped on arrival: the prefill rows
cost nothing), so the exact optimum at ``K`` (:func:`kvcore.optima.nm_opt` on the trace with the prefill rows
emptied) is a lower bound on the press's regret, never above it.

The comparisons (all on the same charged rows):
  * ``opt``: the exact NM optimum at ``K`` (any schedule, evictions allowed at every step);
  * ``one_shot`` (prefill presses): the best choice of ``n_kept`` prompt positions at the prefill boundary, then
    nothing dropped -- the problem a prefill press solves; dropping position ``i`` costs its column mass
    ``c_i = sum_{t >= start} a[t, i]``, so the optimum drops the ``P - n_kept`` smallest ``c_i`` (an exchange
    argument);  ``opt <= one_shot <= press``;
  * ``toolkit``: the registered policy of the same rule run online in NM at ``K`` slots over the whole trace (it
    observes the prefill rows as they arrive and must stay within ``K`` from the first step).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace

from ..geometry import layer_groups
from .schedule import HeadSchedule

def layer_group(layer: int, layers: int) -> str:
    """The group of ``layer`` among a model's ``layers`` (:func:`realtrace.geometry.layer_groups`: thirds)."""
    for name, rng in layer_groups(layers):
        if layer in rng:
            return name
    raise ParameterError(f"layer {layer}: not in 0..{layers - 1}")


def _rows(trace: AttentionTrace) -> np.ndarray:
    return np.repeat(np.arange(trace.T), np.diff(trace.indptr))


def charged_trace(trace: AttentionTrace, start: int) -> AttentionTrace:
    """``trace`` with rows ``0 .. start-1`` emptied (no stored entry, residual 1): nothing there is charged."""
    if not 0 <= start <= trace.T:
        raise ParameterError(f"start = {start}: must be in 0..{trace.T}")
    cut = int(trace.indptr[start])
    indptr = np.concatenate([np.zeros(start + 1, dtype=np.int64), trace.indptr[start + 1:] - cut])
    residual = np.concatenate([np.ones(start), trace.residual[start:]])
    return AttentionTrace(indptr, trace.indices[cut:], trace.weights[cut:], residual,
                          f"{trace.source} (rows >= {start})")


def schedule_regret(trace: AttentionTrace, drop: np.ndarray, start: int = 0) -> float:
    """Stored mass lost on rows ``t >= start`` when position ``i`` is absent from step ``drop[i]`` on."""
    rows = _rows(trace)
    lost = (rows >= start) & (rows >= drop[trace.indices])
    return float(trace.weights[lost].sum())


def best_one_shot(trace: AttentionTrace, start: int, n_kept: int) -> float:
    """Least stored mass lost on rows ``>= start`` by keeping ``n_kept`` of the positions ``0 .. start-1`` and
    everything after (module docstring)."""
    if not 0 <= n_kept <= start:
        raise ParameterError(f"n_kept = {n_kept}: must be in 0..{start}")
    rows = _rows(trace)
    sel = (rows >= start) & (trace.indices < start)
    col = np.bincount(trace.indices[sel], weights=trace.weights[sel], minlength=start)
    return float(np.sort(col)[: start - n_kept].sum())


@dataclass
class TraceEval:
    """One trace (layer, KV head) under one press run."""

    trace: str
    layer: int
    head: str
    start: int
    T: int
    budget: int
    n_kept: int | None
    press: float
    opt: float
    opt_gap_bound: float
    one_shot: float | None
    toolkit: float | None
    toolkit_policy: str | None
    charged_mass: float
    unattributed: float
    group: str

    @property
    def gap(self) -> float:
        """press - opt (>= 0 up to the optimum's certified gap bound)."""
        return self.press - self.opt

    def as_dict(self) -> dict:
        return {**asdict(self), "gap": self.gap}


class OptCache:
    """Memo of exact optima keyed by (trace source, start, budget): a leaderboard asks for the same one often.  The
    source names the rows (a complete-row trace's differs from the stored one's), so a memo never mixes the two."""

    def __init__(self):
        self.memo: dict[tuple[str, int, int], tuple[float, float]] = {}

    def opt(self, trace: AttentionTrace, start: int, budget: int) -> tuple[float, float]:
        key = (trace.source, start, budget)
        if key not in self.memo:
            from kvcore.optima import nm_opt

            res = nm_opt(charged_trace(trace, start), budget)
            self.memo[key] = (float(res.cost), float(res.gap_bound or 0.0))
        return self.memo[key]


def toolkit_regret(trace: AttentionTrace, policy: str, params: dict, budget: int, start: int) -> float:
    """The registered policy online in NM at ``budget`` slots, charged on rows ``>= start``."""
    from kvcore.engine import run_nm
    from policies import make

    res = run_nm(make(policy, **params), trace, budget, record=True)
    return float(np.asarray(res.per_step)[start:].sum())


def evaluate(name: str, layer: int, head: str, trace: AttentionTrace, sched: HeadSchedule, start: int,
             one_shot: bool, toolkit: tuple[str, dict] | None, opts: OptCache, layers: int) -> TraceEval:
    """Everything in the module docstring for one trace (``layers``: the model's, for the layer group)."""
    if sched.drop.size != trace.T:
        raise ParameterError(f"{name}: the press run covers {sched.drop.size} positions, the trace {trace.T}")
    if start >= trace.T:
        raise ParameterError(f"{name}: no row after the prefill (start = {start}, T = {trace.T}): nothing to charge")
    counts = sched.resident_counts()
    budget = int(counts[start:].max())
    press = schedule_regret(trace, sched.drop, start)
    opt, gap_bound = opts.opt(trace, start, budget)
    n_kept = int(np.count_nonzero(sched.drop[:start] > start)) if one_shot else None
    rows = _rows(trace)
    return TraceEval(
        name, layer, head, start, trace.T, budget, n_kept, press, opt, gap_bound,
        best_one_shot(trace, start, n_kept) if one_shot else None,
        toolkit_regret(trace, toolkit[0], toolkit[1], budget, start) if toolkit else None,
        toolkit[0] if toolkit else None,
        float(trace.weights[rows >= start].sum()), float(trace.residual[start:].sum()), layer_group(layer, layers))
