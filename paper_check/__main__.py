"""``python -m paper_check`` (:mod:`paper_check.cli`); Ctrl-C at any moment, imports included, exits 130 in one line.

The toolkit's core (numpy, the engine) is imported by ``kvcore.command`` itself, before :func:`kvcore.command.entry`
can catch anything: a Ctrl-C in that window is caught here (this package's ``__init__`` imports nothing)."""

try:
    from kvcore.command import entry
except KeyboardInterrupt:
    import os
    import sys

    sys.stderr.write("paper_check: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


def _load():
    from .cli import main

    return main


entry("paper_check", _load)
