"""Quality floors against working sets, and adaptive against fixed budgets (paper §7-§8, §11; claims
``quality-floor-working-set``, ``long-range-floor`` and ``adaptive-budget-quality``).

Panel (a): each prompt's quality floor (the smallest budget from which the replayed answer stays right and close to
the full cache's) against its measured working set (the mean over heads of the peak persistent heavy set), one
marker per policy, with the line ``floor = working set`` that Theorem 4's reading predicts; a floor above the budget
grid is drawn at twice its top.  Panel (b): prompts passing on the heterogeneous mix, one fixed budget against the
heavy-set-sized split of the same total, summed over the fixed budgets compared.  Without data the figure draws
only the prediction.
"""

from __future__ import annotations

from . import _data
from . import _plot as P
from ._style import log_scale, new_figure, titled
from .registry import figure

MARKERS = ("o", "s", "^", "D", "v", "P")


def _ws_data(data: dict | None) -> dict:
    d = _data.mapping("workingset", data, {"prompts", "floors", "grid", "adaptive", "fixed", "notes"})
    if not d:
        return {}
    grid = d.get("grid")
    if not isinstance(grid, list) or not grid:
        raise _data.fail("workingset", "grid must be a non-empty list of budgets")
    grid = [_data.integer("workingset", f"grid[{i}]", g) for i, g in enumerate(grid)]
    prompts = _data.records("workingset", d, "prompts", {"ws": "req"}, text=("name", "group"))
    names = {p["name"] for p in prompts}
    floors = d.get("floors", {})
    if not isinstance(floors, dict):
        raise _data.fail("workingset", "floors must map a policy to {prompt: floor or null}")
    clean = {}
    for pol, fl in floors.items():
        if not isinstance(fl, dict) or set(fl) - names:
            raise _data.fail("workingset", f"floors[{pol!r}] must map prompts of 'prompts' to a floor or null")
        clean[pol] = {q: None if f is None else _data.integer("workingset", f"floors[{pol!r}][{q!r}]", f)
                      for q, f in fl.items()}
    adaptive = d.get("adaptive", {})
    if not isinstance(adaptive, dict) or not all(isinstance(x, dict) and set(x) == {"fixed", "adaptive"}
                                                 for x in adaptive.values()):
        raise _data.fail("workingset", "adaptive must map a policy to {'fixed': passing, 'adaptive': passing}")
    adapt = {pol: {k: _data.integer("workingset", f"adaptive[{pol!r}].{k}", x[k], low=0) for k in x}
             for pol, x in adaptive.items()}
    return {"grid": grid, "prompts": prompts, "floors": clean, "adaptive": adapt,
            "fixed": str(d.get("fixed", "")), "notes": _data.sentences("workingset", d)}


def workingset_notes(data: dict | None) -> list[str]:
    """The computed sentences the overlay carries (the claims' findings), else none."""
    return _ws_data(data).get("notes", [])


FORMULA = ("floor = working set: min{K : answer right and KL <= 0.1 at every budget >= K} = "
           "mean_h max_t |U_[t-W,t) H_s(0.01)|")


@figure("workingset", "workingset_floors", "Quality floors against working sets; adaptive against fixed budgets",
        FORMULA,
        "Paper §7-§8 and §11 in the model: (a) each prompt's quality floor against its measured persistent heavy "
        "set "
        f"(the prediction {FORMULA}, W = 32 rows, 90 heads), one marker per eviction policy; floors above the "
        "budget grid at twice its top.  (b) prompts passing on the mixed workload, one fixed budget against budgets "
        "sized to each prompt's working set with the same total.  Without data: the prediction only.",
        notes=workingset_notes)
def workingset(data: dict | None = None):
    """Floors against working sets, and adaptive against fixed budgets.

    Data: ``{"grid": [K, ...], "prompts": [{"name": str, "group": str, "ws": float}], "floors": {policy: {prompt:
    floor or null}}, "adaptive": {policy: {"fixed": passing, "adaptive": passing}}, "fixed": str, "notes": [str]}``
    -- the budget grid, each counted prompt's working set, each policy's floor per prompt (null: above the grid), the
    prompts passing on the heterogeneous mix under each allocation summed over the fixed budgets ``fixed`` names.
    """
    z = _ws_data(data)
    fig = new_figure(11, 5.0, left=0.07, right=0.98, bottom=0.24, wspace=0.28, notes=workingset_notes(data))
    ax, bx = fig.subplots(1, 2)
    grid = z.get("grid") or [16, 32, 64, 128, 256]
    top = 2 * grid[-1]
    P.line(ax, "prediction/floor = working set", [grid[0] / 2, top], [grid[0] / 2, top], "--", color="0.5",
           label="prediction: floor = working set")
    ws = {p["name"]: p["ws"] for p in z.get("prompts", [])}
    for j, (pol, floors) in enumerate(z.get("floors", {}).items()):
        names = sorted(floors, key=lambda q: ws[q])
        P.line(ax, f"measured/{pol}", [ws[q] for q in names], [floors[q] or top for q in names], MARKERS[j % 6],
               color=f"C{j}", mfc="none", ms=7, label=pol)
    ax.axhline(top, color="0.8", lw=0.8)
    ax.set_xscale(log_scale(base=2))
    ax.set_yscale(log_scale(base=2))
    ax.set_yticks([*grid, top], [*map(str, grid), f"> {grid[-1]}"])
    ax.minorticks_off()
    ax.set_xlabel("working set (mean over heads of the peak heavy union)")
    ax.set_ylabel("quality floor K (per layer and KV head)")
    ax.set_title("(a) floor against working set, per prompt", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=7.5)
    adapt = z.get("adaptive", {})
    pols = list(adapt) or ["(no data)"]
    xs = list(range(len(pols)))
    P.bars(bx, "measured/fixed", [x - 0.2 for x in xs], [adapt.get(p, {}).get("fixed", 0) for p in pols], 0.4,
           color="C7", label="one fixed budget")
    P.bars(bx, "measured/adaptive", [x + 0.2 for x in xs], [adapt.get(p, {}).get("adaptive", 0) for p in pols],
           0.4, color="C2", label="sized to each working set, same total")
    bx.set_xticks(xs, pols)
    bx.set_xlabel("policy")
    bx.set_ylabel(f"prompts passing, summed over fixed K {z.get('fixed', '')}".strip())
    bx.set_title("(b) mixed workload at equal total memory", fontsize=9)
    bx.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7.5)
    titled(fig, "Quality floors are working sets: measured in the model")
    return fig
