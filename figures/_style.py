"""Deterministic rendering: one rcParams set, figures built without pyplot, PNG + SVG with no dates or versions.

The same inputs give the same bytes: figures are plain :class:`~matplotlib.figure.Figure` objects (no pyplot, no
global backend switch; ``savefig`` renders PNG with Agg and SVG with the SVG backend), :data:`RC` is held for the
whole build (``figures.build``), the SVG id salt is fixed, and the writers are told to omit date and software stamps.
Log axes use :func:`log_scale` / :func:`symlog_scale`, whose logarithms are :mod:`kvcore.portable_math`'s, so the
pixels do not depend on which CPU kernels numpy dispatches to (issue 53).
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib import scale as mscale
from matplotlib.figure import Figure

from kvcore import portable_math

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
# the real-trace figures (realtrace.study_figures, realtrace.press.board) put many layers, heads and panels on one
# page: smaller text (sizes relative to 9 pt), thinner lines and matplotlib's ten-colour default cycle
DENSE_RC = {**RC, "font.size": 9, "axes.titlesize": 10, "axes.labelsize": "medium", "legend.fontsize": 7,
            "xtick.labelsize": "medium", "ytick.labelsize": "medium", "lines.linewidth": 1.5,
            "axes.prop_cycle": matplotlib.rcParamsDefault["axes.prop_cycle"]}

NOTE_FONTSIZE = 8.5
_NOTE_LINE_IN = NOTE_FONTSIZE * 1.35 / 72  # one footer line, inches
_NOTE_CHAR_IN = NOTE_FONTSIZE * 0.6 / 72  # a generous average DejaVu Sans glyph width, inches


class PlotFigure(Figure):
    """A figure that carries what it plots.

    ``plotted`` maps a series key to the data of the artist drawn for it (read back from the artist, see
    :mod:`figures._plot`), so tests compare what is on the page with the values the claims compute; ``notes`` are
    the computed caption sentences drawn under the axes.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.plotted: dict[str, dict] = {}
        self.notes: list[str] = []


def wrap_notes(sentences: list[str], width_in: float) -> str:
    """The sentences as one paragraph wrapped to ``width_in`` inches of footer text."""
    import textwrap

    chars = max(40, int((width_in - 0.3) / _NOTE_CHAR_IN))
    return "\n".join(textwrap.wrap(" ".join(sentences), chars))


def new_figure(width: float = 7.5, height: float = 4.8, *, top: float = 0.86, bottom: float = 0.11,
               left: float = 0.1, right: float = 0.97, wspace: float = 0.3, hspace: float = 0.2,
               notes: list[str] | None = None) -> PlotFigure:
    """A figure detached from pyplot's global state (so concurrent builds cannot interfere).

    Margins are fixed rather than solved by a layout engine: the solver measured every tick label and cost about a
    second per figure, and fixed margins are trivially reproducible.  ``notes`` (computed caption sentences) are
    written under the axes: the figure grows by their height and the margins are rescaled so that the axes keep
    the size and place they have without notes.
    """
    notes = list(notes or [])
    text = wrap_notes(notes, width) if notes else ""
    extra = (text.count("\n") + 1) * _NOTE_LINE_IN + 0.15 if notes else 0.0
    total = height + extra
    fig = PlotFigure(figsize=(width, total))
    fig.subplots_adjust(top=1 - (1 - top) * height / total, bottom=(bottom * height + extra) / total,
                        left=left, right=right, wspace=wspace, hspace=hspace)
    if notes:
        fig.notes = notes
        fig.text(0.02, 0.08 / total, text, fontsize=NOTE_FONTSIZE, va="bottom", ha="left", color="#7a1f1f")
    return fig


def titled(fig: Figure, title: str) -> None:
    """Bold figure title (each axes title then carries the formula or panel name), 0.12 in below the top edge."""
    height = fig.get_figheight()
    fig.suptitle(title, fontsize=12, fontweight="bold", y=1 - 0.12 / height, va="top")


class _PortableLogTransform(mscale.LogTransform):
    """matplotlib's log transform with :mod:`kvcore.portable_math`'s logarithm: numpy's ``log10`` differs in the last
    bit between CPUs, which moved antialiased pixels of four log-axis figures (issue 53)."""

    def transform_non_affine(self, values):
        values = np.asarray(values, dtype=np.float64)
        out = portable_math.log(values, self.base)
        if self._clip:
            out = np.where(values <= 0, -1000.0, out)  # matplotlib's clip: far off the canvas, finite
        return out

    def inverted(self):
        return _PortablePowerTransform(self.base)


class _PortablePowerTransform(mscale.InvertedLogTransform):
    def transform_non_affine(self, values):
        return portable_math.power(self.base, values)

    def inverted(self):
        return _PortableLogTransform(self.base)


class _PortableSymlogTransform(mscale.SymmetricalLogTransform):
    """Symmetric log: ``v * c`` inside ``|v| <= linthresh``, else ``sign(v) linthresh (c + log_b(|v| / linthresh))``
    with ``c = linscale / (1 - 1/b)`` -- matplotlib's formula, with the portable logarithm."""

    def transform_non_affine(self, values):
        values = np.asarray(values, dtype=np.float64)
        c = self.linscale / (1.0 - 1.0 / self.base)
        outside = np.abs(values) > self.linthresh
        logs = portable_math.log(np.where(outside, np.abs(values), self.linthresh), self.base)
        shifted = c + logs - portable_math.log(self.linthresh, self.base)
        return np.where(outside, np.sign(values) * self.linthresh * shifted, values * c)

    def inverted(self):
        return _PortableSymexpTransform(self.base, self.linthresh, self.linscale)


class _PortableSymexpTransform(mscale.InvertedSymmetricalLogTransform):
    def transform_non_affine(self, values):
        values = np.asarray(values, dtype=np.float64)
        c = self.linscale / (1.0 - 1.0 / self.base)
        edge = self.linthresh * c  # where the linear part meets the logarithmic one
        outside = np.abs(values) > edge
        powers = portable_math.power(self.base, np.where(outside, np.abs(values) / self.linthresh - c, 0.0))
        return np.where(outside, np.sign(values) * self.linthresh * powers, values / c)

    def inverted(self):
        return _PortableSymlogTransform(self.base, self.linthresh, self.linscale)


def log_scale(base: float = 10, **kwargs) -> mscale.LogScale:
    """A log scale for ``ax.set_xscale``/``set_yscale`` whose pixels are the same on every machine: matplotlib's
    ``LogScale`` (ticks, name ``"log"``) with :class:`_PortableLogTransform`.  Every log axis of a figure uses it."""
    scale = mscale.LogScale(base=base, **kwargs)
    scale._transform = _PortableLogTransform(base, kwargs.get("nonpositive", "clip"))
    return scale


def symlog_scale(linthresh: float, base: float = 10, linscale: float = 1) -> mscale.SymmetricalLogScale:
    """The symmetric-log counterpart of :func:`log_scale`."""
    scale = mscale.SymmetricalLogScale(base=base, linthresh=linthresh, linscale=linscale)
    scale._transform = _PortableSymlogTransform(base, linthresh, linscale)
    return scale
