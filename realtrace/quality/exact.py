"""The reference a quality run compares against, on complete rows (issue 27; needs the ``[real]`` extra).

Complete rows.  The full-cache pass keeps every layer's queries and keys (:func:`realtrace.quality.replay.replay`
with ``keep_qkv=True``), so the attention of every query over *every* earlier key is at hand: for KV head ``g``,
``a[t, i] = mean_h softmax_{j <= t}(q_h[t] . k[j] * scale)_i`` over the query heads ``h`` sharing ``g`` (float32
softmax as the model computes it, then the mean renormalised in float64 -- :func:`realtrace.capture.sparsify_block`,
the capture's reduction).  :func:`rows_trace` turns that into a toolkit trace with complete rows (``top=None``,
residual 0) or the ``top`` largest entries per row plus the exact residual.

Charging.  :func:`charge` is a schedule's NM regret (paper Eq. 4) on complete rows: nothing is unattributed.

The exact optimum, lazy.  :func:`lazy_optimum` solves the NM optimum (:func:`kvcore.optima.nm_opt`, min-cost flow)
on the rows it is given and then makes its schedule lazy (:func:`realtrace.quality.schedule.lazy_drop`): no position
leaves before the cache is full, and once full exactly one per step.  The lazy schedule keeps a superset of the
solved schedule's resident set at every step, so on any rows its cost is at most the solved one's.  On complete rows
the solved cost is the optimum, so the lazy schedule is an exact optimum too.  On ``top``-``m`` rows the solved cost
is a lower bound of the optimum on complete rows (every schedule's truncated cost is at most its complete cost), and
the lazy schedule's complete cost an upper bound: the two are reported (``opt_lower``, ``opt_cost``) and their
difference bounds how far the schedule can be from optimal.
"""

from __future__ import annotations

import numpy as np

from kvcore.traces import AttentionTrace

from .schedule import drop_from_evictions, lazy_drop


def head_rows(torch, query, key, g: int, scaling: float):
    """``(T, T)`` float64 tensor: the head-mean causal attention of KV head ``g`` (module docstring), each row
    renormalised to sum 1.  ``query`` ``(1, heads, T, d)`` and ``key`` ``(1, kv heads, T, d)`` are the full-cache
    pass's."""
    heads, kv = query.shape[1], key.shape[1]
    rep = heads // kv
    T = key.shape[2]
    with torch.no_grad():
        s = torch.matmul(query[0, g * rep:(g + 1) * rep], key[0, g].transpose(0, 1)) * scaling
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        rows = torch.softmax(s, dim=-1).mean(dim=0).to(torch.float64)
        return rows / rows.sum(dim=1, keepdim=True)


def rows_trace(rows, top: int | None, source: str) -> AttentionTrace:
    """``rows`` (:func:`head_rows`) as a toolkit trace: complete (``top=None``, residual 0) or the ``top`` largest
    entries per row with the exact residual (:func:`realtrace.capture.sparsify_rows`)."""
    from ..capture import sparsify_rows

    trace = sparsify_rows(rows, rows.shape[0] if top is None else top, source)
    if top is not None:
        return trace
    # every entry is stored, so no mass is unattributed; ``1 - sum`` of a renormalised float64 row (~1e-16) is rounding
    return AttentionTrace(trace.indptr, trace.indices, trace.weights, np.zeros(trace.T), source)


def charge(rows, drop: np.ndarray) -> np.ndarray:
    """Per-step NM regret (Eq. 4) of the drop vector ``drop`` on complete ``rows``: ``sum_{i <= t, drop[i] <= t}
    a[t, i]`` for every step ``t`` (nothing unattributed); with per-entry costs for ``rows``, their lost sum."""
    from .value_cost import lost

    a = np.asarray(rows)  # a torch tensor (head_rows) or any array, e.g. value-weighted costs
    return np.where(lost(drop, a.shape[0]), a, 0.0).sum(axis=1)


def lazy_optimum(rows, capacity: int, top: int | None = None, source: str = "quality") -> tuple[np.ndarray, float, float]:
    """``(drop, lower, cost)``: the lazy exact optimum (module docstring) solved on ``rows`` complete (``top=None``)
    or cut to ``top`` entries per row; ``lower`` is the optimum's cost on the rows it was solved on (a lower bound of
    the optimum on complete rows, equal to it for ``top=None``), ``cost`` the lazy schedule's cost on complete rows."""
    from kvcore.optima import nm_opt

    trace = rows_trace(rows, top, source)
    res = nm_opt(trace, capacity, record=True)
    drop = lazy_drop(drop_from_evictions(res.evictions, trace.T), capacity)
    return drop, float(res.cost), float(charge(rows, drop).sum())


__all__ = ["charge", "head_rows", "lazy_optimum", "rows_trace"]
