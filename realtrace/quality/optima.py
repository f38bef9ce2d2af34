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


def priced_optima(ref, k: int, opt_top: int | None, kind: str):
    """The ``kind`` optimum of :mod:`kvcore.optima.priced` over the ``L H`` traces of the prompt (layer-major) with
    ``B = k L H`` slots: on complete rows, priced until certified; with ``opt_top``, one solve on the ``opt_top``
    heaviest entries per row (a restriction of the complete network: every cost on complete rows) and its
    Lagrangian lower bound, climbed from the solve's prices (:func:`kvcore.optima.priced.priced_optimum`)."""
    from kvcore.optima.priced import priced_optimum

    from .exact import complete_rows

    def rows(h: int) -> np.ndarray:
        return complete_rows(ref.rows(h // ref.H, h % ref.H))

    more = {} if opt_top is None else {"top": opt_top, "max_rounds": 1, "start": "top"}
    # exits leave the network between rounds for the coupled optimum only: on needle-400-d10 at K = 128 that took
    # 14 s of CPU against 22 s, while the static one needed 81 rounds against 20 (39 s against 33 s)
    return priced_optimum(rows, ref.L * ref.H, ref.T, k * ref.L * ref.H, kind, drop=kind == "coupled", **more)


def _gap(ref, drops: np.ndarray, res) -> np.ndarray:
    """Per trace ``(L, H)``: the lazy schedule's cost on complete rows minus its share of the lower bound (the exact
    optimum's per-trace regret when certified; else that of the solved schedule, less an equal share of its
    distance to the Lagrangian bound): only the sum is a bound, a single trace's share may exceed its lazy cost."""
    from .exact import charge

    cost = np.array([[charge(ref.rows(layer, g), drops[layer, g]).sum() for g in range(ref.H)]
                     for layer in range(ref.L)])
    share = np.asarray(res.per_head).reshape(ref.L, ref.H)
    if not res.certificate.certified:
        share = share - (res.regret - res.certificate.lower_bound) / share.size
    return cost - share


def static_optimum(ref, k: int, opt_top: int | None, notes: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``OPT:static``: the total memory of ``OPT`` at ``k``, ``B = k L H`` slots, split once over the ``L H`` traces
    of the prompt by the exact static optimum (paper §8, §11: ``sum_h k_h = B`` minimizing ``sum_h OPT_h(k_h)``):
    on complete rows each trace solved alone by pricing at its share and the split certified by the exchange
    condition on the exact regrets (:mod:`kvcore.optima.static_split`); with ``opt_top``, one min-cost flow in which
    a source feeds every trace's line and the flow picks the split (:mod:`kvcore.optima.priced`), then each trace's
    solved schedule made lazy at its own ``k_h`` (:func:`realtrace.quality.schedule.lazy_drop`); a trace given no
    slot drops every position on arrival.  With ``opt_top`` one solve on the heaviest entries and the gap to the
    Lagrangian bound (:func:`priced_optima`).  ``notes`` (optional) receives the certificate."""
    from .schedule import lazy_drop

    res = priced_optima(ref, k, opt_top, "static")
    solved = res.drops.reshape(ref.L, ref.H, ref.T)
    drops = np.empty((ref.L, ref.H, ref.T), dtype=np.int64)
    for layer in range(ref.L):
        for g in range(ref.H):
            k_h = res.slots[layer * ref.H + g]
            drops[layer, g] = lazy_drop(solved[layer, g], k_h) if k_h else np.arange(ref.T)
    if notes is not None:
        notes["certificate"] = res.certificate.as_dict() | {"slots": res.slots}
    return drops, _gap(ref, drops, res)


def coupled_optimum(ref, k: int, opt_top: int | None, notes: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``OPT:coupled``: the dynamic coupled optimum (paper §8, §11) at the total memory of ``OPT`` at ``k``: one
    budget of ``B = k L H`` slots shared by every layer and KV head at every step, ``sum_h |R_{h,t}| <= B``, one
    min-cost flow over the ``L H`` traces, certified on complete rows by pricing (:mod:`kvcore.optima.priced`), made
    lazy in the coupled sense (:func:`realtrace.quality.schedule.coupled_lazy_drop`: ``min(L H (t + 1), B)``
    resident in total, a superset of the solved sets, so its cost is at most the solved one's on any rows).  With
    ``opt_top`` one solve on the heaviest entries and the gap to the Lagrangian bound (:func:`priced_optima`); per trace
    only the sum of the gap is a bound (:func:`_gap`).  ``notes`` (optional) receives the certificate."""
    from .schedule import coupled_lazy_drop

    res = priced_optima(ref, k, opt_top, "coupled")
    drops = coupled_lazy_drop(res.drops, k * ref.L * ref.H).reshape(ref.L, ref.H, ref.T)
    if notes is not None:
        notes["certificate"] = res.certificate.as_dict()
    return drops, _gap(ref, drops, res)


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
PRICED = ("OPT:static", "OPT:coupled")  # the variants that report a certificate


def variant_name(text: str) -> str | None:
    """The registered variant ``text`` names (case-insensitive: ``opt``, ``OPT:Coupled``), or ``None``."""
    return next((name for name in VARIANTS if name.lower() == text.lower()), None)


def opt_schedule(ref, name: str, k: int, opt_top: int | None, notes: dict | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """``(drops, gap)`` of the variant ``name`` at budget ``k`` (module docstring); ``notes`` (optional) receives
    what a variant reports beside them (``OPT:static`` and ``OPT:coupled``: the certificate)."""
    if name in PRICED:
        return VARIANTS[name](ref, k, opt_top, notes)
    return VARIANTS[name](ref, k, opt_top)


def opt_schedules(ref, name: str, budgets, opt_top: int | None, each_head=None, notes: dict | None = None
                  ) -> dict[int, tuple[np.ndarray, np.ndarray | None]]:
    """:func:`opt_schedule` at every budget of ``budgets`` (``OPT`` builds each head's rows once for all of them and
    hands them to ``each_head``, :func:`mass_optima`; the other variants never call it); ``notes[k]`` (optional)
    receives each budget's notes."""
    if name == OPT:
        return mass_optima(ref, tuple(budgets), opt_top, each_head)
    return {k: opt_schedule(ref, name, k, opt_top, None if notes is None else notes.setdefault(k, {}))
            for k in budgets}


__all__ = ["OPT", "VARIANTS", "coupled_optimum", "mass_optima", "mass_optimum", "opt_schedule", "opt_schedules",
           "priced_optima", "static_optimum", "value_optimum", "variant_name"]
