"""The paper's "Belady analog" for the no-refetch model, as a named offline heuristic (paper Sections 3-4).

Rule: at step ``t`` token ``t`` arrives; if ``R_{t-1} U {t}`` holds more than ``h`` tokens, drop the one with the
least future attention mass ``F_t(i) = sum_{s >= t} a[s, i]`` (mass of the current step included, since the step's
regret is charged after the drop).  One drop per step keeps exactly the ``h`` candidates of largest ``F_t``.  Ties
are broken toward dropping the older token (smaller id).  Regret as in Eq. 4, stored entries only; the trace's
``residual`` is reported as ``unattributed`` and never used.

The paper presents this as the offline optimum of NM (Sections 3 and 4); it is not one.  The rule scores a token by
all of its future mass, but a slot is contested at every future step, so part of that mass may be unreachable
anyway.  Smallest counterexample found by exhaustive search (3 tokens, ``h = 1``, no ties in any decision)::

    a = [[1,   0,   0  ],
         [3/5, 2/5, 0  ],
         [0,   2/5, 3/5]]

At step 1 the rule keeps token 1 (future mass 4/5 > 3/5) and loses 3/5; at step 2 token 2 outweighs it and it loses
2/5 more: regret 1.  The optimum keeps token 0 through step 1 (loses 2/5), then token 2 (loses 2/5): regret 4/5.
Use :func:`kvcore.optima.nm_opt` for the optimum.

``O(nnz log h)``: resident tokens sit in a min-heap keyed by ``F_t``; keys only decrease, so an attended token gets a
fresh entry and stale entries (larger than the current key) are skipped when they reach the top; the heap is rebuilt
from live entries when it grows past ``2h``.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..engine import check_capacity
from ..traces import AttentionTrace
from .result import OptResult


def future_mass_heuristic(trace: AttentionTrace, capacity: int, record: bool = False) -> OptResult:
    """Regret of keeping, at every step, the ``capacity`` candidates with the most future mass (module docstring)."""
    h = check_capacity(capacity)
    T = trace.T
    future = np.bincount(trace.indices, weights=trace.weights, minlength=T).astype(np.float64)  # float if empty
    resident = np.zeros(T, dtype=bool)
    heap: list[tuple[float, int]] = []
    count = 0
    regret = 0.0
    misses = 0
    evictions: list[tuple[int, int]] | None = [] if record else None
    for t, idx, w in trace.rows():
        resident[t] = True
        count += 1
        heapq.heappush(heap, (float(future[t]), t))
        if count > h:
            while True:
                key, q = heapq.heappop(heap)
                if resident[q] and key == future[q]:
                    break
            resident[q] = False
            count -= 1
            if record:
                evictions.append((t, q))
        present = resident[idx]
        lost = ~present & (w > 0)
        regret += float(w[lost].sum())
        misses += int(np.count_nonzero(lost))
        future[idx] -= w
        for q in idx[present & (w > 0)].tolist():
            heapq.heappush(heap, (float(future[q]), q))
        if len(heap) > 2 * h + 16:
            heap = [(key, q) for key, q in heap if resident[q] and key == future[q]]
            heapq.heapify(heap)
    return OptResult(regret, misses, h, "nm", evictions, "future-mass", 0.0, float(trace.residual.sum()))
