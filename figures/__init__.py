"""Every figure of the paper (and of the seed-002 figure page) rebuilt from its formula or from code-defined data.

``FIGURES`` maps a figure id (the paper's number as a string, ``"1"``..``"15"``, or ``"seed002"``) to a
:class:`~figures.registry.FigureSpec`; ``build(fig_id, out_dir, data=None)`` writes ``<stem>.png`` and
``<stem>.svg``; ``render(fig_id, data)`` returns the figure object (its ``plotted`` dict holds what it draws) and
``caption(fig_id, data)`` the caption with its computed sentences.  They live in :mod:`figures.catalogue` and are
loaded on first use, so that importing a data module such as :mod:`figures.published_data` does not import
matplotlib.
"""

_CATALOGUE_NAMES = ("FIGURES", "FigureSpec", "build", "build_all", "caption", "render", "spec")


def __getattr__(name: str):
    if name in _CATALOGUE_NAMES:
        from . import catalogue

        return getattr(catalogue, name)
    raise AttributeError(f"module 'figures' has no attribute {name!r}")


__all__ = list(_CATALOGUE_NAMES)
