"""Published operating points (Fig. 3) and published quality-vs-budget statements (Fig. 14).

Every number comes from ``figures/data/published.json``, one citation per point; this module only derives
quantities by stated arithmetic (memory factor ``1 / budget_fraction``) and never adds a number of its own.
"""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

from kvcore import formulas as F
from kvcore import portable_math

from . import _data
from . import _plot as P
from .published_data import citation, points
from ._style import log_scale, new_figure, titled
from .registry import figure

def _memory_factor(system: str) -> tuple[float, bool, bool] | None:
    """(memory reduction factor, derived?, paper states it?) for ``system``.

    Stated directly when the source gives a factor, else ``1 / budget_fraction`` of its largest stated budget.
    """
    stated = [p for p in points("memory_reduction") if p["system"] == system]
    if stated:
        return stated[0]["value"], False, stated[0]["paper_states"]
    budget = [p for p in points("budget_fraction") if p["system"] == system]
    if budget:
        largest = max(budget, key=lambda p: p["value"])
        return 1.0 / largest["value"], True, largest["paper_states"]
    return None


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width))


def operating_points() -> list[dict]:
    """Every point Figure 3 draws, in drawing order: ``{"n", "system", "memory" (factor or None), "derived",
    "gain" (or None), "filled", "text"}`` -- one per reported speed/throughput gain, and one per system that reports a
    memory factor but no gain."""
    systems = sorted({p["system"] for p in points("throughput_gain") + points("speedup")
                      + points("memory_reduction") + points("budget_fraction")})
    out = []
    for system in systems:
        mf = _memory_factor(system)
        gains = [p for p in points("throughput_gain") + points("speedup") if p["system"] == system]
        memory = None if mf is None else mf[0]
        derived = bool(mf and mf[1])
        mem_text = ("no memory factor stated" if mf is None else
                    f"memory {mf[0]:.3g}x" + (" (1 / reported budget)" if derived else ""))
        for p in gains:
            out.append({"system": system, "memory": memory, "derived": derived, "gain": p["value"],
                        "filled": p["paper_states"],
                        "text": f"{system}: {p['value']:g}x {p['quantity'].replace('_', ' ')} ({p['context']}); "
                                f"{mem_text}"})
        if not gains and mf is not None:
            out.append({"system": system, "memory": memory, "derived": derived, "gain": None, "filled": mf[2],
                        "text": f"{system}: {mem_text}; no speed reported"})
    for n, p in enumerate(out, 1):
        p["n"] = n
    return out


@figure("3", "fig03_operating_points", "Reported operating points of cited systems",
        "gain = S / k (Eq. 3) against memory factor S / k",
        "Reported speed or throughput gains of the cited systems against their reported KV-memory reduction "
        "(from figures/data/published.json, one citation per point; a memory factor marked '1 / reported budget' is "
        "derived as 1 / the reported budget fraction).  The line is Eq. 3's memory-bound prediction gain = S / k "
        "(Eq. 3) against memory factor S / k.  Systems reporting no memory factor sit in the right-hand strip, "
        "systems reporting no speed in the bottom strip.  Filled markers: the paper's own text states the number; "
        "hollow: the cited abstract only.  Each marker's number is its legend entry.  The studies differ in models, "
        "baselines and hardware (paper Section 9).", number=3)
def fig3(data: dict | None = None):
    """Published operating points (no measured data)."""
    _data.mapping("3", data, set())
    fig = new_figure(12.6, 6.8, left=0.07, right=0.985, top=0.88, bottom=0.1)
    gs = fig.add_gridspec(2, 3, width_ratios=(10, 1.2, 7.6), height_ratios=(7, 1), wspace=0.04, hspace=0.06,
                          right=0.985)
    ax = fig.add_subplot(gs[0, 0])
    side = fig.add_subplot(gs[0, 1], sharey=ax)
    bottom = fig.add_subplot(gs[1, 0], sharex=ax)
    diagonal = portable_math.logspace(0, 1.3, 50)
    P.line(ax, "formula/S/k", diagonal, diagonal, color="#7f7f7f", ls="--",
           label="Eq. 3: gain = S/k (memory-bound prediction)")
    pts = operating_points()
    systems = list(dict.fromkeys(p["system"] for p in pts))
    markers = dict(zip(systems, "os^Dvp<>h"))
    handles = []
    for p in pts:
        color = f"C{systems.index(p['system'])}"
        where, x, y = ((side, 0.5, p["gain"]) if p["memory"] is None else
                       (bottom, p["memory"], 0.5) if p["gain"] is None else (ax, p["memory"], p["gain"]))
        handles.append(P.line(where, f"published/{p['n']}", [x], [y], markers[p["system"]], color=color, ms=9,
                              mew=1.5, mfc=color if p["filled"] else "white",
                              label=_wrap(f"{p['n']}  {p['text']}", 66)))
        where.annotate(str(p["n"]), (x, y), xytext=(7, 5), textcoords="offset points", fontsize=8, fontweight="bold",
                       color=color)
    waste = {p["quantity"]: p for p in points("memory_waste_fraction_before") + points("memory_waste_fraction_after")}
    if waste:
        before = waste.get("memory_waste_fraction_before")
        after = waste.get("memory_waste_fraction_after")
        parts = ["vLLM (paging, no eviction, so not drawn):"]
        if before:
            parts.append(f"KV memory wasted {before['low']:.0%}-{before['high']:.0%} before,")
        if after:
            parts.append(f"below {after['high']:.0%} with paging ({citation(after['source'])})")
        handles.append(Line2D([], [], ls="none", label=_wrap(" ".join(parts), 66)))
    ax.set_xscale(log_scale())
    ax.set_yscale(log_scale())
    ax.set_xlim(1, 20)
    ax.set_ylim(1, 40)
    for axis, ticks in ((ax.xaxis, (1, 2, 5, 10, 20)), (ax.yaxis, (1, 2, 5, 10, 20, 40))):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FixedFormatter([str(t) for t in ticks]))
        axis.set_minor_formatter(NullFormatter())
    ax.tick_params(labelbottom=False)
    ax.set_ylabel("reported speed / throughput gain (x, log scale)")
    ax.set_title("points: published (cited per point); line: gain = S/k", fontsize=9)
    side.set_xlim(0, 1)
    side.set_xticks([])
    side.tick_params(labelleft=False)
    side.set_xlabel("no memory\nfactor stated", fontsize=8)
    side.set_ylabel("")
    side.yaxis.label.set_visible(False)
    bottom.set_ylim(0, 1)
    bottom.set_yticks([])
    bottom.set_ylabel("no speed\nreported", fontsize=8, rotation=0, ha="right", va="center")
    bottom.set_xlabel("reported KV-memory reduction factor S/k (x, log scale)")
    fig.legend(handles=[ax.get_lines()[0], *handles], loc="upper right", bbox_to_anchor=(0.985, 0.88), fontsize=7.5,
               title="filled: the paper states the number; hollow: cited abstract only", title_fontsize=7.5,
               borderaxespad=0, labelspacing=0.55)
    titled(fig, "Figure 3: reported operating points of cited systems")
    return fig


FIG14_N = 4096
FIG14_EXPONENTS = (0.8, 1.0, 1.2, 1.5)


def budget_statements() -> list[dict]:
    """Figure 14's rows, one per system: ``{"system", "points": [{"fraction", "derived", "stated", "quality"}]}``,
    largest budget first.  A budget is a reported budget fraction, or 1 / a memory factor the data file flags as a
    token budget (fewer tokens kept); SnapKV's "memory efficiency" and KIVI's peak-memory factor (quantization,
    weights included) are not budgets."""
    rows: dict[str, list[dict]] = {}
    for p in points("budget_fraction"):
        rows.setdefault(p["system"], []).append({"fraction": p["value"], "derived": False,
                                                 "stated": p["paper_states"], "quality": p.get("quality", "")})
    for p in points("memory_reduction"):
        if p.get("token_budget_equivalent") and p["system"] not in rows:
            rows[p["system"]] = [{"fraction": 1.0 / p["value"], "derived": True, "stated": p["paper_states"],
                                  "quality": p.get("quality", "")}]
    out = [{"system": system, "points": sorted(pts, key=lambda q: -q["fraction"])} for system, pts in rows.items()]
    return sorted(out, key=lambda r: (-r["points"][0]["fraction"], r["system"]))


@figure("14", "fig14_quality_budget", "Published quality vs budget",
        "retained mass = 1 - M_tail(s, k), M_tail(s, k) = sum_{i>k} i^-s / sum_{i<=n} i^-s",
        "(a) Budgets (fraction of the full cache) at which cited papers state their quality, one row per system, "
        "with the statement quoted in full (figures/data/published.json).  Circle: a budget the source reports; "
        "square: 1 / a reported memory factor that comes from keeping fewer tokens.  Filled: the paper's own text "
        "states the budget; hollow: the cited abstract only.  No numeric quality values are plotted: neither the "
        "paper nor the cited abstracts give one at these budgets.  (b) The Theorem 4 model of the same curve, "
        "retained mass = 1 - M_tail(s, k), M_tail(s, k) = sum_{i>k} i^-s / sum_{i<=n} i^-s for Zipf rows over "
        f"n = {FIG14_N} tokens, with the budgets of (a) as dotted vertical lines.", number=14)
def fig14(data: dict | None = None):
    """Published budget statements and the Zipf retained-mass model (no measured data)."""
    _data.mapping("14", data, set())
    rows = budget_statements()
    fig = new_figure(13, 10, left=0.09, right=0.98, top=0.92, bottom=0.07)
    gs = fig.add_gridspec(2, 2, width_ratios=(4, 6), height_ratios=(1.15, 1), hspace=0.32, wspace=0.02)
    ax = fig.add_subplot(gs[0, 0])
    quotes = fig.add_subplot(gs[0, 1], sharey=ax)
    bx = fig.add_subplot(gs[1, :])
    for y, row in enumerate(rows):
        for q in row["points"]:
            P.line(ax, f"budget/{row['system']}/{q['fraction']:g}", [q["fraction"]], [y], "s" if q["derived"] else "o",
                   color="C0", ms=9, mfc="C0" if q["stated"] else "white", mew=1.5)
        text = "  ".join(f"{q['fraction']:.3g}{' = 1/memory factor' if q['derived'] else ''}: {q['quality']}."
                         .replace("..", ".") for q in row["points"])
        quotes.text(0.02, y, _wrap(text, 92), fontsize=8, va="center", ha="left",
                    color="#333333", transform=quotes.get_yaxis_transform())
    ax.set_xscale(log_scale())
    ax.set_xlim(0.004, 1.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), [r["system"] for r in rows])
    ax.set_ylabel("cited system")
    ax.set_xlabel("retained budget (fraction of the full KV cache, log scale)")
    ax.set_title("(a) published budget statements", fontsize=9)
    kinds = sorted({(q["derived"], not q["stated"]) for r in rows for q in r["points"]})
    proxies = [Line2D([], [], ls="none", marker="s" if derived else "o", color="C0", mfc="white" if hollow else "C0",
                      mew=1.5, ms=8, label=("1 / reported memory factor" if derived else "reported budget")
                      + (", cited abstract only" if hollow else ", the paper's text states it"))
               for derived, hollow in kinds]
    ax.legend(handles=proxies, loc="upper left", fontsize=7.5)
    quotes.set_axis_off()
    quotes.set_title("the statement at that budget, as the data file quotes it", fontsize=9, loc="left")

    ks = np.unique(np.round(portable_math.logspace(0, portable_math.log(FIG14_N, 10), 120)).astype(int))
    for s in FIG14_EXPONENTS:
        kept = [1 - F.zipf_tail_mass(s, FIG14_N, int(k)) for k in ks]
        P.line(bx, f"model/s={s}", ks / FIG14_N, kept, label=f"Zipf s = {s}: 1 − M_tail(s, k)")
    budgets = sorted({q["fraction"] for r in rows for q in r["points"]})
    for frac in budgets:
        names = ", ".join(r["system"] for r in rows if any(q["fraction"] == frac for q in r["points"]))
        P.line(bx, f"published/{frac:g}", [frac, frac], [0, 1.02], color="#999999", ls=":", lw=1.2,
               label=f"budget {frac:.3g} ({names})")
    bx.set_xscale(log_scale())
    bx.set_ylim(0, 1.02)
    bx.set_xlabel(f"retained budget k/n (fraction of n = {FIG14_N} tokens, log scale)")
    bx.set_ylabel("attention mass retained by the top-k (fraction)")
    bx.set_title("(b) model: 1 − M_tail(s,k); dotted: the published budgets of (a)", fontsize=9)
    box = bx.get_position()
    bx.set_position([box.x0, box.y0, box.width * 0.76, box.height])
    bx.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=8)
    titled(fig, "Figure 14: published quality statements vs budget, and the Theorem 4 model")
    return fig
