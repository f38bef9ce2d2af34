"""Shrinking a counterexample to a *locally minimal* one: removing any single step loses the violation.

The targeted search's examples are shrunk by hypothesis first (:mod:`verify.search`), which ends at a trace
hypothesis cannot make smaller *in its own encoding* -- not necessarily one from which no request can be removed
(a repeated motif, for instance, shrinks as a motif).  Traces found outside hypothesis (constructions at growing
lengths, warm-ups, the climbing search of :mod:`verify.deepen`) have no encoding at all and may be 10^5 steps long.
Both are finished here by delta debugging over steps (Zeller & Hildebrandt, "Simplifying and isolating
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
