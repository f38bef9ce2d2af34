"""Published operating points (Fig. 3) and published quality-vs-budget statements (Fig. 14).

Every number comes from ``figures/data/published.json``, one citation per point; this module only derives
quantities by stated arithmetic (memory factor ``1 / budget_fraction``) and never adds a number of its own.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

from kvcore import formulas as F

from . import _data
from .published_data import citation, points
from ._style import new_figure, titled
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


@figure("3", "fig03_operating_points", "Reported operating points of cited systems",
        "gain = S / k (Eq. 3) against memory factor S / k",
        "Reported speed or throughput gains of the cited systems against their reported KV-memory reduction "
        "(from figures/data/published.json, one citation per point; a memory factor marked 'derived' is "
        "1 / reported budget fraction).  The line is Eq. 3's memory-bound prediction gain = S / k (Eq. 3) against "
        "memory factor S / k.  Filled markers: the paper's own text states the number; hollow: the cited abstract "
        "only.  The studies differ in models, baselines and hardware (paper Section 9).", number=3)
def fig3(data: dict | None = None):
    """Published operating points (no measured data)."""
    _data.mapping("3", data, set())
    fig = new_figure(12, 6, right=0.64, left=0.07)
    ax = fig.add_subplot()
    xs = np.logspace(0, 1.3, 50)
    ax.plot(xs, xs, color="#7f7f7f", ls="--", label="Eq. 3: gain = S/k")
    systems = sorted({p["system"] for p in points("throughput_gain") + points("speedup")
                      + points("memory_reduction") + points("budget_fraction")})
    markers = dict(zip(systems, "os^Dvp<>h"))
    no_gain_y = 1.15
    for i, system in enumerate(systems):
        mf = _memory_factor(system)
        gains = [p for p in points("throughput_gain") + points("speedup") if p["system"] == system]
        color = f"C{i}"
        if mf is None:
            for p in gains:  # no memory factor reported (StreamingLLM): drawn at the right edge
                ax.plot([18], [p["value"]], markers[system], color=color, ms=8, mew=1.5,
                        mfc=color if p["paper_states"] else "white", label=f"{system}: no memory factor stated")
                ax.annotate(f"{system} {p['value']:g}x {p['quantity'].replace('_', ' ')}\n"
                            f"({_short(p['context'], 34)})", (18, p["value"]), xytext=(-8, 0),
                            textcoords="offset points", fontsize=7, va="center", ha="right")
            continue
        x, derived, x_stated = mf
        tag = f"{system}, memory {x:.3g}x{' (derived 1/budget)' if derived else ''}"
        if not gains:
            ax.plot([x], [no_gain_y], markers[system], color=color, ms=8, mfc=color if x_stated else "white",
                    mew=1.5, label=f"{tag}; no speed reported")
            continue
        for j, p in enumerate(gains):
            ax.plot([x], [p["value"]], markers[system], color=color, ms=8, mew=1.5,
                    mfc=color if p["paper_states"] else "white", label=tag if j == 0 else None)
            ax.annotate(f"{p['value']:g}x {p['quantity'].replace('_', ' ')}\n({_short(p['context'], 34)})",
                        (x, p["value"]), xytext=(7, 0), textcoords="offset points", fontsize=7, va="center")
    ax.axhline(no_gain_y, color="#dddddd", lw=0.8)
    ax.text(1.03, no_gain_y * 1.02, "row of systems with no speed reported", fontsize=7, color="#777777", va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1, 20)
    ax.set_ylim(1, 40)
    for axis, ticks in ((ax.xaxis, (1, 2, 5, 10, 20)), (ax.yaxis, (1, 2, 5, 10, 20, 40))):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FixedFormatter([str(t) for t in ticks]))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("reported KV-memory reduction factor S/k (x, log scale)")
    ax.set_ylabel("reported speed / throughput gain (x, log scale)")
    ax.set_title("points: published (cited per point); line: gain = S/k", fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7.5, borderaxespad=0,
              title="filled: paper states it; hollow: cited abstract only", title_fontsize=7.5)
    waste = {p["quantity"]: p for p in points("memory_waste_fraction_before") + points("memory_waste_fraction_after")}
    if waste:
        before = waste.get("memory_waste_fraction_before")
        after = waste.get("memory_waste_fraction_after")
        text = "vLLM (paging, no eviction):\n"
        if before:
            text += f"KV memory wasted {before['low']:.0%}-{before['high']:.0%} before,\n"
        if after:
            text += f"below {after['high']:.0%} with paging ({citation(after['source'])})"
        ax.text(1.03, 0.02, text, transform=ax.transAxes, fontsize=7.5, va="bottom")
    titled(fig, "Figure 3: reported operating points of cited systems")
    return fig


FIG14_N = 4096
FIG14_EXPONENTS = (0.8, 1.0, 1.2, 1.5)


@figure("14", "fig14_quality_budget", "Published quality vs budget",
        "retained mass = 1 - M_tail(s, k), M_tail(s, k) = sum_{i>k} i^-s / sum_{i<=n} i^-s",
        "Left: budgets (fraction of the full cache) at which cited papers state their quality, with the statement "
        "(figures/data/published.json; filled = the paper's own text states the budget).  No numeric quality "
        "values are plotted: neither the paper nor the cited abstracts give one at these budgets.  Right: the "
        "Theorem 4 model of the same curve, retained mass = 1 - M_tail(s, k), M_tail(s, k) = sum_{i>k} i^-s / "
        f"sum_{{i<=n}} i^-s for Zipf rows over n = {FIG14_N} tokens, with the published budgets as vertical lines.",
        number=14)
def fig14(data: dict | None = None):
    """Published budget statements and the Zipf retained-mass model (no measured data)."""
    _data.mapping("14", data, set())
    fig = new_figure(12, 5.2, left=0.1, wspace=0.3)
    ax, bx = fig.subplots(1, 2)
    rows = []
    for p in points("budget_fraction"):
        rows.append((p["system"], p["value"], False, p["paper_states"], p.get("quality", "")))
    for p in points("memory_reduction"):
        # Only a reduction achieved by keeping fewer tokens (flagged in the data file) is a budget of 1/factor;
        # SnapKV's "memory efficiency" and KIVI's peak-memory factor (quantization, weights included) are not.
        if p.get("token_budget_equivalent") and not any(r[0] == p["system"] for r in rows):
            rows.append((p["system"], 1.0 / p["value"], True, p["paper_states"], p.get("quality", "")))
    rows.sort(key=lambda r: (-r[1], r[0]))
    for y, (system, frac, derived, stated, quality) in enumerate(rows):
        ax.plot([frac], [y], "s" if derived else "o", color="C0", ms=8, mfc="C0" if stated else "white", mew=1.5)
        ax.annotate(f"{frac:.3g}{' (1/memory)' if derived else ''}: {_short(quality, 40)}", (frac, y),
                    xytext=(-8, 9), textcoords="offset points", fontsize=7, ha="left", color="#333333")
    ax.set_xscale("log")
    ax.set_xlim(0.003, 8)
    ax.set_ylim(-0.6, len(rows) - 0.3)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.set_ylabel("cited system")
    ax.set_xlabel("retained budget (fraction of the full KV cache, log scale)")
    ax.set_title("published budget statements (filled: stated in the paper's text)", fontsize=9)

    ks = np.unique(np.round(np.logspace(0, math.log10(FIG14_N), 120)).astype(int))
    for s in FIG14_EXPONENTS:
        kept = [1 - F.zipf_tail_mass(s, FIG14_N, int(k)) for k in ks]
        bx.plot(ks / FIG14_N, kept, label=f"Zipf s = {s}")
    for _system, frac, *_ in rows:
        bx.axvline(frac, color="#999999", ls=":", lw=1)
    bx.set_xscale("log")
    bx.set_ylim(0, 1.02)
    bx.set_xlabel(f"retained budget k/n (fraction of n = {FIG14_N} tokens, log scale)")
    bx.set_ylabel("attention mass retained by the top-k (fraction)")
    bx.set_title("model: 1 − M_tail(s,k); dotted: published budgets", fontsize=9)
    bx.legend(loc="lower right")
    titled(fig, "Figure 14: published quality statements vs budget, and the Theorem 4 model")
    return fig


def _short(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
