"""Lower bounds and checks of the NM optima from node potentials (LP duality), on complete rows.

The NM networks of :mod:`kvcore.optima.nm_flow`, :mod:`kvcore.optima.coupled` and :mod:`kvcore.optima.priced` are
min-cost flows; any potentials ``pi`` give a lower bound on their optimum (weak duality).  Keeping each token's own
node in the inner problem -- relaxing only the line's conservation -- gives the Lagrangian bound of
:func:`lagrangian_bound`: every token picks its best residency interval against slot prices, which is tight at the
optimal prices and far tighter than summing every negative reduced cost (each token counts once, not once per exit).
It needs the complete rows and nothing else, so a solve on truncated rows (``quality --opt-top M``) can report how
far it can be from the complete rows' optimum with its own potentials.  :func:`verify` checks a priced optimum's
certificate on every exit of the complete network in exact rationals (small instances; the tests' independent
check).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .pricing import price_head


def lagrangian_bound(rows: list[np.ndarray], line_pot: np.ndarray, capacity: int) -> float:
    """A lower bound on the least regret of any no-refetch schedule of the heads ``rows`` (complete, dense
    ``(T, T)``) sharing one line of ``capacity`` slots, from any line potentials ``line_pot`` ``(T + 1,)`` (mass
    units; e.g. a solve's on truncated rows).

    Lagrangian relaxation of the line's conservation (LP duality; Ahuja, Magnanti & Orlin, *Network Flows*, 1993,
    ch. 16): with slot prices ``lambda_t = pi(L_t) - pi(L_{t + 1})``, every schedule's regret is at least
    ``total - capacity sum_t max(lambda_t, 0) - sum_{h, i} max(0, max_t (P_h(i, t) - sum_{s = i..t} lambda_s))``
    -- each token alone picks its best interval against the prices, and the capacity is paid for at every step.  At
    the optimal potentials it equals the optimum (the LP is integral).  One head with its own ``capacity``: the
    per-head optimum ``OPT``; all heads with ``B``: the coupled one, which is also below the static split."""
    lam = line_pot[:-1] - line_pot[1:]
    total = float(sum(np.tril(a).sum() for a in rows))
    bound = total - capacity * float(np.maximum(lam, 0.0).sum())
    slack = (len(line_pot) + 4) * 2.0 ** -52 * (total + capacity * float(np.abs(lam).sum()))
    for a in rows:  # the pricing kernel with every exit blocked computes only the tokens' terms
        a = np.tril(np.asarray(a, dtype=np.float64))
        T = a.shape[0]
        none = np.zeros(0, np.int64)
        got = price_head(a, (none, none), line_pot, np.zeros(T), 1, lambda t, i: t >= 0)
        bound, slack = bound + got.bound_term, slack + got.bound_slack
    return bound - slack


def verify(rows: list[np.ndarray], res) -> list[tuple[int, int, int, Fraction]]:
    """The exits of the complete network on which ``res``'s exact potentials break complementary slackness, as
    ``(head, token, step, rc)``: an unused exit with ``rc < 0`` or a used one with ``rc > 0`` (``rc = -P(i, t) +
    pi(tau) - pi(L_{t + 1})`` from the rows, summed in exact rationals).  Empty, with the simplex's certificate on
    the arcs it solved, means ``res`` (a :class:`kvcore.optima.priced.PricedResult`) is optimal on complete
    rows.  Small instances only."""
    bad = []
    for h, a in enumerate(rows):
        a = np.asarray(a, dtype=np.float64)
        line, T = res.line_potentials[0 if res.kind == "coupled" else h], a.shape[0]
        for i in range(T):
            P = Fraction(0)
            for t in range(i, T):
                if a[t, i] <= 0:
                    continue
                P += Fraction(float(a[t, i]))
                rc = -P + res.item_potentials[h][i] - line[t + 1]
                if (rc > 0) if res.drops[h, i] == t + 1 else (rc < 0):
                    bad.append((h, i, t, rc))
    return bad


__all__ = ["lagrangian_bound", "verify"]
