"""``python -m realtrace.quality ...`` (:mod:`realtrace.quality.cli`); Ctrl-C at any moment exits 130 in one line."""

from kvcore.command import entry


def _load():
    from .cli import main

    return main


entry("python -m realtrace.quality", _load)
