"""Shared construction helpers for the generators: turning per-row token->mass maps into a validated trace."""

from __future__ import annotations

from typing import Sequence

import numpy as np

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
