"""``python -m verify ...`` (:mod:`verify.cli`); Ctrl-C at any moment exits 130 in one line."""

from kvcore.command import entry


def _load():
    from .cli import main

    return main


entry("python -m verify", _load)
