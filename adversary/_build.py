"""Shared construction helpers for the generators: turning per-row token->mass maps into a validated trace."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace


def attention_from_rows(rows: Sequence[dict[int, float]], source: str) -> AttentionTrace:
    """Build an :class:`AttentionTrace` from one ``token -> mass`` map per row (zero entries are dropped).

    The trace constructor validates every row (sum to 1 within ``ROW_SUM_TOL``, no future token), so a generator
    bug surfaces as a one-line :class:`~kvcore.errors.TraceError` naming the step, never as a silently bad trace.
    """
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    idx_parts: list[np.ndarray] = []
    w_parts: list[np.ndarray] = []
    for t, row in enumerate(rows):
        keys = np.fromiter((i for i, x in row.items() if x > 0.0), dtype=np.int64)
        keys.sort()
        idx_parts.append(keys)
        w_parts.append(np.fromiter((row[int(i)] for i in keys), dtype=np.float64, count=keys.size))
        indptr[t + 1] = indptr[t] + keys.size
    idx = np.concatenate(idx_parts) if idx_parts else np.zeros(0, dtype=np.int64)
    w = np.concatenate(w_parts) if w_parts else np.zeros(0)
    return AttentionTrace(indptr, idx, w, None, source)


def check_int(value, name: str, low: int) -> int:
    """Return ``value`` as an int if it is an integer ``>= low``; otherwise raise a one-line ParameterError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} = {value!r}: must be an integer")
    if value < low:
        raise ParameterError(f"{name} = {value}: must be at least {low}")
    return int(value)


def check_unit_interval(value, name: str, *, closed_low: bool, closed_high: bool) -> float:
    """Return ``value`` as a float inside [0, 1] with the stated open/closed ends; otherwise raise ParameterError."""
    v = float(value)
    ok_low = v >= 0.0 if closed_low else v > 0.0
    ok_high = v <= 1.0 if closed_high else v < 1.0
    if not (np.isfinite(v) and ok_low and ok_high):
        lo = "[0" if closed_low else "(0"
        hi = "1]" if closed_high else "1)"
        raise ParameterError(f"{name} = {value!r}: must be in {lo}, {hi}")
    return v
