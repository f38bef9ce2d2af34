"""``python -m realtrace COMMAND ...`` (:mod:`realtrace.cli`); Ctrl-C at any moment exits 130 in one line."""

from kvcore.command import entry


def _load():
    from .cli import main

    return main


entry("python -m realtrace", _load)
