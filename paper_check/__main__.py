"""``python -m paper_check`` (:mod:`paper_check.cli`); Ctrl-C at any moment, imports included, exits 130 in one line."""

from kvcore.command import entry


def _load():
    from .cli import main

    return main


entry("paper_check", _load)
