"""The offline optima a quality run can replay, by the name ``quality`` takes (``OPT``, ``OPT:VARIANT``).

Each variant maps the full-cache reference of one prompt (:class:`realtrace.quality.run._Reference`: complete rows
per layer and KV head, the keys and values) and a budget ``K`` to ``(drops, gap)``: the drop step of every position
of every layer and KV head ``(L, H, T)``, open loop, and per trace ``(L, H)`` the schedule's cost on complete rows
minus the optimum of the rows it was solved on (``None`` where that is not defined).  Adding a variant is one
function and one line in :data:`VARIANTS`; it is then parsed, run, reported and tested like ``OPT``.
"""

from __future__ import annotations

import numpy as np

OPT = "OPT"


def mass_optimum(ref, k: int, opt_top: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``OPT``: every layer's and KV head's exact NM optimum of the attention-mass regret (paper Eq. 4) at ``k``,
    made lazy (:func:`realtrace.quality.exact.lazy_optimum`); solved on complete rows, or on the top ``opt_top``
    entries per row with the gap reported."""
    return mass_optima(ref, (k,), opt_top)[k]


def mass_optima(ref, budgets, opt_top: int | None, each_head=None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """:func:`mass_optimum` at every budget of ``budgets``, each head's rows and trace built once for all of them;
    ``each_head(layer, g, rows, drops)`` (optional) receives each head's complete rows (numpy) and its lazy optima
    ``{k: drop}`` once solved, so a caller can charge on the same rows instead of making them again."""
    from .exact import lazy_optima

    def head(layer: int, g: int) -> list:
        rows = ref.rows(layer, g)
        out = lazy_optima(rows, budgets, opt_top)
        if each_head is not None:
            each_head(layer, g, rows.numpy(), {k: drop for k, (drop, _, _) in zip(budgets, out)})
        return out

    solved = [[head(layer, g) for g in range(ref.H)] for layer in range(ref.L)]
    return {k: (np.array([[head[b][0] for head in row] for row in solved]),
                np.array([[head[b][2] - head[b][1] for head in row] for row in solved]))
            for b, k in enumerate(budgets)}


def _traces(ref, opt_top: int | None) -> list:
    """Every layer's and KV head's trace, layer-major (index ``layer * H + g``), complete or cut to ``opt_top``."""
    return [ref.trace(layer, g, opt_top) for layer in range(ref.L) for g in range(ref.H)]


def static_optimum(ref, k: int, opt_top: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``OPT:static``: the total memory of ``OPT`` at ``k``, ``B = k L H`` slots, split once over the ``L H`` traces
    of the prompt by the exact static allocation (paper §8, §11: ``sum_h k_h = B`` minimizing ``sum_h OPT_h(k_h)``,
    :func:`kvcore.optima.allocation.certified_allocation` on the certified regret curves: the threshold allocation's
    split, exact as the curves are convex, from estimated decreases checked on exact values), then each trace's lazy exact optimum at its own ``k_h`` (:func:`realtrace.quality.exact.lazy_optimum`);
    a trace given no slot drops every position on arrival.  With ``opt_top`` the curves, the split and each optimum
    are those of the truncated rows; the gap per trace is its complete-row cost minus its truncated optimum, and the
    summed truncated optimum lower-bounds the complete-row static optimum (every curve only falls under truncation)."""
    from kvcore.optima.allocation import RegretCurve, certified_allocation

    from .exact import charge, lazy_optimum

    curves = [RegretCurve(tr) for tr in _traces(ref, opt_top)]
    slots = certified_allocation(curves, k * ref.L * ref.H, limit=ref.T)
    drops = np.empty((ref.L, ref.H, ref.T), dtype=np.int64)
    gap = np.empty((ref.L, ref.H))
    for layer in range(ref.L):
        for g in range(ref.H):
            rows, k_h = ref.rows(layer, g), slots[layer * ref.H + g]
            if k_h == 0:
                drops[layer, g] = np.arange(ref.T)
                lower = cost = float(charge(rows, drops[layer, g]).sum())
            else:
                drops[layer, g], lower, cost = lazy_optimum(rows, k_h, opt_top)
            gap[layer, g] = cost - lower
    return drops, gap


def coupled_optimum(ref, k: int, opt_top: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``OPT:coupled``: the dynamic coupled optimum (paper §8, §11) at the total memory of ``OPT`` at ``k``: one
    budget of ``B = k L H`` slots shared by every layer and KV head at every step, ``sum_h |R_{h,t}| <= B``, one
    certified min-cost flow over the ``L H`` traces (:func:`kvcore.optima.coupled.coupled_schedule`), made lazy in
    the coupled sense (:func:`realtrace.quality.schedule.coupled_lazy_drop`: ``min(L H (t + 1), B)`` resident in
    total, a superset of the solved sets, so its cost is at most the solved one's on any rows).  The gap per trace
    is its complete-row cost minus its share of the solved optimum; only the sum is a bound (the complete-row cost
    minus the optimum of the rows solved on, complete or cut to ``opt_top``: that optimum lower-bounds the exact
    one); a single trace's share may exceed its lazy cost."""
    from kvcore.optima.coupled import coupled_schedule

    from .exact import charge
    from .schedule import coupled_lazy_drop

    solved, res = coupled_schedule(_traces(ref, opt_top), k * ref.L * ref.H)
    drops = coupled_lazy_drop(solved, k * ref.L * ref.H).reshape(ref.L, ref.H, ref.T)
    cost = np.array([[charge(ref.rows(layer, g), drops[layer, g]).sum() for g in range(ref.H)]
                     for layer in range(ref.L)])
    return drops, cost - np.asarray(res.per_head).reshape(ref.L, ref.H)


def value_optimum(ref, k: int, opt_top: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``OPT:value``: every layer's and KV head's exact NM optimum of the value-aware surrogate at ``k`` -- the lost
    entries' ``a[t, i] ||v_i - o_t||``, ``o_t`` the full-cache output of the KV head (paper §3, §9;
    :mod:`realtrace.quality.value_cost`) -- made lazy like ``OPT``; ``gap`` is in the same value units."""
    from .value_cost import value_costs
    from .value_cost import value_optimum as solve

    solved = [[solve(value_costs(ref.rows(layer, g).numpy(), ref.values(layer, g)), k, opt_top) for g in range(ref.H)]
              for layer in range(ref.L)]
    return (np.array([[d for d, _, _ in row] for row in solved]),
            np.array([[cost - lower for _, lower, cost in row] for row in solved]))


VARIANTS = {OPT: mass_optimum, "OPT:static": static_optimum, "OPT:coupled": coupled_optimum, "OPT:value": value_optimum}


def variant_name(text: str) -> str | None:
    """The registered variant ``text`` names (case-insensitive: ``opt``, ``OPT:Coupled``), or ``None``."""
    return next((name for name in VARIANTS if name.lower() == text.lower()), None)


def opt_schedule(ref, name: str, k: int, opt_top: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(drops, gap)`` of the variant ``name`` at budget ``k`` (module docstring)."""
    return VARIANTS[name](ref, k, opt_top)


def opt_schedules(ref, name: str, budgets, opt_top: int | None, each_head=None
                  ) -> dict[int, tuple[np.ndarray, np.ndarray | None]]:
    """:func:`opt_schedule` at every budget of ``budgets`` (``OPT`` builds each head's rows once for all of them and
    hands them to ``each_head``, :func:`mass_optima`; the other variants never call it)."""
    if name == OPT:
        return mass_optima(ref, tuple(budgets), opt_top, each_head)
    return {k: opt_schedule(ref, name, k, opt_top) for k in budgets}


__all__ = ["OPT", "VARIANTS", "coupled_optimum", "mass_optima", "mass_optimum", "opt_schedule", "opt_schedules",
           "static_optimum", "value_optimum", "variant_name"]
