"""Budgets across heads (paper §8, §11): summed optimal regret against the total budget for the uniform split, the
exact static split and the dynamic coupled optimum.

Without data the figure draws the static question on stylized convex curves ``OPT_h(k) = M_h 2^(-k/s_h)`` (the
dynamic optimum needs traces); with data, the exact values measured on a trace set
(:func:`theorems.results.allocation.allocation_study`).
"""

from __future__ import annotations

from kvcore import portable_math
from kvcore.optima.allocation import allocation_regret, greedy_allocation, uniform_allocation

from . import _data
from . import _plot as P
from ._style import log_scale, new_figure, titled
from .registry import figure

# stylized heads (mass M_h, half-life s_h in slots) and the budgets of the formula-only view
ALLOC_HEADS = ((100.0, 2.0), (100.0, 8.0), (60.0, 24.0), (20.0, 4.0))
ALLOC_PER_HEAD = (1, 2, 4, 8, 16, 32)
SERIES = ("uniform", "static", "dynamic")
LABELS = {"uniform": "uniform split (B/H slots per head)", "static": "static optimum (greedy on exact convex curves)",
          "dynamic": "dynamic coupled optimum (one flow, B shared at every step)"}


def stylized_curves():
    return [lambda k, m=m, s=s: m * portable_math.power(2.0, -k / s) for m, s in ALLOC_HEADS]


def _alloc_data(data: dict | None) -> dict:
    d = _data.mapping("alloc", data, {"budgets", *SERIES, "heads", "trace"})
    if not d:
        curves = stylized_curves()
        budgets = [len(curves) * b for b in ALLOC_PER_HEAD]
        return {"budgets": budgets, "heads": len(curves), "trace": "stylized heads M_h 2^(-k/s_h), (M_h, s_h) in "
                + ", ".join(f"({m:g}, {s:g})" for m, s in ALLOC_HEADS),
                "uniform": [allocation_regret(curves, uniform_allocation(len(curves), B)) for B in budgets],
                "static": [allocation_regret(curves, greedy_allocation(curves, B)) for B in budgets], "dynamic": []}
    budgets = d.get("budgets")
    if not isinstance(budgets, list) or not budgets:
        raise _data.fail("alloc", "budgets must be a non-empty list of totals")
    out = {"budgets": [_data.integer("alloc", f"budgets[{i}]", b) for i, b in enumerate(budgets)],
           "heads": _data.integer("alloc", "heads", d.get("heads", 1)), "trace": str(d.get("trace", ""))}
    for name in SERIES:
        ys = d.get(name, [])
        if not isinstance(ys, list) or len(ys) not in (0, len(budgets)):
            raise _data.fail("alloc", f"{name} must be a list of one regret per budget")
        out[name] = [_data.number("alloc", f"{name}[{i}]", y, nonneg=True) for i, y in enumerate(ys)]
    return out


def alloc_notes(data: dict | None) -> list[str]:
    """The largest relative gaps, from the plotted values."""
    z = _alloc_data(data)
    out = []
    pairs = [("static", "uniform", "the static optimum below the uniform split"),
             ("dynamic", "static", "the dynamic coupled optimum below the static optimum")]
    for lo, hi, what in pairs:
        gaps = [(1 - a / b, B) for a, b, B in zip(z[lo], z[hi], z["budgets"]) if b > 0]
        if gaps:
            g, B = max(gaps)
            out.append(f"Largest gap of {what}: {g:.1%} at B = {B}.")
    return out


@figure("alloc", "allocation_regret_budget", "Budgets across heads: uniform, static optimum, coupled optimum",
        "static: min sum_h OPT_h(k_h) s.t. sum_h k_h = B; dynamic: min sum_h regret_h s.t. sum_h |R_h,t| <= B for every t",
        "Summed exact no-refetch regret (paper Eq. 4) of H heads against the total budget B (paper §8, §11): the "
        "uniform split, the static optimum static: min sum_h OPT_h(k_h) s.t. sum_h k_h = B; dynamic: min sum_h "
        "regret_h s.t. sum_h |R_h,t| <= B for every t (one min-cost flow, every head's tokens on one line of B "
        "units).  Without data: stylized convex curves and the static question only.", notes=alloc_notes)
def alloc(data: dict | None = None):
    """Regret against total budget for each allocation.

    Data: ``{"budgets": [B, ...], "uniform": [regret, ...], "static": [...], "dynamic": [...], "heads": int,
    "trace": str}`` -- summed exact NM regret of the uniform split, the exact static optimum and the dynamic coupled
    optimum at each total budget (one value per budget; an empty or missing series is not drawn).
    """
    z = _alloc_data(data)
    fig = new_figure(9, 5.2, left=0.09, right=0.97, bottom=0.13, notes=alloc_notes(data))
    ax = fig.add_subplot()
    styles = {"uniform": ("o-", "C0"), "static": ("s-", "C2"), "dynamic": ("^-", "C3")}
    for name in SERIES:
        if z[name]:
            fmt_, color = styles[name]
            P.line(ax, name, z["budgets"], z[name], fmt_, color=color, mfc="none", label=LABELS[name])
    ax.set_xscale(log_scale(base=2))
    ax.set_xticks(z["budgets"], [str(b) for b in z["budgets"]])
    ax.minorticks_off()
    ax.set_xlabel(f"total budget B (slots over {z['heads']} heads, log scale)")
    ax.set_ylabel("summed regret (attention mass lost)")
    ax.set_title(z["trace"], fontsize=8)
    ax.legend(loc="upper right", fontsize=8)
    titled(fig, "Budgets across heads: regret against total memory")
    return fig
