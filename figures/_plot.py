"""Drawing helpers that record what they draw: ``figure.plotted[key]`` is read back from the artist itself.

Every measured or formula series of a figure is drawn through one of these functions with a stable ``key`` (for
example ``"measured/LRU/adaptive k+1"`` or ``"bound/k=16"``); the recorded values are the artist's own data after
matplotlib has taken it, so what a test reads is what is on the page.  A key drawn twice is a programming error.
"""

from __future__ import annotations

import math

import numpy as np


def _floats(values) -> list[float]:
    return [float(v) for v in np.ma.filled(np.ma.asarray(values, dtype=float), math.nan)]


def record(fig, key: str, **data) -> None:
    if key in fig.plotted:
        raise KeyError(f"series {key!r} drawn twice")
    fig.plotted[key] = {name: (_floats(v) if isinstance(v, (list, tuple, np.ndarray)) else v)
                        for name, v in data.items()}


def line(ax, key: str, x, y, *fmt, **kw):
    """``ax.plot(x, y, *fmt, **kw)``, recorded as ``{"x", "y"}``."""
    (artist,) = ax.plot(x, y, *fmt, **kw)
    record(ax.figure, key, x=artist.get_xdata(), y=artist.get_ydata())
    return artist


def step(ax, key: str, x, y, where: str = "post", **kw):
    """``ax.step``, recorded as ``{"x", "y"}`` (the step corners are a drawing detail)."""
    (artist,) = ax.step(x, y, where=where, **kw)
    record(ax.figure, key, x=artist.get_xdata(), y=artist.get_ydata())
    return artist


def errorbar(ax, key: str, x, y, low=None, high=None, tags: dict | None = None, **kw):
    """Points with an optional interval ``[low, high]`` per point (``None`` entries: no bar), recorded as
    ``{"x", "y", "low", "high"}`` plus ``tags`` (values the drawing does not show by position, e.g. the true k of
    points shifted apart)."""
    x, y = _floats(x), _floats(y)
    low = list(low) if low is not None else [None] * len(x)
    high = list(high) if high is not None else [None] * len(x)
    yerr = None
    if any(lo is not None and hi is not None for lo, hi in zip(low, high)):
        yerr = [[max(v - lo, 0.0) if lo is not None else 0.0 for v, lo in zip(y, low)],
                [max(hi - v, 0.0) if hi is not None else 0.0 for v, hi in zip(y, high)]]
    container = ax.errorbar(x, y, yerr=yerr, **kw)
    data_line = container.lines[0]
    record(ax.figure, key, x=data_line.get_xdata(), y=data_line.get_ydata(),
           low=[math.nan if v is None else float(v) for v in low],
           high=[math.nan if v is None else float(v) for v in high], **(tags or {}))
    return container


def bars(ax, key: str, x, heights, width: float, **kw):
    """``ax.bar``, recorded as ``{"x": bar centres, "y": bar heights}`` (NaN: no bar)."""
    container = ax.bar(x, heights, width, **kw)
    record(ax.figure, key, x=[p.get_x() + p.get_width() / 2 for p in container.patches],
           y=[p.get_height() for p in container.patches])
    return container
