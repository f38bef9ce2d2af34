"""The files of the real-trace study (:mod:`realtrace.study`): ``study.json``, ``study.md`` and its figures, PNG + SVG
with deterministic bytes, each written atomically (:func:`write_study`).  The figures:

* ``study_opt_regret``   the exact NM optimum's regret per step against layer, one line per budget (mean over KV
  heads; each head's value as a faint marker);
* ``study_tracking_gap`` per budget, a heatmap of each registered NM policy's tracking gap per step
  ``(regret(ALG) - regret(OPT)) / T`` by layer (mean over heads), on one colour scale;
* ``study_theorem4``     Section 7 per layer: the share of heavy entries that are ``(rho, W)``-persistent at each
  window; the tail bound ``sum_t M_t(tau*) / T`` (solid) against R-LRU-H's regret per step (dashed) per budget, at
  the first window;
* ``study_needles``      (only when the trace sets mark needles) per budget, the share of each needle's tokens still
  resident when the question starts, against the needle's depth in the context, per policy and for OPT (black).

Determinism follows the toolkit's figure rules and style (:data:`figures._style.DENSE_RC`): plain ``Figure``
objects, one fixed rcParams set, a fixed SVG hash salt, no date or software stamps.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from figures._style import DENSE_RC
from kvcore.atomic import save_figure, write_text

from .study import by_layer, format_markdown, needle_means


def _layer_means(study: dict, value) -> tuple[list[str], np.ndarray, list[list[float]]]:
    """x labels (``layer`` or ``set:layer`` with several sets), the mean of ``value(entry)`` per layer, and the
    per-head values."""
    groups = by_layer(study, value)
    several = len(study["sets"]) > 1
    labels = [f"{s}:{layer}" if several else str(layer) for s, layer in groups]
    return labels, np.array([np.mean(v, axis=0) for v in groups.values()]), list(groups.values())


def fig_opt_regret(study: dict) -> Figure:
    budgets = [str(k) for k in study["params"]["budgets"]]
    labels, means, heads = _layer_means(study, lambda e: [e["budgets"][k]["opt_per_step"] for k in budgets])
    fig = Figure(figsize=(7.5, 4.2))
    fig.subplots_adjust(top=0.88, bottom=0.14, left=0.1, right=0.97)
    ax = fig.add_subplot()
    x = np.arange(len(labels))
    for j, k in enumerate(budgets):
        line, = ax.plot(x, means[:, j], marker="o", ms=3, label=f"k = {k}")
        for xi, hv in zip(x, heads):
            ax.plot([xi] * len(hv), [h[j] for h in hv], ".", color=line.get_color(), alpha=0.35, ms=3)
    ax.set_xticks(x, labels, rotation=90 if len(labels) > 16 else 0)
    ax.set_xlabel("layer")
    ax.set_ylabel("OPT regret per step (stored mass)")
    ax.set_title("Exact NM optimum: regret per step by layer (line: mean over KV heads; dots: heads)")
    ax.legend()
    return fig


def fig_tracking_gap(study: dict) -> Figure:
    budgets = [str(k) for k in study["params"]["budgets"]]
    pols = study["policies"]
    labels, means, _ = _layer_means(study, lambda e: [[e["budgets"][k]["policies"][p]["gap_per_step"]
                                                       for p in pols] for k in budgets])
    # means: layers x budgets x policies
    vmax = float(np.nanmax(means)) if means.size and np.nanmax(means) > 0 else 1.0
    fig = Figure(figsize=(4.0 * len(budgets) + 1.2, 0.28 * len(pols) + 2.0))
    fig.subplots_adjust(top=0.86, bottom=0.16, left=0.12, right=0.92, wspace=0.08)
    axes = fig.subplots(1, len(budgets), sharey=True, squeeze=False)[0]
    image = None
    for j, (ax, k) in enumerate(zip(axes, budgets)):
        image = ax.imshow(means[:, j, :].T, aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax,
                          interpolation="nearest")
        ax.set_title(f"k = {k}")
        ax.set_xticks(np.arange(len(labels)), labels, rotation=90, fontsize=6)
        ax.set_xlabel("layer")
        ax.grid(False)
    axes[0].set_yticks(np.arange(len(pols)), pols)
    fig.colorbar(image, ax=list(axes), fraction=0.025, pad=0.01, label="tracking gap per step")
    fig.suptitle("NM tracking gap (regret(ALG) − regret(OPT)) / T by policy and layer, mean over KV heads")
    return fig


def fig_theorem4(study: dict) -> Figure:
    p = study["params"]
    budgets = [str(k) for k in p["budgets"]]
    W0 = str(p["windows"][0])
    labels, persist, _ = _layer_means(study, lambda e: [e["profile"]["persistence"][str(W)]["fraction"]
                                                        for W in p["windows"]])
    _, tails, _ = _layer_means(study, lambda e: [[e["budgets"][k]["theorem4"][W0]["tail_per_step"],
                                                  e["budgets"][k]["theorem4"][W0]["rlruh_per_step"]]
                                                 for k in budgets])
    fig = Figure(figsize=(11.0, 4.2))
    fig.subplots_adjust(top=0.86, bottom=0.15, left=0.07, right=0.98, wspace=0.25)
    a1, a2 = fig.subplots(1, 2)
    x = np.arange(len(labels))
    for j, W in enumerate(p["windows"]):
        a1.plot(x, persist[:, j], marker="o", ms=3, label=f"W = {W}")
    a1.set_ylim(-0.02, 1.02)
    a1.set_ylabel(f"share of heavy entries (a ≥ {p['tau']}) persistent")
    a1.set_title(f"(rho = {p['rho']}, W)-persistence by layer")
    for j, k in enumerate(budgets):
        line, = a2.plot(x, tails[:, j, 0], marker="o", ms=3, label=f"tail bound, k = {k}")
        a2.plot(x, tails[:, j, 1], "--", color=line.get_color(), label=f"R-LRU-H, k = {k}")
    a2.set_ylabel("mass per step")
    a2.set_title(f"Theorem 4 at W = {W0}: Σ M_t(τ*)/T vs R-LRU-H regret/T")
    for ax in (a1, a2):
        ax.set_xticks(x, labels, rotation=90 if len(labels) > 16 else 0, fontsize=7)
        ax.set_xlabel("layer")
        ax.legend()
    fig.suptitle("Section 7 on real traces (means over KV heads)")
    return fig


def fig_needles(study: dict) -> Figure | None:
    budgets = [str(k) for k in study["params"]["budgets"]]
    if not any(s["needles"] for s in study["sets"].values()):
        return None
    depth = {f"{label}:{n}": span[0] / s["T"] for label, s in study["sets"].items()
             for n, span in s["needles"].items()}
    fig = Figure(figsize=(4.2 * len(budgets) + 1.8, 4.2))
    fig.subplots_adjust(top=0.86, bottom=0.13, left=0.06, right=0.84, wspace=0.12)
    axes = fig.subplots(1, len(budgets), sharey=True, squeeze=False)[0]
    cmap = matplotlib.colormaps["tab20"]
    for ax, k in zip(axes, budgets):
        means = needle_means(study, k)
        for i, pol in enumerate(["OPT", *study["policies"]]):
            per = means.get(pol, {})
            names = sorted(per, key=depth.get)
            style = dict(color="black", lw=2.2, zorder=3) if pol == "OPT" else dict(color=cmap(i % 20), lw=1.1)
            ax.plot([100 * depth[n] for n in names], [per[n] for n in names], marker="o", ms=3, label=pol, **style)
        ax.set_title(f"k = {k}")
        ax.set_xlabel("needle depth (% of context)")
        ax.set_xlim(0, 100)
        ax.set_ylim(-0.03, 1.03)
    axes[0].set_ylabel("needle tokens resident at the question")
    axes[-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle("Where the needles are kept or lost (mean over layers and KV heads)")
    return fig


def build_figures(study: dict, out: Path) -> list[Path]:
    """Every figure of the module docstring into ``out``; returns the paths written."""
    written = []
    with matplotlib.rc_context(DENSE_RC):
        for stem, builder in (("study_opt_regret", fig_opt_regret), ("study_tracking_gap", fig_tracking_gap),
                              ("study_theorem4", fig_theorem4), ("study_needles", fig_needles)):
            fig = builder(study)
            if fig is not None:
                written += save_figure(fig, out, stem)
    return written


def write_study(study: dict, out: Path, figures: bool = True) -> list[Path]:
    """``study.json``, ``study.md`` and (optionally) the figures into ``out``; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "study.json", out / "study.md"]
    write_text(written[0], json.dumps(study, indent=1, sort_keys=False, allow_nan=True) + "\n")
    write_text(written[1], format_markdown(study))
    if figures:
        written += build_figures(study, out)
    return written
