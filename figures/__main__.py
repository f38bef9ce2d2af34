"""``python -m figures OUT_DIR`` (:mod:`figures.cli`); Ctrl-C at any moment exits 130 in one line."""

from kvcore.command import entry


def _load():
    from .cli import COMMAND

    return COMMAND.main


entry("figures", _load)
