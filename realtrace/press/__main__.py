"""``python -m realtrace.press ...`` (:mod:`realtrace.press.cli`); Ctrl-C at any moment exits 130 in one line."""

from kvcore.command import entry

PROG = "python -m realtrace.press"


def _load():
    from .cli import COMMAND

    return lambda: COMMAND.main(prog=PROG)


entry(PROG, _load)
