"""The result type shared by every offline optimum and reference in :mod:`kvcore.optima`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class OptResult:
    """Outcome of an offline optimum (or of the future-mass heuristic) on one trace.

    ``cost``
        RM: total fault cost of the schedule.  NM: its regret (paper Eq. 4), total stored mass minus retained mass.
    ``misses``
        RM: requests that fault (cold misses and zero-cost arrivals included).  NM: stored entries ``a[t, i] > 0``
        whose token is not resident at step ``t``.  It belongs to the returned schedule: two optimal schedules of
        equal cost may differ in misses.
    ``capacity``, ``model``
        The cache size the optimum was run with (``h`` in Eq. 8) and ``"rm"`` or ``"nm"``.
    ``evictions``
        With ``record=True``: ``(t, item)`` pairs, item leaves the cache at step ``t`` (RM: before the step's
        misses are admitted; NM: it is dropped at step ``t``, possibly on arrival).  Replaying them (evict every
        resident item whose scheduled step has come whenever the engine asks for room) reproduces ``cost``.
    ``solver``
        Which algorithm produced the answer (``"belady"``, ``"netsimplex"``, ``"highs"``, ``"highs+netsimplex"``
        when HiGHS' answer could not be certified and the exact simplex redid it, ``"networkx"``, ``"brute"``,
        ``"future-mass"``, ...).
    ``gap_bound``
        A proven upper bound on ``cost - OPT`` from LP duality, evaluated in exact arithmetic (0 for combinatorial
        algorithms and for the network simplex, whose integer potentials satisfy complementary slackness); see
        :mod:`kvcore.optima.mincost`.
    ``unattributed``
        NM only: the trace's total residual mass, reported and never used (the true regret of this schedule lies in
        ``[cost, cost + unattributed]``, see :mod:`kvcore.traces`).
    ``certified``
        True when the schedule is *proven* optimal in exact arithmetic.  The flow optima set it when ``gap_bound`` is
        below one unit of the costs' exact binary scale (any two schedules' costs differ by a whole number of units,
        so a smaller gap is no gap); every flow backend ends certified (an uncertified HiGHS answer is redone by the
        exact network simplex).  False for heuristics and for results that do not claim a proof.
    """

    cost: float
    misses: int
    capacity: int
    model: str
    evictions: list[tuple[int, int]] | None = None
    solver: str = ""
    gap_bound: float = 0.0
    unattributed: float = 0.0
    certified: bool = False
