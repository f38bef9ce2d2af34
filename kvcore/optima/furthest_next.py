"""The paper's "Belady analog" for the recompute model, as a named offline heuristic (paper Section 4).

Rule: on a fault, evict the evictable resident item whose next request -- for a trace built from attention, its
next attention above the threshold -- is furthest in the future (never requested again counts as infinitely far),
ties to the smaller id.  With unit costs and one request per step this is Belady's rule and optimal
(:func:`kvcore.optima.belady`).  With fault costs that differ between items (recompute weights growing with
position, SPEC section 2) it is not: it ignores what a fault costs.  Smallest counterexample in the toolkit
(``adversary.counterexamples.position_cost_counterexample``, ``k = 3``): the rule pays 1.5, the min-cost-flow optimum
:func:`kvcore.optima.rm_opt` 7/6.

Runs through the checked engine (:func:`kvcore.engine.run_rm`) with an offline chooser that was handed the
whole trace; it is an offline reference, not an online policy, and is never registered as one.
"""

from __future__ import annotations

import numpy as np

from ..engine import check_capacity, run_rm
from ..traces import PagingTrace
from .result import OptResult
from .rm_flow import next_request


class _FurthestNextRequest:
    """Engine-interface chooser that knows every item's next request (built from the whole trace up front)."""

    name = "furthest-next-request"
    deterministic = True

    def __init__(self, trace: PagingTrace):
        step_of, nxt = next_request(trace)
        next_step = np.where(nxt >= 0, step_of[nxt], trace.T)  # the step of the item's next request, T if none
        self._next = dict(zip(zip(step_of.tolist(), trace.items.tolist()), next_step.tolist()))

    def reset(self, capacity, rng, model="rm"):
        self._when: dict[int, int] = {}

    def admit(self, t, item, cost):
        self._when[item] = self._next[(t, item)]

    def hit(self, t, item, cost):
        self._when[item] = self._next[(t, item)]

    def observe(self, t, items, weights):
        pass

    def evict(self, t, need, protected):
        cand = sorted((i for i in self._when if i not in protected), key=lambda i: (-self._when[i], i))[:need]
        for i in cand:
            del self._when[i]
        return cand


def furthest_next_heuristic(trace: PagingTrace, capacity: int, record: bool = False) -> OptResult:
    """Cost of the furthest-next-request rule with ``capacity`` slots (module docstring); not optimal in general."""
    h = check_capacity(capacity)
    res = run_rm(_FurthestNextRequest(trace), trace, h, record=record)
    return OptResult(res.cost, res.misses, h, "rm", res.evictions, solver="furthest-next-request")
