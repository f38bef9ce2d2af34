"""Shrinking a counterexample to a *locally minimal* one: removing any single step loses the violation.

The targeted search's examples are shrunk by hypothesis first (:mod:`verify.search`), which ends at a trace
hypothesis cannot make smaller *in its own encoding* -- not necessarily one from which no request can be removed
(a repeated motif, for instance, shrinks as a motif).  Traces found outside hypothesis (constructions at growing
lengths, warm-ups, the climbing search of :mod:`verify.deepen`) have no encoding at all and may be 10^5 steps long.
Both are first shrunk by their structure (:func:`structured`: a repeated period cut to its fewest repeats, a
warm-up prefix and a tail removed), then finished here by delta debugging over steps (Zeller & Hildebrandt, "Simplifying and isolating
failure-inducing input", IEEE TSE 2002): remove chunks of half the remaining steps, then quarters, ... down to
single steps, keeping every removal after which the trace still violates; it ends when a whole pass of
single-step removals keeps nothing (so the result is 1-minimal), or when the clock runs out (then the report says
so, with the length reached).

Removing a step: paging -- the step's requests go; attention -- token ``t`` and row ``t`` go, later ids shift down,
and a row that loses entries is renormalized (a row that loses all of them puts its mass on its own token), so the
result is again a valid trace.  The question may map the candidate before it is judged (Theorem 4's premise:
:meth:`verify.questions.Question.admissible`), so minimality is "no single removal, mapped, still violates".
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from kvcore.traces import AttentionTrace, PagingTrace


def without_steps(trace, keep: np.ndarray):
    """``trace`` restricted to the steps where the boolean mask ``keep`` is true (module docstring)."""
    if isinstance(trace, PagingTrace):
        if trace.is_unit_single:
            return PagingTrace.unit(trace.items[keep], trace.source)
        lengths = np.diff(trace.offsets)
        per_request = np.repeat(keep, lengths)
        offsets = np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64)
        return PagingTrace(trace.items[per_request], trace.costs[per_request], offsets, trace.source)
    new_id = np.cumsum(keep) - 1
    indptr, indices, weights = [0], [], []
    for t in np.flatnonzero(keep).tolist():
        lo, hi = trace.indptr[t], trace.indptr[t + 1]
        ix, w = trace.indices[lo:hi], trace.weights[lo:hi]
        live = keep[ix]
        ix, w = new_id[ix[live]], w[live]
        if w.sum() <= 0:
            ix, w = np.array([new_id[t]]), np.ones(1)
        indices.append(ix)
        weights.append(w / w.sum())
        indptr.append(indptr[-1] + ix.size)
    return AttentionTrace(np.array(indptr, dtype=np.int64), np.concatenate(indices).astype(np.int64),
                          np.concatenate(weights), trace.residual[keep], trace.source)


MAX_PERIOD = 256            # the longest period looked for in a trace's tail


def periodic_tail(items: np.ndarray) -> tuple[int, int] | None:
    """``(start, p)``: the shortest period ``p <= MAX_PERIOD`` with which ``items[start:]`` repeats exactly, for the
    smallest ``start`` (at least two whole periods in the tail); ``None`` when no tail repeats."""
    best = None
    n = items.size
    for p in range(1, min(MAX_PERIOD, n // 2) + 1):
        differ = np.flatnonzero(items[p:] != items[:-p])
        start = int(differ[-1]) + 1 if differ.size else 0
        if n - start >= 2 * p and (best is None or start < best[0]):
            best = (start, p)
            if start == 0:
                break
    return best


def structured(trace, violates: Callable[[object], bool], deadline: float) -> tuple[object, list[str]]:
    """Shrink a unit paging ``trace`` by its structure before delta debugging (issue 50 item 4): (1) a repeated
    period -- its fewest repeats (a doubling, then a bisection on the count) after the shortest warm-up prefix that
    keeps the violation, none at all first; (2) then the longest prefix that can go (a warm-up: halves, quarters,
    ... of what is left), (3) then the longest tail that can go.  Each is judged by ``violates``; stops at
    ``deadline``.  Returns the smallest violating trace and what was done, in words."""
    if not (isinstance(trace, PagingTrace) and trace.is_unit_single):
        return trace, []
    done: list[str] = []
    best = trace.items

    def ok(items: np.ndarray) -> bool:
        return time.monotonic() < deadline and items.size < best.size and violates(PagingTrace.unit(items,
                                                                                                    trace.source))
    tail = periodic_tail(best)
    if tail is not None:
        start, p = tail
        period = best[start:start + p]
        for prefix in (best[:0], best[:start]) if start else (best[:0],):
            hi = (best.size - prefix.size) // p
            lo, found = 0, None
            m = 1
            while m < hi and found is None:           # doubling: the first count that violates
                if ok(np.concatenate([prefix, np.tile(period, m)])):
                    found = m
                else:
                    lo, m = m, 2 * m
            if found is None:
                continue
            while found - lo > 1:                     # bisection between the last failing and the first violating
                mid = (lo + found) // 2
                if ok(np.concatenate([prefix, np.tile(period, mid)])):
                    found = mid
                else:
                    lo = mid
            best = np.concatenate([prefix, np.tile(period, found)])
            done.append(f"a {p}-request period repeated {found} times" + (f" after a {prefix.size}-request prefix"
                                                                          if prefix.size else ""))
            break
    for side in ("prefix", "tail"):
        cut = best.size // 2
        removed = 0
        while True:
            cut = min(cut, best.size - 1)
            if cut < 1:
                break
            candidate = best[cut:] if side == "prefix" else best[:-cut]
            if ok(candidate):
                best, removed = candidate, removed + cut
            else:
                cut //= 2
        if removed:
            done.append(f"a {removed}-request {'warm-up prefix' if side == 'prefix' else 'tail'} removed")
    return (trace if best is trace.items else PagingTrace.unit(best, trace.source)), done


def minimize(trace, violates: Callable[[object], bool], deadline: float,
             admissible: Callable[[object], object] = lambda tr: tr) -> tuple[object, bool]:
    """Delta-debug ``trace`` (which ``violates``) over its steps until it is 1-minimal or ``deadline`` (monotonic
    clock) passes.  Returns ``(smallest violating trace, complete)``; ``complete`` means no single step can be removed
    (after ``admissible``) with the violation kept."""
    keep = np.ones(trace.T, dtype=bool)
    best = trace
    size = max(1, trace.T // 2)
    last = 0.0      # seconds of the last judgement: one that would end past the deadline is not started
    while True:
        removed = False
        kept = np.flatnonzero(keep)
        if kept.size <= 1:
            return best, True
        for start in range(0, kept.size, size):
            t0 = time.monotonic()
            if t0 + last > deadline:
                return best, False
            trial = keep.copy()
            trial[kept[start:start + size]] = False
            if not trial.any():
                continue
            candidate = admissible(without_steps(trace, trial))
            hit = violates(candidate)
            last = time.monotonic() - t0
            if hit:
                keep, best, removed = trial, candidate, True
        if not removed:
            if size == 1:
                return best, True
            size = max(1, size // 2)
