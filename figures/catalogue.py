"""The figure catalogue: importing it registers every figure (and imports matplotlib).

``FIGURES`` maps a figure id (the paper's number as a string, ``"1"``..``"15"``, or ``"seed002"``) to a
:class:`~figures.registry.FigureSpec`: builder, title, caption stating the formula, output stem.
``build(fig_id, out_dir, data=None)`` writes ``<stem>.png`` and ``<stem>.svg`` and returns their paths; ``data``
is the optional measured overlay documented in ``FIGURES[fig_id].data_doc`` (absent -> formula only).
``render(fig_id, data)`` returns the figure object itself, whose ``plotted`` dict holds every series it draws, and
``caption(fig_id, data)`` the caption with the sentences computed from the data.
Output bytes are a function of the inputs alone (see :mod:`figures._style`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

from kvcore.atomic import save_figure
from kvcore.errors import ParameterError

from . import _style
from .registry import FIGURES, FigureSpec

# Import order fixes registry order; each module registers its figures on import.
from . import diagrams, analytic, attention, published, blocks, allocation, quality, workingset, quality_measured  # noqa: E402,F401  (registration side effect)
from . import quality_heads  # noqa: E402,F401  (registration side effect)

FIGURES = dict(sorted(FIGURES.items(), key=lambda kv: (kv[1].number is None, kv[1].number or 0, kv[0])))


def spec(fig_id: int | str) -> FigureSpec:
    """The spec of ``fig_id`` (``3``, ``"3"``, ``"fig3"``, ``"seed002"``); unknown -> ParameterError."""
    key = str(fig_id).strip().lower()
    if key.startswith("fig"):
        key = key[3:].lstrip("_ .")
    if key.isdigit():
        key = str(int(key))
    if key not in FIGURES:
        raise ParameterError(f"unknown figure {fig_id!r} (known: {', '.join(FIGURES)})")
    return FIGURES[key]


def render(fig_id: int | str, data: dict | None = None) -> _style.PlotFigure:
    """The figure object of ``fig_id`` drawn with ``data``, not written anywhere.  ``.plotted`` holds every series
    it draws (key -> the artist's values), ``.notes`` the caption sentences computed from ``data``."""
    with matplotlib.rc_context(_style.RC):
        return spec(fig_id).builder(data)


def caption(fig_id: int | str, data: dict | None = None) -> str:
    """The caption of ``fig_id`` for ``data``: its fixed text (with the formula) and the sentences computed from the
    data (e.g. where measured and predicted differ by more than the figure's stated tolerance)."""
    return spec(fig_id).caption_for(data)


def build(fig_id: int | str, out_dir: str | Path, data: dict | None = None) -> list[Path]:
    """Build one figure into ``out_dir`` as PNG and SVG; returns ``[png_path, svg_path]``."""
    s = spec(fig_id)
    # rcParams are read both when artists are created and when the file is written: hold them for both.
    with matplotlib.rc_context(_style.RC):
        fig = s.builder(data)
        return save_figure(fig, out_dir, s.stem)


def build_all(out_dir: str | Path, data: dict | None = None) -> dict[str, list[Path]]:
    """Build every figure; ``data`` maps figure id -> that figure's data (missing ids draw formula-only).

    An unknown id in ``data`` is a ParameterError before anything is written.
    """
    by_id = {spec(k).fig_id: v for k, v in (data or {}).items()}  # accepts 3, "3", "fig03" alike
    return {fid: build(fid, out_dir, by_id.get(fid)) for fid in FIGURES}


__all__ = ["FIGURES", "FigureSpec", "build", "build_all", "caption", "render", "spec"]
