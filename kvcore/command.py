"""The one runner of every command line: exit codes, one-line errors, Ctrl-C.

A command line of the toolkit is a thin shell over a library function: a :class:`Command` names its program, adds
its arguments to a parser and calls the library in ``run(args) -> exit status``.  Everything a user sees when
something goes wrong is decided here, once:

=====  ==================================================================================================
exit   when
=====  ==================================================================================================
0      done (``--help`` included; a closed stdout pipe, as in ``... | head``, is not an error)
1      the command's own "found something" (a verdict differs from the ledger, the fuzzer found a violation)
2      bad input: a :class:`~kvcore.errors.KVToolkitError` or a usage error, as ONE line ``PROG: error: MESSAGE``
3      the command's own failure, for commands that declare ``internal_error=True`` (the fuzzer): one line
130    interrupted (Ctrl-C at any moment, imports included): one line ``PROG: interrupted``, no traceback
=====  ==================================================================================================

Outputs are the library's business and go through :mod:`kvcore.atomic` (a temporary name renamed over the target,
a run's files staged and moved together), so an interrupted command leaves every file as it was or complete.  Every
option naming an output is declared with the type :func:`output_file` or :func:`output_dir`, so a path that cannot be
written (a directory where a file is wanted, a file where a directory is, a missing or unwritable directory) is a
usage error at parsing, before the command does any work.

Once a command has been interrupted, a second SIGINT (or one that a C extension delivered late) must not turn the
exit status 130 into death by signal during interpreter shutdown: :func:`finish` ignores SIGINT before exiting.
A Ctrl-C that lands while Python runs a finalizer or a weakref callback is "unraisable": Python would print a
traceback and carry on as if nothing happened; :func:`entry` re-delivers it to the main thread instead.
"""

from __future__ import annotations

import _thread
import argparse
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Callable

from .atomic import unwritable
from .errors import KVToolkitError, ParameterError

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def output_file(text: str) -> str:
    """An argparse ``type`` for an option naming a file the command writes: refused at parsing, before any work, when
    :func:`kvcore.atomic.unwritable` says why it cannot be written (a directory, a missing or read-only directory)."""
    return _output(text, "file")


def output_dir(text: str) -> str:
    """An argparse ``type`` for an option naming a directory the command writes into (created if missing): refused at
    parsing when it is a file or its nearest existing ancestor is not a writable directory."""
    return _output(text, "directory")


def check_output(text: str, want: str, option: str) -> str:
    """The same check for a path that does not come through argparse (a command's default output): a
    :class:`~kvcore.errors.ParameterError` naming ``option``."""
    why = unwritable(text, want)
    if why is not None:
        raise ParameterError(f"{option} {text}: {why}")
    return text


def _output(text: str, want: str) -> str:
    why = unwritable(text, want)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{text}: {why}")
    return text


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, ``PROG: error: MESSAGE``, with exit status 2 (plain
    argparse prints the whole usage block first).  Subparsers made from it are of the same class."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


@dataclass(frozen=True)
class Command:
    """A command line: ``prog`` (as printed in messages), a one-paragraph ``description``, ``add_arguments(parser)``
    and ``run(args) -> int`` (the exit status; the library raises KVToolkitError for bad input).  ``internal_error``:
    any other exception is the command's own failure, reported in one line with exit status 3 (otherwise it
    propagates with its traceback: a bug in the toolkit should be seen)."""

    prog: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    internal_error: bool = False

    def parser(self, prog: str | None = None) -> OneLineParser:
        p = OneLineParser(prog=prog or self.prog, description=self.description)
        self.add_arguments(p)
        return p

    def mount(self, subparsers, name: str, help: str) -> argparse.ArgumentParser:
        """Add this command as subcommand ``name`` of another parser; the parsed ``args.command_object`` is
        ``self`` and ``args.command_prog`` its program name (see :func:`dispatch`)."""
        p = subparsers.add_parser(name, help=help, description=self.description)
        self.add_arguments(p)
        p.set_defaults(command_object=self, command_prog=p.prog)
        return p

    def main(self, argv: list[str] | None = None, prog: str | None = None) -> int:
        """Parse ``argv`` (default ``sys.argv[1:]``) and run; every outcome is an exit status (module docstring)."""
        name = prog or self.prog
        return execute(name, lambda: self.run(self.parser(name).parse_args(argv)), self.internal_error)


def dispatch(args: argparse.Namespace) -> int:
    """Run the :class:`Command` a subparser made with :meth:`Command.mount` selected, under its own name (``PARENT
    NAME``) and its own ``internal_error`` rule, exactly as its standalone ``main`` would."""
    command = args.command_object
    return execute(args.command_prog, lambda: command.run(args), command.internal_error)


def execute(prog: str, body: Callable[[], int | None], internal_error: bool = False) -> int:
    """Call ``body`` and turn what it raises into the exit status and the one line of the module docstring.  The body
    runs under :class:`interrupts_kept`: a Ctrl-C that a library turns into another exception (scipy's compiled
    modules raise "ImportError: initialization failed" when the interrupt lands while one is being imported, seen
    in a CI run at 6 s into ``paper_check``) still ends the command as an interrupt."""
    try:
        with interrupts_kept():
            return int(body() or 0)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed in one line
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KVToolkitError as exc:
        return usage_error(prog, str(exc))
    except KeyboardInterrupt:
        return interrupted(prog)
    except BrokenPipeError:
        return _closed_stdout()
    except Exception as exc:  # noqa: BLE001 -- only for commands that declare their own failures (exit 3)
        if not internal_error:
            raise
        print(f"{prog}: internal error: {type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr, flush=True)
        return EXIT_INTERNAL


def usage_error(prog: str, message: str) -> int:
    print(f"{prog}: error: {_one_line(message)}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def interrupted(prog: str) -> int:
    _ignore_sigint()
    print(f"{prog}: interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def entry(prog: str, load: Callable[[], Callable[[], int]]) -> None:
    """The body of a ``__main__`` module: ``load()`` imports the command (so Ctrl-C during the imports is caught
    too) and returns its ``main``; the process exits with its status through :func:`finish`."""
    sys.unraisablehook = _redeliver_interrupt(sys.unraisablehook)
    try:
        with interrupts_kept():
            code = load()()
    except KeyboardInterrupt:
        code = interrupted(prog)
    finish(code)


def _redeliver_interrupt(previous):
    """An unraisable-exception hook: a KeyboardInterrupt swallowed in a finalizer or weakref callback (seen in a
    Ctrl-C test: the main job printed the traceback and finished with exit 0) is raised again in the main thread,
    where it ends the command as any Ctrl-C does; everything else goes to ``previous``."""

    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            # from another thread, a moment later: raised inside the hook it would be swallowed again
            timer = threading.Timer(0.01, _thread.interrupt_main)
            timer.daemon = True
            timer.start()
            return
        previous(unraisable)

    return hook


def finish(code: int) -> None:
    """Exit with ``code`` after flushing.  An interrupted run ignores further SIGINTs and leaves with ``os._exit``:
    through ``sys.exit`` the interpreter's shutdown could still end as death by SIGINT -- seen as exit -2 right after
    "PROG: interrupted" when Ctrl-C came 0.3 s after start on a loaded machine (CPython reports an interrupt it
    recorded as unhandled that way; where this one was recorded is not established).  Nothing is lost: every output
    is written atomically and every pool, cluster and child process is closed by its ``with`` block before this
    point."""
    if code == EXIT_INTERRUPTED:
        _ignore_sigint()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _closed_stdout() if code == EXIT_OK else code
    if code == EXIT_INTERRUPTED:
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


class interrupts_kept:
    """``with interrupts_kept():`` around a library call that may catch a Ctrl-C and raise something else in its
    place (transformers' lazy imports turn a KeyboardInterrupt raised inside an import into an ImportError, "requires
    the protobuf library").  While the block runs, SIGINT is recorded before it is raised; if the block then ends with
    any other exception, a KeyboardInterrupt takes its place, so the command exits 130.  A no-op off the main
    thread, and where SIGINT was ignored (a background job) the disposition is left alone."""

    def __enter__(self):
        self.seen, self.previous = False, None
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self.previous = signal.signal(signal.SIGINT, self._record)
        return self

    def _record(self, signum, frame):
        self.seen = True
        raise KeyboardInterrupt

    def __exit__(self, exc_type, exc, tb):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        if self.seen and exc_type is not None and not issubclass(exc_type, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        return False


def _ignore_sigint() -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass


def _closed_stdout() -> int:
    """The reader of stdout went away (``| head``): not an error; stop writing to the dead pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_OK


def _one_line(text: str) -> str:
    return " ".join(text.split())
