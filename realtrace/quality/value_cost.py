"""The value-aware surrogate and its exact optimum (paper §3, "A word on why the attention-mass regret...", and §9).

Why this weight.  A KV head's attention output at step ``t`` is ``o_t = sum_j a[t, j] v_j`` (paper Eq. 1, ``a`` the
head-mean row over the query heads sharing the KV head, which share its values, so this is also the mean of the
query heads' outputs).  Dropping a set ``E`` and renormalising gives ``o'_t`` with, exactly,
``o'_t - o_t = sum_{j in E} a[t, j] (o'_t - v_j)``; to first order (``o'_t ~ o_t``) its norm is at most

    sum_{j in E} a[t, j] ||v_j - o_t||,

the attention mass weighted per entry by how far the value lies from the full-cache output.  With every weight
equal it is the paper's mass regret (Eq. 4) times a constant; the two places where they part are the two failure
directions the paper names: an *outlier* value (``||v_j - o_t||`` far above the row's mass-weighted mean
``sum_j a[t, j] ||v_j - o_t||``: the mass understates the loss) and an *aligned* value (far below it: the mass
overstates the loss, renormalisation absorbs it).

The cost stays one number per (step, token), so the exact no-refetch optimum of this surrogate is the same min-cost
flow as the mass optimum's with these entries as costs (:func:`kvcore.optima.nm_opt_costs`; the rows no longer sum
to 1).  :func:`value_optimum` solves it and makes it lazy exactly like ``OPT``
(:func:`realtrace.quality.schedule.lazy_drop`: the lazy resident set contains the solved one, so with non-negative
costs its cost does not rise and the lazy schedule is an exact optimum).  Numpy only: no torch needed.
"""

from __future__ import annotations

import numpy as np

from kvcore.exact_sum import fsum_array
from kvcore.kernels import Kernel

from .schedule import drop_from_evictions, lazy_drop

REFINE = 1e-4  # below this share of |v|^2 + |o|^2 a squared distance is recomputed directly (value_distance)


def value_distance(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``(T, T)``: ``||v_i - o_t||`` for ``i <= t`` (0 above the diagonal), ``o = rows @ values`` the full-cache
    output of the head.  ``rows`` ``(T, T)`` causal attention rows, ``values`` ``(T, d)``; float64.  Formed as
    ``sqrt(|v_i|^2 + |o_t|^2 - 2 o_t . v_i)`` (one matrix product), which cancels where ``v_i ~ o_t`` -- exactly
    the aligned values this cost is about -- so every entry whose square is below ``REFINE`` times
    ``|v_i|^2 + |o_t|^2`` is recomputed as the norm of the difference; the others carry a relative error of a few
    ``eps / REFINE`` (about 1e-11)."""
    a = np.asarray(rows, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    o = a @ v
    scale = (v * v).sum(axis=1)[None, :] + (o * o).sum(axis=1)[:, None]
    sq = np.tril(scale - 2.0 * (o @ v.T))
    t, i = np.nonzero(np.tril(sq < REFINE * scale))
    sq[t, i] = _direct_squares(v, o, t, i)
    return np.sqrt(np.maximum(sq, 0.0))


def _direct_squares(v: np.ndarray, o: np.ndarray, t: np.ndarray, i: np.ndarray) -> np.ndarray:
    """``||v_i - o_t||^2`` for the entries ``(t, i)``, as the norm of the difference (no cancellation)."""
    return ((v[i] - o[t]) ** 2).sum(axis=1)


def _fused_costs(a, vv, oo, g, costs, refine):
    """``costs[t, i] = a[t, i] sqrt(max(vv[i] + oo[t] - 2 g[t, i], 0))`` for ``i <= t`` (0 above the diagonal), and
    ``refine[t, i]`` set where that square is below ``REFINE (vv[i] + oo[t])``: :func:`value_distance` times the rows,
    one pass instead of a dozen ``(T, T)`` temporaries, each entry by the same float operations."""
    T = a.shape[0]
    for t in range(T):
        for i in range(t + 1):
            scale = vv[i] + oo[t]
            sq = scale - 2.0 * g[t, i]
            refine[t, i] = sq < REFINE * scale
            costs[t, i] = a[t, i] * np.sqrt(max(sq, 0.0))
        for i in range(t + 1, T):
            refine[t, i] = False
            costs[t, i] = 0.0


fused_costs = Kernel(_fused_costs)


def value_costs(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``(T, T)`` per-entry costs of the value-aware surrogate: ``a[t, i] ||v_i - o_t||`` (module docstring).  The
    products and row sums of :func:`value_distance`, the rest in one kernel (:func:`fused_costs`), so every entry
    is the float result of :func:`value_costs_plain`, bit for bit (``tests/test_quality_value.py``); a run charges
    every head's costs once per prompt, and the temporaries were four fifths of the time at ``T = 2,000``."""
    a = np.asarray(rows, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    o = a @ v
    costs = np.empty(a.shape)
    refine = np.empty(a.shape, dtype=np.bool_)
    fused_costs(a, (v * v).sum(axis=1), (o * o).sum(axis=1), o @ v.T, costs, refine)
    t, i = np.nonzero(refine)
    costs[t, i] = a[t, i] * np.sqrt(np.maximum(_direct_squares(v, o, t, i), 0.0))
    return costs


def value_costs_plain(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """:func:`value_costs` written plainly: the rows times :func:`value_distance`, the reference it is tested
    against."""
    return np.tril(np.asarray(rows, dtype=np.float64)) * value_distance(rows, values)


def lost(drop: np.ndarray, T: int) -> np.ndarray:
    """``(T, T)`` boolean: entry ``(t, i)`` (``i <= t``) is lost under the drop vector ``drop`` (``drop[i] <= t``)."""
    return np.tril(np.asarray(drop, dtype=np.int64)[None, :] <= np.arange(T)[:, None])


def total_cost(costs: np.ndarray, drop: np.ndarray) -> float:
    """The correctly rounded sum of ``costs`` over the entries ``drop`` loses (:func:`kvcore.exact_sum.fsum_array`,
    as ``math.fsum``: two schedules whose exact costs compare one way compare the same way here, so the optimality
    tests need no tolerance)."""
    return fsum_array(costs[lost(drop, costs.shape[0])])


def top_entries(costs: np.ndarray, top: int | None) -> np.ndarray:
    """``costs`` with only the ``top`` largest entries of each row kept (ties by position), the others 0;
    ``costs`` itself for ``top=None``."""
    if top is None or top >= costs.shape[0]:
        return costs
    keep = np.argsort(-costs, axis=1, kind="stable")[:, :top]
    cut = np.zeros_like(costs)
    np.put_along_axis(cut, keep, np.take_along_axis(costs, keep, axis=1), axis=1)
    return cut


def value_optimum(costs: np.ndarray, capacity: int, top: int | None = None) -> tuple[np.ndarray, float, float]:
    """``(drop, lower, cost)``: the lazy exact optimum of the per-entry ``costs`` (:func:`value_costs`) with
    ``capacity`` slots, solved on complete rows (``top=None``) or on each row's ``top`` largest costs; ``lower`` is the
    optimum of the rows it was solved on (a lower bound of the complete optimum, equal to it for ``top=None``), ``cost``
    the lazy schedule's cost on complete rows (as :func:`realtrace.quality.exact.lazy_optimum` for the mass)."""
    from kvcore.optima import nm_opt_costs

    T = costs.shape[0]
    res = nm_opt_costs(top_entries(costs, top), capacity, record=True)
    drop = lazy_drop(drop_from_evictions(res.evictions, T), capacity)
    return drop, float(res.cost), total_cost(costs, drop)


__all__ = ["lost", "top_entries", "total_cost", "value_costs", "value_costs_plain", "value_distance",
           "value_optimum"]
