"""Displaced attention mass against attention-output error per layer and KV head (claim
``displaced-mass-output-error``; paper §3, §9), from the committed per-head stream means of a quality sweep.

Left: every (head, run, prompt) point, displaced mass against output error, coloured by layer group, with the line
``error = displaced`` for scale.  Right: one point per head, the coefficient of variation of its factor
error/displaced across the runs against its rank correlation (95% bootstrap interval), coloured by layer group; the
declared bounds dashed, so the upper left holds the heads that pass both readings.  Without data the panels say so.
"""

from __future__ import annotations

from . import _data
from . import _plot as P
from .quality import _interval, _panels
from ._style import titled
from .registry import figure

PANELS = {"scatter": ("displaced attention mass m (stream mean)", "attention-output error ||O_R - O|| / ||O||"),
          "heads": ("CV of error / m across runs (per head)", "Spearman rho(m, error) per head")}
GROUP_COLOURS = {"early": "C0", "middle": "C1", "late": "C2"}   # the layer groups of realtrace.press.eval


def _heads_data(data: dict | None) -> dict:
    d = _data.mapping("heads", data, {"points", "heads", "bounds", "notes"})
    if not d:
        return {}
    pts = d.get("points")
    if not isinstance(pts, dict) or not pts or set(pts) - set(GROUP_COLOURS):
        raise _data.fail("heads", f"points must map layer groups ({', '.join(GROUP_COLOURS)}) to displaced and error")
    points = {}
    for g, s in pts.items():
        clean = _data.series("heads", s, "xy") if isinstance(s, dict) and set(s) == {"xy"} else None
        if clean is None or set(clean) != {"displaced", "error"} or len(clean["displaced"]) != len(clean["error"]):
            raise _data.fail("heads", f"points[{g!r}] must be {{'xy': {{'displaced': [...], 'error': [...]}}}} of "
                                      "equal length")
        points[g] = clean
    heads = _data.records("heads", d, "heads", {"layer": "req", "kv_head": "req", "cv": "req"},
                          text=("group", "rho", "ci"))
    raw = d.get("heads", [])
    for i, (h, r) in enumerate(zip(heads, raw)):
        if h["group"] not in GROUP_COLOURS:
            raise _data.fail("heads", f"heads[{i}].group must be one of {', '.join(GROUP_COLOURS)}")
        h["rho"] = _data.number("heads", f"heads[{i}].rho", r.get("rho"))
        h["ci"] = _interval("heads", f"heads[{i}].ci", r.get("ci"))
    bounds = d.get("bounds")
    if not isinstance(bounds, dict) or set(bounds) != {"rho", "cv"}:
        raise _data.fail("heads", "bounds must give rho and cv")
    return {"points": points, "heads": heads, "bounds": {k: _data.number("heads", f"bounds.{k}", v)
                                                         for k, v in bounds.items()},
            "notes": _data.sentences("heads", d)}


def heads_notes(data: dict | None) -> list[str]:
    """The computed sentences the overlay carries (the claim's findings), else none."""
    return _heads_data(data).get("notes", [])


@figure("heads", "quality_heads_displaced_error", "Displaced mass against output error per layer and KV head",
        "e = ||O_R - O|| / ||O|| = m ||O_R - Vbar_E|| / ||O||, m = 1 - exp(L_R - L); rho = Spearman(m, e) per head",
        "The claim displaced-mass-output-error (paper §3: to first order an eviction's output error is the displaced "
        "mass times how far the evicted values lie; with typical values proportional to it): per layer and KV head "
        "of the model, the stream means of displaced mass and output error for each schedule, budget and prompt of "
        "the committed sweep (realtrace/data/quality_heads).  Left: every point, by layer group.  Right: each head's "
        "coefficient of variation of the factor error/displaced across the runs against its rank correlation (95% "
        "bootstrap interval); dashed: the declared bounds (upper left: both readings pass).", notes=heads_notes)
def heads(data: dict | None = None):
    """Displaced mass and output error per head.

    Data: ``{"points": {group: {"xy": {"displaced": [...], "error": [...]}}}, "heads": [{"layer", "kv_head", "group",
    "rho", "ci": [low, high], "cv"}, ...], "bounds": {"rho", "cv"}, "notes": [sentence, ...]}`` -- the per-head means of
    :func:`theorems.results.heads.arrays` and the statistics of :func:`theorems.results.heads.heads_table`.
    """
    z = _heads_data(data)
    fig, drawn = _panels(heads_notes(data), 4.8, 0.2, PANELS, bool(z))
    for ax, panel in drawn:
        if panel == "scatter":
            for g, s in z["points"].items():
                P.line(ax, f"scatter/{g}", s["displaced"], s["error"], ".", color=GROUP_COLOURS[g], ms=2, alpha=0.4,
                       label=f"{g} layers")
            top = max(max(s["displaced"]) for s in z["points"].values())
            ax.plot([0, top], [0, top], ":", color="0.4", lw=0.8, label="error = displaced")
            ax.legend(loc="upper left", fontsize=7)
            continue
        for g in GROUP_COLOURS:
            mine = [h for h in z["heads"] if h["group"] == g]
            if mine:
                P.errorbar(ax, f"heads/{g}", [h["cv"] for h in mine], [h["rho"] for h in mine],
                           [h["ci"][0] for h in mine], [h["ci"][1] for h in mine], fmt="o", ms=3, lw=0.6,
                           color=GROUP_COLOURS[g])   # the left panel's colours and legend
        ax.axhline(z["bounds"]["rho"], ls="--", color="0.3", lw=0.8)
        ax.axvline(z["bounds"]["cv"], ls="--", color="0.3", lw=0.8)
    titled(fig, "Displaced mass against attention-output error per head (displaced-mass-output-error)")
    return fig
