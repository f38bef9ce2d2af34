"""Eviction schedules and the attention masks they induce, in the NM (no-refetch) model (pure numpy; no torch).

The one representation.  A schedule of one layer and KV head over ``T`` steps is a *drop vector*: ``drop[i]`` is the
first step at which position ``i`` is no longer resident (``T`` = never dropped).  Position ``i`` arrives at step
``i`` (SPEC section 1), so it is resident exactly on the steps ``i <= t < drop[i]``; ``drop[i] = i`` means it was
dropped on arrival (NM allows that).  Because a position is resident on one interval, a drop vector cannot express
a refetch, and every conversion *into* a drop vector refuses one.  The same vector is :class:`kvcore.measure`'s and
:mod:`realtrace.press.schedule`'s ``drop``; a schedule of the whole model is an array ``(layers, kv_heads, T)``.

Forms converted here (each round trip is the identity):

* an eviction list ``[(t, i), ...]`` (the engine's ``RunResult.evictions``, :func:`kvcore.optima.nm_opt`'s
  ``record=True`` schedule): ``drop[i] = t``; a position evicted twice would have to come back in between (refused);
* resident sets ``R_0, ..., R_{T-1}`` (``R_t`` after step ``t``'s evictions) or the boolean matrix ``keep[t, i] =
  i in R_t``: ``drop[i]`` is the first step ``t >= i`` with ``i not in R_t``; a position absent at some step and
  present at a later one is a refetch (refused), a position listed before it arrives is refused too;
* the attention mask of the query at step ``t`` (:func:`resident_mask`): ``keep[t, i] = (i <= t) and (t < drop[i])``
  -- query ``t`` attends exactly to ``R_t`` (the NM step order: token ``t`` arrives, victims are dropped, then the
  step is charged on ``R_t``, paper Eq. 4).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kvcore.errors import KVToolkitError
from kvcore.kernels import Kernel

from ..press.schedule import HeadSchedule


class ScheduleError(KVToolkitError, ValueError):
    """A schedule that is not a valid NM schedule (a refetch, a future position, a cache over its budget, ...)."""


def _steps(T: int) -> int:
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 0:
        raise ScheduleError(f"T = {T!r}: must be an integer >= 0")
    return int(T)


def drop_from_evictions(evictions: Iterable[tuple[int, int]], T: int, where: str = "schedule") -> np.ndarray:
    """The drop vector of an eviction list ``[(step, position), ...]`` over ``T`` steps (module docstring)."""
    T = _steps(T)
    drop = np.full(T, T, dtype=np.int64)
    for t, i in evictions:
        t, i = int(t), int(i)
        if not 0 <= i <= t < T:
            raise ScheduleError(f"{where}: eviction of position {i} at step {t}: needs 0 <= position <= step < {T} "
                                "(a position can be evicted only after it arrived)")
        if drop[i] != T:
            raise ScheduleError(f"{where}: position {i} is evicted at steps {drop[i]} and {t}: it would have to come "
                                "back in between, and NM has no refetch")
        drop[i] = t
    return drop


def evictions_from_drop(drop: np.ndarray) -> list[tuple[int, int]]:
    """``[(step, position)]`` sorted by step, then position (the inverse of :func:`drop_from_evictions`; the press
    bridge's :meth:`~realtrace.press.schedule.HeadSchedule.evictions`)."""
    return HeadSchedule(np.asarray(drop, dtype=np.int64), []).evictions()


def check_drop(drop: np.ndarray, where: str = "schedule") -> np.ndarray:
    """``drop`` as an int64 array, checked: ``i <= drop[i] <= T`` for every position ``i``."""
    drop = np.asarray(drop)
    if drop.ndim != 1 or (drop.size and drop.dtype.kind not in "iu"):
        raise ScheduleError(f"{where}: a drop vector is a 1-D integer array, got shape {drop.shape}, "
                            f"dtype {drop.dtype}")
    drop = drop.astype(np.int64, copy=False)
    T = drop.size
    bad = np.flatnonzero((drop < np.arange(T)) | (drop > T))
    if bad.size:
        i = int(bad[0])
        raise ScheduleError(f"{where}: position {i} is dropped at step {int(drop[i])}, outside {i}..{T}")
    return drop


def drop_from_keep(keep: np.ndarray, where: str = "schedule") -> np.ndarray:
    """The drop vector of a boolean matrix ``keep[t, i] = (i in R_t)``, ``T x T`` (module docstring)."""
    keep = np.asarray(keep)
    if keep.ndim != 2 or keep.shape[0] != keep.shape[1] or keep.dtype != bool:
        raise ScheduleError(f"{where}: resident sets must be a square boolean matrix, got shape {keep.shape}, "
                            f"dtype {keep.dtype}")
    T = keep.shape[0]
    future = np.triu(keep, 1)
    if future.any():
        t, i = np.argwhere(future)[0]
        raise ScheduleError(f"{where}: position {i} is resident at step {t}, before it arrives")
    # on and below the diagonal, column i must read True...True False...False from row i down: no refetch
    lower = np.tril(np.ones((T, T), dtype=bool))
    absent = lower & ~keep
    drop = np.where(absent.any(axis=0), absent.argmax(axis=0), T).astype(np.int64)
    back = keep & (np.arange(T)[:, None] >= drop[None, :])
    if back.any():
        t, i = np.argwhere(back)[0]
        raise ScheduleError(f"{where}: position {i} is absent at step {drop[i]} and resident again at step {t}: "
                            "NM has no refetch")
    return drop


def drop_from_resident(resident: Sequence[Iterable[int]], where: str = "schedule") -> np.ndarray:
    """The drop vector of resident sets ``[R_0, ..., R_{T-1}]`` (each an iterable of positions)."""
    T = len(resident)
    keep = np.zeros((T, T), dtype=bool)
    for t, r in enumerate(resident):
        idx = np.fromiter((int(i) for i in r), dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= T):
            raise ScheduleError(f"{where}: step {t} lists a position outside 0..{T - 1}")
        keep[t, idx] = True
    return drop_from_keep(keep, where)


def resident_mask(drop: np.ndarray, rows: range | None = None) -> np.ndarray:
    """``keep[r, i] = (i <= t) and (t < drop[i])`` for the query steps ``t`` in ``rows`` (default all ``T``): the
    positions query ``t`` attends to.  Shape ``(len(rows), T)``."""
    drop = np.asarray(drop, dtype=np.int64)
    T = drop.size
    t = np.arange(T)[:, None] if rows is None else np.arange(rows.start, rows.stop)[:, None]
    i = np.arange(T)[None, :]
    return (i <= t) & (t < drop[None, :])


def _resident_bias(drop, first, out):
    """``out[t - first, i] = 0`` where :func:`resident_mask` keeps ``(t, i)``, ``-inf`` elsewhere, for the rows ``t``
    from ``first`` on (the additive attention mask of a replay, written in one pass instead of by the boolean
    temporaries of the mask); returns per row whether nothing is resident."""
    T = drop.size
    empty = np.ones(T - first, dtype=np.bool_)
    for t in range(first, T):
        for i in range(T):
            if i <= t and t < drop[i]:
                out[t - first, i] = 0.0
                empty[t - first] = False
            else:
                out[t - first, i] = -np.inf
    return empty


resident_bias = Kernel(_resident_bias)


def resident_sets(drop: np.ndarray) -> list[np.ndarray]:
    """``[R_0, ..., R_{T-1}]``, each a sorted array of positions (the inverse of :func:`drop_from_resident`)."""
    return [np.flatnonzero(row) for row in resident_mask(drop)]


def resident_counts(drop: np.ndarray) -> np.ndarray:
    """``|R_t|`` for every step ``t``, without building the mask (the press bridge's
    :meth:`~realtrace.press.schedule.HeadSchedule.resident_counts`)."""
    return HeadSchedule(np.asarray(drop, dtype=np.int64), []).resident_counts()


def first_drop(drops: np.ndarray) -> int:
    """The first step at which any position is absent, over all layers and heads (``T`` when nothing ever is):
    before it every query attends to the full cache, so a replay can start there."""
    drops = np.asarray(drops)
    return int(drops.min()) if drops.size else 0


def check_capacity(drop: np.ndarray, capacity: int, where: str = "schedule", start: int = 0) -> None:
    """Refuse a schedule that holds more than ``capacity`` positions at some step ``t >= start``."""
    counts = resident_counts(drop)[start:]
    over = np.flatnonzero(counts > capacity)
    if over.size:
        t = int(over[0]) + start
        raise ScheduleError(f"{where}: {int(counts[over[0]])} positions resident at step {t}, more than the budget "
                            f"{capacity}")


def lazy_drop(drop: np.ndarray, capacity: int) -> np.ndarray:
    """The lazy form of an NM schedule that holds at most ``capacity`` positions: nothing leaves while the cache has
    room, and once it is full exactly one position leaves per step, so ``|R_t| = min(t + 1, capacity)``.

    Step ``t``: token ``t`` joins; if ``capacity + 1`` positions are now resident, the one the given schedule dropped
    earliest leaves (lowest position on a tie).  Its given drop step is ``<= t``: the given resident set ``S_t`` has
    at most ``capacity`` positions, so one of the ``capacity + 1`` is outside it, and none can come back (NM).  By
    induction ``S_t`` is a subset of the lazy set at every step, so on any attention rows the lazy schedule loses at
    most what the given one loses (Eq. 4 charges only positions outside the resident set): a lazy form of an optimal
    schedule is optimal.  Each position leaves no earlier than the given schedule drops it."""
    import heapq

    drop = check_drop(drop, "lazy_drop")
    T = drop.size
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ScheduleError(f"capacity = {capacity!r}: must be an integer >= 1")
    check_capacity(drop, int(capacity), "lazy_drop")
    out = np.full(T, T, dtype=np.int64)
    resident: list[tuple[int, int]] = []  # (given drop step, position)
    for t in range(T):
        heapq.heappush(resident, (int(drop[t]), t))
        if len(resident) > capacity:
            _, i = heapq.heappop(resident)
            out[i] = t
    return out


def coupled_lazy_drop(drops: np.ndarray, budget: int) -> np.ndarray:
    """The lazy form of a coupled NM schedule: ``N`` caches (rows of ``drops``, shape ``(N, T)``; every layer and KV
    head of a model) that together hold at most ``budget`` positions at every step, ``sum_h |S_{h,t}| <= budget``
    (the dynamic coupled optimum, :mod:`kvcore.optima.coupled`).  Nothing leaves while the shared memory has room;
    once it is full exactly as many leave as arrive, so the lazy sets hold ``min(N (t + 1), budget)`` positions in
    total at step ``t`` -- :func:`lazy_drop`'s rule with one shared budget in place of one per cache.

    Step ``t``: token ``t`` joins every cache; if ``m`` positions are now resident in total, ``m - budget > 0`` of them
    leave, those the given schedule dropped earliest (ties: the lower cache, then the lower position).  Superset
    argument, by induction on ``t``: assume ``S_{h,t-1} ⊆ Z_{h,t-1}`` (the lazy sets) for every cache ``h``.  The
    candidates ``C_{h,t} = Z_{h,t-1} ∪ {t}`` then contain ``S_{h,t} ⊆ S_{h,t-1} ∪ {t}`` (no refetch).  A candidate
    outside ``S_{h,t}`` has given drop step ``<= t`` (it arrived by ``t`` and is not resident at ``t``); one inside
    has drop step ``> t``.  At least ``m - sum_h |S_{h,t}| >= m - budget`` candidates lie outside the given sets, so
    the ``m - budget`` earliest-dropped are all outside them and ``S_{h,t} ⊆ Z_{h,t}`` for every ``h``.  Eq. 4 charges
    each cache only for positions outside its resident set, so on any attention rows the lazy schedule's cost is at
    most the given one's, cache by cache: a lazy form of the coupled optimum is a coupled optimum.  Each position
    leaves no earlier than the given schedule drops it; for ``N = 1`` this is :func:`lazy_drop`."""
    import heapq

    drops = np.asarray(drops)
    if drops.ndim != 2:
        raise ScheduleError(f"coupled_lazy_drop: drops must be (caches, T), got shape {drops.shape}")
    drops = np.stack([check_drop(d, f"coupled_lazy_drop, cache {h}") for h, d in enumerate(drops)]) if drops.size \
        else drops.astype(np.int64)
    N, T = drops.shape
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise ScheduleError(f"budget = {budget!r}: must be an integer >= 1")
    total = sum(resident_counts(d) for d in drops) if N else np.zeros(T, np.int64)
    over = np.flatnonzero(total > budget)
    if over.size:
        t = int(over[0])
        raise ScheduleError(f"coupled_lazy_drop: {int(total[t])} positions resident in total at step {t}, more than "
                            f"the shared budget {budget}")
    out = np.full((N, T), T, dtype=np.int64)
    resident: list[tuple[int, int, int]] = []  # (given drop step, cache, position)
    for t in range(T):
        for h in range(N):
            heapq.heappush(resident, (int(drops[h, t]), h, t))
        while len(resident) > budget:
            _, h, i = heapq.heappop(resident)
            out[h, i] = t
    return out


def full_cache(layers: int, heads: int, T: int) -> np.ndarray:
    """The schedule that drops nothing: ``drop = T`` everywhere, shape ``(layers, heads, T)``."""
    return np.full((layers, heads, T), _steps(T), dtype=np.int64)


def check_schedule(drops: np.ndarray, layers: int, heads: int, T: int, where: str = "schedule") -> np.ndarray:
    """A whole-model schedule ``(layers, heads, T)`` of drop vectors, each checked (:func:`check_drop`)."""
    drops = np.asarray(drops)
    if drops.shape != (layers, heads, T):
        raise ScheduleError(f"{where}: shape {drops.shape}, expected (layers, KV heads, T) = {(layers, heads, T)}")
    out = np.empty(drops.shape, dtype=np.int64)
    for layer in range(layers):
        for h in range(heads):
            out[layer, h] = check_drop(drops[layer, h], f"{where}, layer {layer} KV head {h}")
    return out


SAVED = ("a saved schedule is an .npz archive of integer arrays drop_<prompt> of shape (layers, KV heads, T), as "
         "quality --steps writes")


def read_schedule_file(path: str) -> dict[str, np.ndarray]:
    """The arrays of a saved schedule file, or one-line :class:`ScheduleError` (:func:`kvcore.trace_files.load_arrays`,
    the reader of every array file a user hands in, with what a saved schedule is)."""
    from kvcore.trace_files import load_arrays

    try:
        arrays = load_arrays(path, "schedule", ScheduleError)
    except ScheduleError as exc:
        raise ScheduleError(f"{exc}; {SAVED}") from None
    if not isinstance(arrays, dict):
        raise ScheduleError(f"schedule {path}: a single .npy array, not an .npz archive; {SAVED}")
    return arrays


def check_schedule_file(arrays: dict[str, np.ndarray], path: str, prompts: Sequence[str], layers: int | None,
                        heads: int | None, capacity: int, lengths: dict[str, int] | None = None) -> None:
    """Every prompt has a valid NM schedule ``drop_<prompt>`` in ``arrays`` of shape ``(layers, heads, T)`` that
    never holds more than ``capacity`` positions; with ``lengths``, ``T`` is the prompt's token count.  Checked
    before the model loads (without ``lengths``, ``layers`` and ``heads``, the last two taken from the array:
    before the tokenizer and the model's configuration are read too)."""
    for name in prompts:
        key = f"drop_{name}"
        if key not in arrays:
            raise ScheduleError(f"{path}: no array {key} (saved for: {', '.join(sorted(arrays)) or 'nothing'})")
        a = arrays[key]
        if a.ndim != 3:
            raise ScheduleError(f"{path}:{key}: shape {a.shape}, expected (layers, KV heads, T) = ({layers}, {heads}, T)")
        T = a.shape[-1]
        layers, heads = (a.shape[0] if layers is None else layers), (a.shape[1] if heads is None else heads)
        if lengths is not None and T != lengths[name]:
            raise ScheduleError(f"{path}:{key}: {T} steps, but prompt {name} has {lengths[name]} tokens")
        drops = check_schedule(a, layers, heads, T, f"{path}:{key}")
        for layer in range(layers):
            for g in range(heads):
                check_capacity(drops[layer, g], capacity, f"{path}:{key} layer {layer} KV head {g}")


__all__ = ["ScheduleError", "check_capacity", "check_drop", "check_schedule", "coupled_lazy_drop", "drop_from_evictions", "drop_from_keep",
           "drop_from_resident", "evictions_from_drop", "first_drop", "full_cache", "lazy_drop", "read_schedule_file", "check_schedule_file", "resident_bias",
           "resident_counts", "resident_mask", "resident_sets"]
