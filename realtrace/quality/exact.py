"""The reference a quality run compares against, on complete rows (issue 27; needs the ``[real]`` extra).

Complete rows.  The full-cache pass keeps every layer's queries and keys (:func:`realtrace.quality.replay.replay`
with ``keep_qkv=True``), so the attention of every query over *every* earlier key is at hand: for KV head ``g``,
``a[t, i] = mean_h softmax_{j <= t}(q_h[t] . k[j] * scale)_i`` over the query heads ``h`` sharing ``g`` (float32
softmax as the model computes it, then the mean renormalised in float64 -- :func:`realtrace.capture.sparsify_block`,
the capture's reduction).  :func:`rows_trace` turns that into a toolkit trace with complete rows (``top=None``,
residual 0) or the ``top`` largest entries per row plus the exact residual.

Charging.  :func:`charge` is a schedule's NM regret (paper Eq. 4) on complete rows: nothing is unattributed.
:func:`charge_many` charges many schedules on the same rows at once, as each row's total minus what the schedule
keeps: a resident set holds at most ``K`` positions, so that is ``O(T K)`` per schedule instead of the ``O(T^2)`` of
summing the lost entries (a sweep charges every configuration and budget on each head's rows, computed once);
:func:`charge` is its plain reference (a property test compares them).

The exact optimum, lazy.  :func:`lazy_optimum` solves the NM optimum (:func:`kvcore.optima.nm_opt`, min-cost flow)
on the rows it is given and then makes its schedule lazy (:func:`realtrace.quality.schedule.lazy_drop`): no position
leaves before the cache is full, and once full exactly one per step.  The lazy schedule keeps a superset of the
solved schedule's resident set at every step, so on any rows its cost is at most the solved one's.  On complete rows
the solved cost is the optimum, so the lazy schedule is an exact optimum too.  On ``top``-``m`` rows the solved cost
is a lower bound of the optimum on complete rows (every schedule's truncated cost is at most its complete cost), and
the lazy schedule's complete cost an upper bound: the two are reported (``opt_lower``, ``opt_cost``) and their
difference bounds how far the schedule can be from optimal.  The lower one is raised to the best Lagrangian bound on
the complete rows from the truncated solve's slot prices, climbed (:func:`kvcore.optima.lagrangian.maximise_dual`):
within 13 % of the true gap on the short default prompts at ``top`` = 32, where the truncated optimum alone left
up to 24 times it.
"""

from __future__ import annotations

import numpy as np

from kvcore.exact_sum import fsum_array
from kvcore.kernels import Kernel
from kvcore.traces import AttentionTrace

from .schedule import lazy_drop


def head_rows(torch, query, key, g: int, scaling: float, window: int | None = None):
    """``(T, T)`` float64 tensor: the head-mean causal attention of KV head ``g`` (module docstring), each row
    renormalised to sum 1; on a sliding-window layer (``window`` W) only keys ``i > t - W`` have weight, as in the
    model (a key outside the window gets exactly 0: no schedule is charged for it, SPEC section 8).  ``query``
    ``(1, heads, T, d)`` and ``key`` ``(1, kv heads, T, d)`` are the full-cache pass's; the rows are on their
    device.  The operations of :func:`head_rows_plain`, in place where it makes a copy (every entry the same float
    operation, so the same bits: ``tests/test_quality_coupled.py`` compares them); a run computes these rows once
    or twice per head (its optimum, its charges), and the copies were a third of the time."""
    heads, kv = query.shape[1], key.shape[1]
    rep = heads // kv
    T = key.shape[2]
    with torch.no_grad():
        s = torch.matmul(query[0, g * rep:(g + 1) * rep], key[0, g].transpose(0, 1)).mul_(scaling)
        s.masked_fill_(_future(torch, T, s.device), float("-inf"))
        if window is not None and window < T:
            s.masked_fill_(torch.ones(T, T, dtype=torch.bool, device=s.device).tril(-window), float("-inf"))
        rows = torch.softmax(s, dim=-1).mean(dim=0).to(torch.float64)
        return rows.div_(rows.sum(dim=1, keepdim=True))


def head_rows_plain(torch, query, key, g: int, scaling: float, window: int | None = None):
    """:func:`head_rows` written plainly, every step a new tensor: the reference it is tested against."""
    heads, kv = query.shape[1], key.shape[1]
    rep = heads // kv
    T = key.shape[2]
    with torch.no_grad():
        s = torch.matmul(query[0, g * rep:(g + 1) * rep], key[0, g].transpose(0, 1)) * scaling
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        if window is not None:
            t, i = torch.arange(T, device=s.device)[:, None], torch.arange(T, device=s.device)[None, :]
            s = s.masked_fill(i <= t - window, float("-inf"))
        rows = torch.softmax(s, dim=-1).mean(dim=0).to(torch.float64)
        return rows / rows.sum(dim=1, keepdim=True)


_FUTURE: dict[tuple, object] = {}


def _future(torch, T: int, device):
    """The ``(T, T)`` mask of the positions after each step on ``device``, made once per length (read-only to its
    callers)."""
    mask = _FUTURE.get((T, device))
    if mask is None:
        mask = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)
        _FUTURE.clear()  # one length at a time: a run goes prompt by prompt (each thread keeps the mask it made)
        _FUTURE[T, device] = mask
    return mask


def rows_trace(rows, top: int | None, source: str) -> AttentionTrace:
    """``rows`` (:func:`head_rows`) as a toolkit trace: complete (``top=None``, residual 0) or the ``top`` largest
    entries per row with the exact residual (:func:`realtrace.capture.sparsify_rows`).  Complete rows are taken as
    they are, every positive entry at or left of the diagonal in order, renormalised as the capture renormalises (the
    entries the capture's top-``T`` selection would keep, without sorting ``T^2`` of them)."""
    if top is not None:
        from ..capture import sparsify_rows

        return sparsify_rows(rows, top, source)
    a = complete_rows(rows)
    step, index = np.nonzero(a)  # row-major: steps ascending, positions ascending within a step
    indptr = np.concatenate([[0], np.cumsum(np.bincount(step, minlength=a.shape[0]))]).astype(np.int64)
    # every entry is stored, so no mass is unattributed; ``1 - sum`` of a renormalised float64 row (~1e-16) is rounding
    return AttentionTrace(indptr, index.astype(np.int64), a[step, index], np.zeros(a.shape[0]), source)


def complete_rows(rows) -> np.ndarray:
    """``rows`` (:func:`head_rows`, a tensor) as the dense float64 array a complete trace stores: the entries at or
    left of the diagonal, each row renormalised as the capture renormalises (what :func:`rows_trace` takes, and the
    priced optima of :mod:`kvcore.optima.priced` read)."""
    import torch

    a = torch.tril(rows.to(torch.float64))
    return (a / a.sum(dim=1, keepdim=True)).numpy()


def charge(rows, drop: np.ndarray) -> np.ndarray:
    """Per-step NM regret (Eq. 4) of the drop vector ``drop`` on complete ``rows``: ``sum_{i <= t, drop[i] <= t}
    a[t, i]`` for every step ``t`` (nothing unattributed); with per-entry costs for ``rows``, their lost sum."""
    from .value_cost import lost

    a = np.asarray(rows)  # a torch tensor (head_rows) or any array, e.g. value-weighted costs
    return np.where(lost(drop, a.shape[0]), a, 0.0).sum(axis=1)


def _resident_sums(a, drops, out):
    """``out[r, t] += sum_{i <= t < drops[r, i]} a[t, i]``: the mass schedule ``r`` keeps at step ``t``, position by
    position over each one's resident stretch (a column of ``a``; reading it in place costs less than a transposed
    copy of the rows, and every ``out[r, t]`` still adds its terms in ascending ``i``)."""
    n_runs, T = drops.shape
    for r in range(n_runs):
        for i in range(T):
            for t in range(i, min(drops[r, i], T)):
                out[r, t] += a[t, i]


resident_sums = Kernel(_resident_sums)


def charge_many(rows, drops: np.ndarray) -> np.ndarray:
    """``(R, T)``: :func:`charge` of each of the ``R`` drop vectors ``drops`` ``(R, T)`` on the same ``rows``, as the
    row's total over ``i <= t`` minus the mass the schedule keeps (:func:`resident_sums`).  The result differs from
    :func:`charge`'s sum of the lost entries by rounding only (a few ``T`` eps times the row total; a difference
    that rounds below 0 is 0); a row before the schedule's first drop loses nothing and is exactly 0, as there."""
    a = np.tril(np.asarray(rows, dtype=np.float64))
    T = a.shape[0]
    d = np.ascontiguousarray(drops, dtype=np.int64).reshape(-1, T)
    kept = np.zeros(d.shape, dtype=np.float64)
    resident_sums(a, d, kept)
    losing = np.arange(T)[None, :] >= d.min(axis=1, initial=T)[:, None]  # a dropped position stays lost
    return np.where(losing, np.maximum(a.sum(axis=1)[None, :] - kept, 0.0), 0.0)


def lazy_optimum(rows, capacity: int, top: int | None = None, source: str = "quality"
                 ) -> tuple[np.ndarray, float, float]:
    """``(drop, lower, cost)``: the lazy exact optimum (module docstring) solved on ``rows`` complete (``top=None``)
    or cut to ``top`` entries per row; ``lower`` is the optimum's cost on the rows it was solved on (a lower bound of
    the optimum on complete rows, equal to it for ``top=None``), ``cost`` the lazy schedule's cost on complete rows."""
    return lazy_optima(rows, (capacity,), top, source)[0]


def lazy_optima(rows, capacities, top: int | None = None, source: str = "quality", columns: bool = True
                ) -> list[tuple[np.ndarray, float, float]]:
    """:func:`lazy_optimum` at each of ``capacities`` on the same rows (with ``top``, ``lower`` is the larger of the
    truncated rows' optimum and the best Lagrangian bound on the complete rows found by climbing the dual from the
    truncated solve's line potentials, :func:`kvcore.optima.lagrangian.maximise_dual` with the lazy schedule's cost
    as its target; both are lower bounds of the complete rows' optimum): the
    trace, its exact integers and the flow network built once, each capacity solved on it with the line capacity
    replaced (:func:`kvcore.optima.capacity_curve.optimum_curve`, cold: the same network and solve as one
    :func:`kvcore.optima.nm_opt` per capacity, measured 0.35 s of the 1.3 s per capacity saved at T = 2,000).
    ``columns``: solved by column generation from each step's heaviest exits (the default) or on every exit from the
    start (``False``, the benchmark's baseline); the same exact optimum either way."""
    from kvcore.optima.capacity_curve import entries_of, item_drops, optimum_curve
    from kvcore.optima.lagrangian import maximise_dual

    trace = rows_trace(rows, top, source)
    entries = entries_of([trace])
    tokens = entries.arrival  # one trace: an item per token with stored mass, arriving at its own position
    curve = optimum_curve(entries, sorted(set(capacities)), warm=False, columns=columns)
    solved = {p.capacity: p for p in curve}
    out = []
    for capacity in capacities:
        drop = np.arange(trace.T, dtype=np.int64)  # a token without stored mass leaves on arrival
        drop[tokens] = item_drops(entries, solved[capacity].lost)
        drop = lazy_drop(drop, capacity)
        lower, cost = fsum_array(entries.weight[solved[capacity].lost]), float(charge(rows, drop).sum())
        if top is not None:  # the truncated solve's slot prices, climbed on the complete rows, bound their optimum
            a = np.asarray(rows)
            dual = maximise_dual(lambda h: a, 1, solved[capacity].line_potentials, capacity, "coupled", cost)
            lower = max(lower, dual.bound)
        out.append((drop, lower, cost))
    return out


__all__ = ["charge", "charge_many", "complete_rows", "head_rows", "lazy_optima", "lazy_optimum", "resident_sums",
           "rows_trace"]
