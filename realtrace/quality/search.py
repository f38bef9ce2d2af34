"""Beyond the surrogate: a search for the schedule whose *output* is best, accepted by measured answer KL (issue 52
item 5; numpy only -- the model enters through the ``measure`` callable, :mod:`realtrace.quality.search_run`).

The exact optimum (``OPT``, :mod:`realtrace.quality.optima`) minimizes the attention mass a schedule loses (paper
Eq. 4), the surrogate of paper §9; what a user sees is the output.  This module starts from the optimum's schedule
and changes it by *exchanges*, keeping a change only when the measured answer KL falls.

The move.  A schedule of one layer and KV head is a drop vector ``d`` (``d[i]`` the step at which position ``i``
leaves, ``i <= d[i] <= T``; :mod:`realtrace.quality.schedule`), resident set ``R_t = {i : i <= t < d[i]}``.  An
*exchange* at step ``s`` takes the position ``i`` that leaves at ``s`` (``d[i] = s``) and a position ``j`` resident
at ``s`` (``j <= s < d[j] = u``) and swaps their drop steps: ``d'[i] = u``, ``d'[j] = s`` -- ``i`` is kept longer,
until ``u``; ``j`` is dropped earlier, at ``s``, in ``i``'s place (:func:`exchange`).

Why it keeps the schedule feasible and lazy.  Validity: ``d'[i] = u > s >= i`` and ``d'[j] = s >= j``, both at most
``T``; a drop vector cannot express a refetch, so NM holds.  Resident counts: only ``i`` and ``j`` change, so
``|R'_t| - |R_t| = [i <= t < u] + [j <= t < s] - [i <= t < s] - [j <= t < u]``.  With ``m = max(i, j) <= s``:
for ``t < min(i, j)`` every term is 0; for ``min(i, j) <= t < m`` only the earlier-arrived position counts, and it is
resident before and after (``t < m <= s < u``); for ``m <= t < s`` all four terms are 1; for ``s <= t < u`` the
second and third are 0 and the first and fourth are 1; for ``t >= u`` all are 0.  So ``|R'_t| = |R_t|`` at *every*
step: a schedule within budget ``K`` stays within it, and a lazy one (``|R_t| = min(t + 1, K)``,
:func:`realtrace.quality.schedule.lazy_drop`) stays lazy.  The multiset of drop steps is unchanged (two are swapped).

Reach.  Every lazy schedule of budget ``K`` on a trace is reachable from any other by at most ``T - K`` exchanges:
match the step-``s`` drop for ``s = K, K + 1, ...`` in turn; with the earlier steps matched, the position ``i'`` the
target drops at ``s`` is not yet dropped (the drop steps below ``s`` belong to the same positions in both) and has
arrived (``i' <= s``), so it is resident at ``s`` and exchanging it with the current step-``s`` drop is a move.  The
best output over lazy per-head schedules of budget ``K`` is therefore in the search space; the search, being local
and bounded, does not claim to find it.

Proposals (cheap, first order) and acceptance (measured).  A proposal is scored by the value-weighted attention of
the answer rows (:func:`answer_weights`): keeping ``i`` over the answer rows ``t`` in ``[s, u)`` restores about
``a[t, i] ||v_i - o_t||`` of the KV head's output ``o_t`` (paper §3, §9; :mod:`realtrace.quality.value_cost`), and
dropping ``j`` there loses ``a[t, j] ||v_j - o_t||``; each dropped position gets its best partner
(:func:`trace_candidates`) and the positive ones are candidates.  :func:`output_search` applies a batch of them,
drawn with a seed in proportion to their scores, and keeps the batch only when the measured answer KL is lower than
the best so far (so the result's KL is never above the start's); the batch doubles after an acceptance and halves
after a rejection, whose exchanges are not proposed again.  Every measurement is one forward pass, counted against
``passes`` (the start's included).

What the result means.  The answer KL of the best schedule found is an *upper bound* on the answer KL of the output
optimum (the best lazy schedule of budget ``K``, above); ``start KL - best KL`` is therefore a *lower* bound on how
far the surrogate's optimum is from the output optimum: the search shows a gap at least this large, not the gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .schedule import ScheduleError, check_schedule, resident_counts


@dataclass(frozen=True)
class Exchange:
    """One move (module docstring) on layer ``layer``, KV head ``head``: at step ``step`` position ``dropped`` (which
    left at ``step``) is kept until ``until`` and position ``kept`` (resident at ``step``, leaving at ``until``)
    leaves at ``step`` instead; ``score`` is the proposal's first-order answer-row gain (not part of the move)."""

    layer: int
    head: int
    step: int
    dropped: int
    kept: int
    until: int
    score: float = field(default=0.0, compare=False)


def exchange(drop: np.ndarray, dropped: int, kept: int) -> np.ndarray:
    """A copy of the drop vector ``drop`` with the drop steps of ``dropped`` (leaving at ``s``) and ``kept``
    (resident at ``s``: ``kept <= s < drop[kept]``) swapped: the exchange of the module docstring, which keeps every
    step's resident count.  Anything else is refused (:class:`ScheduleError`)."""
    s, u = int(drop[dropped]), int(drop[kept])
    if not (kept <= s < u):
        raise ScheduleError(f"exchange of positions {dropped} and {kept}: needs {kept} <= drop[{dropped}] = {s} < "
                            f"drop[{kept}] = {u} (the kept position resident when the other leaves)")
    out = np.array(drop, dtype=np.int64)
    out[dropped], out[kept] = u, s
    return out


def check_counts(drops: np.ndarray, counts: np.ndarray, where: str = "search") -> None:
    """Refuse a schedule ``(L, H, T)`` that is not a valid NM schedule or whose resident count differs from
    ``counts`` ``(L, H, T)`` (the start's) at some layer, KV head and step: what every exchange keeps, so a
    move that breaks a budget, or laziness, is caught here before a forward pass is spent on it."""
    L, H, T = counts.shape
    drops = check_schedule(drops, L, H, T, where)
    for layer in range(L):
        for g in range(H):
            now = resident_counts(drops[layer, g])
            bad = np.flatnonzero(now != counts[layer, g])
            if bad.size:
                t = int(bad[0])
                raise ScheduleError(f"{where}: layer {layer} KV head {g} holds {int(now[t])} positions at step {t}, "
                                    f"the start held {int(counts[layer, g, t])}: not an exchange")


def answer_weights(rows: np.ndarray, values: np.ndarray, first: int, stop: int) -> np.ndarray:
    """``(stop - first, T)``: ``a[t, i] ||v_i - o_t||`` for the answer rows ``t = first .. stop - 1`` (0 for
    ``i > t``), ``a`` the complete head-mean rows ``(T, T)``, ``values`` ``(T, d)``, ``o_t = sum_j a[t, j] v_j`` the
    KV head's full-cache output (the value-aware cost of :mod:`realtrace.quality.value_cost` on those rows; the norm
    of the difference, with no cancellation)."""
    a = np.asarray(rows, dtype=np.float64)[first:stop]
    v = np.asarray(values, dtype=np.float64)
    o = a @ v
    dist = np.sqrt(((v[None, :, :] - o[:, None, :]) ** 2).sum(axis=2))
    return a * dist


def trace_candidates(drop: np.ndarray, weights: np.ndarray, first: int, layer: int = 0, head: int = 0
                     ) -> list[Exchange]:
    """Every position ``i`` that leaves before the last answer row, paired with the resident partner ``j`` of the
    highest first-order gain ``sum_{t in [s, u)} (W[t, i] - W[t, j])`` over the answer rows (``W`` =
    ``weights``, rows ``first ..``; ``s = drop[i]``, ``u = drop[j]``), when that gain is positive."""
    drop = np.asarray(drop, dtype=np.int64)
    T = drop.size
    rows = weights.shape[0]
    prefix = np.concatenate([np.zeros((1, T)), np.cumsum(weights, axis=0)])  # prefix[c, x]: rows first .. first+c-1
    positions = np.arange(T)
    out = []
    for i in np.flatnonzero(drop < first + rows):
        s = int(drop[i])
        partners = np.flatnonzero((positions <= s) & (drop > s))
        if partners.size == 0:
            continue
        lo = min(max(s - first, 0), rows)
        hi = np.clip(drop[partners] - first, lo, rows)
        gain = (prefix[hi, i] - prefix[lo, i]) - (prefix[hi, partners] - prefix[lo, partners])
        best = int(np.argmax(gain))
        if gain[best] > 0:
            j = int(partners[best])
            out.append(Exchange(layer, head, s, int(i), j, int(drop[j]), float(gain[best])))
    return out


@dataclass
class SearchResult:
    """What :func:`output_search` found: ``drops`` the best schedule, ``kl`` its measured answer KL and
    ``start_kl`` the start's (both ``None`` with no pass), ``passes`` the forward passes spent, ``exchanges`` the
    moves between the start and ``drops``, ``history`` one ``(answer KL, batch size, accepted)`` per pass after the
    start's."""

    drops: np.ndarray
    kl: float | None
    start_kl: float | None
    passes: int
    exchanges: list[Exchange]
    history: list[tuple[float, int, bool]]

    @property
    def gap(self) -> float | None:
        """``start_kl - kl``: a lower bound on the surrogate optimum's distance from the output optimum (module
        docstring)."""
        return None if self.kl is None else self.start_kl - self.kl


def _sample(pool: list[Exchange], size: int, rng: np.random.Generator) -> list[Exchange]:
    """``size`` proposals drawn without replacement with probability in proportion to their scores (the
    Gumbel-top-``k`` trick: the ``size`` largest ``log score + Gumbel noise``), highest score first."""
    keys = np.log([c.score for c in pool]) + rng.gumbel(size=len(pool))
    chosen = [pool[n] for n in np.argsort(-keys, kind="stable")[:size]]
    return sorted(chosen, key=lambda c: -c.score)


def output_search(start: np.ndarray, measure: Callable[[np.ndarray], float], weights, first: int, passes: int,
                  seed: int, batch: int = 16) -> SearchResult:
    """The search of the module docstring from the schedule ``start`` ``(L, H, T)``: ``measure(drops)`` is the
    answer KL of a schedule (one forward pass), ``weights[layer][head]`` the answer rows' weights
    (:func:`answer_weights`, rows ``first ..``), at most ``passes`` measurements (0: the start, unmeasured),
    ``batch`` exchanges in the first proposal, draws from ``numpy.random.default_rng(seed)``."""
    start = np.array(start, dtype=np.int64)
    L, H, T = start.shape
    counts = np.stack([[resident_counts(start[layer, g]) for g in range(H)] for layer in range(L)])
    if passes == 0:
        return SearchResult(start, None, None, 0, [], [])
    rng = np.random.default_rng(seed)
    best, best_kl, used = start, float(measure(start)), 1
    start_kl, moves, history = best_kl, [], []
    found = {(layer, g): trace_candidates(best[layer, g], weights[layer][g], first, layer, g)
             for layer in range(L) for g in range(H)}
    refused: set[Exchange] = set()
    size = batch
    while used < passes:
        pool = [c for cands in found.values() for c in cands if c not in refused]
        if not pool:
            break
        trial, applied = best.copy(), []
        for c in _sample(pool, size, rng):
            d = trial[c.layer, c.head]
            if d[c.dropped] == c.step and d[c.kept] == c.until:  # an earlier exchange of the batch may have moved it
                trial[c.layer, c.head] = exchange(d, c.dropped, c.kept)
                applied.append(c)
        check_counts(trial, counts)
        kl = float(measure(trial))
        used += 1
        history.append((kl, len(applied), kl < best_kl))
        if kl < best_kl:
            best, best_kl = trial, kl
            moves += applied
            for layer, g in {(c.layer, c.head) for c in applied}:
                found[layer, g] = trace_candidates(best[layer, g], weights[layer][g], first, layer, g)
            size *= 2
        else:
            refused.update(applied)
            size = max(1, size // 2)
    return SearchResult(best, best_kl, start_kl, used, moves, history)


__all__ = ["Exchange", "SearchResult", "answer_weights", "check_counts", "exchange", "output_search",
           "trace_candidates"]
