"""The figure registry: id -> :class:`FigureSpec` (builder, title, caption with its formula, output stem)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from matplotlib.figure import Figure


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the paper (or of the seed-002 figure page).

    ``formula`` is the rule the picture is computed from (for diagrams and tables: the code object it is generated
    from); the caption always contains it verbatim.  ``data_doc`` says what measured data the builder overlays
    (empty when it takes none).  ``notes(data)`` returns the caption's computed sentences: where measured and
    predicted values differ by more than the figure's stated tolerance, it says so from the data
    (:meth:`caption_for`); the builder draws the same sentences under the figure.
    """

    fig_id: str
    number: int | None
    stem: str
    title: str
    formula: str
    caption: str
    builder: Callable[[dict | None], Figure]
    data_doc: str = ""
    notes: Callable[[dict | None], list[str]] | None = None

    @property
    def takes_data(self) -> bool:
        return bool(self.data_doc)

    def caption_for(self, data: dict | None = None) -> str:
        """The caption with the sentences computed from ``data`` appended (the fixed caption when there are none).
        ``data`` is checked as the builder checks it: a figure without a caption function takes none."""
        if self.notes is None:
            from ._data import mapping

            mapping(self.fig_id, data, set())
            return self.caption
        return " ".join([self.caption, *self.notes(data)])


FIGURES: dict[str, FigureSpec] = {}


def figure(fig_id: str, stem: str, title: str, formula: str, caption: str, number: int | None = None,
           notes: Callable[[dict | None], list[str]] | None = None):
    """Decorator registering ``builder(data) -> Figure``; the builder's docstring documents its ``data``.

    ``notes(data) -> [sentence, ...]`` is the figure's caption function (see :class:`FigureSpec`); it validates
    ``data`` as the builder does, so a bad overlay fails the same way in both.
    """

    def wrap(builder: Callable[[dict | None], Figure]):
        if fig_id in FIGURES:
            raise TypeError(f"figure id {fig_id!r} registered twice")
        doc = (builder.__doc__ or "").strip()
        data_doc = doc.split("Data:", 1)[1].strip() if "Data:" in doc else ""
        full_caption = caption if formula in caption else f"{caption} Formula: {formula}."
        FIGURES[fig_id] = FigureSpec(fig_id, number, stem, title, formula, full_caption, builder, data_doc, notes)
        return builder

    return wrap
