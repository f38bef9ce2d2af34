"""Deterministic rendering: one rcParams set, figures built without pyplot, PNG + SVG with no dates or versions.

The same inputs give the same bytes: figures are plain :class:`~matplotlib.figure.Figure` objects (no pyplot, no
global backend switch; ``savefig`` renders PNG with Agg and SVG with the SVG backend), :data:`RC` is held for the
whole build (``figures.build``), the SVG id salt is fixed, and the writers are told to omit date and software stamps.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

RC = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.family": "DejaVu Sans",  # ships with matplotlib, so every machine renders the same glyphs
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.8,
    "svg.hashsalt": "kv-eviction-theory",
    "svg.fonttype": "none",  # text stays text: smaller, faster files
    "path.simplify": False,
    "axes.prop_cycle": matplotlib.cycler(color=["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                                "#8c564b", "#17becf", "#7f7f7f"]),
}

PNG_METADATA = {"Software": None}
SVG_METADATA = {"Date": None, "Creator": None}


def new_figure(width: float = 7.5, height: float = 4.8, *, top: float = 0.86, bottom: float = 0.11,
               left: float = 0.1, right: float = 0.97, wspace: float = 0.3) -> Figure:
    """A figure detached from pyplot's global state (so concurrent builds cannot interfere).

    Margins are fixed rather than solved by a layout engine: the solver measured every tick label and cost about a
    second per figure, and fixed margins are trivially reproducible.
    """
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(top=top, bottom=bottom, left=left, right=right, wspace=wspace)
    return fig


def save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` into ``out_dir``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{stem}.png", out_dir / f"{stem}.svg"
    fig.savefig(png, format="png", metadata=PNG_METADATA)
    fig.savefig(svg, format="svg", metadata=SVG_METADATA)
    return [png, svg]



def titled(fig: Figure, title: str) -> None:
    """Bold figure title (each axes title then carries the formula or panel name)."""
    fig.suptitle(title, fontsize=12, fontweight="bold", y=0.975)
