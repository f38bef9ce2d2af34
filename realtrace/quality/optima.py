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
    from .exact import lazy_optimum

    solved = [[lazy_optimum(ref.rows(layer, g), k, opt_top) for g in range(ref.H)] for layer in range(ref.L)]
    return (np.array([[d for d, _, _ in row] for row in solved]),
            np.array([[cost - lower for _, lower, cost in row] for row in solved]))


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


VARIANTS = {OPT: mass_optimum, OPT + ":value": value_optimum}


def variant_name(text: str) -> str | None:
    """The registered variant ``text`` names (case-insensitive: ``opt``, ``OPT:Coupled``), or ``None``."""
    return next((name for name in VARIANTS if name.lower() == text.lower()), None)


def opt_schedule(ref, name: str, k: int, opt_top: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(drops, gap)`` of the variant ``name`` at budget ``k`` (module docstring)."""
    return VARIANTS[name](ref, k, opt_top)


__all__ = ["OPT", "VARIANTS", "mass_optimum", "opt_schedule", "value_optimum", "variant_name"]
