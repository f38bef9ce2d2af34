"""Strict argparse types for every command line of the toolkit: a value is accepted only as it is written.

``int()`` and ``float()`` coerce: ``int("1_000")`` is 1000, ``int("+3")`` is 3, ``int("٣")`` (an Arabic-Indic
digit) is 3, ``float("nan")`` and ``float("1e400")`` (infinity) are numbers.  A command line that passes them on
silently runs something the user did not type, so these types accept plain ASCII decimal text only and check the
range; argparse turns the refusal into one usage line and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import re

_INT = re.compile(r"-?[0-9]+\Z")
_REAL = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")


def whole_number(low: int | None = 0, high: int | None = None):
    """An argparse type: an integer in plain decimal digits (an optional leading minus), in ``[low, high]`` (``None``:
    no bound on that side, for a value the called function range-checks itself)."""

    def parse(text: str) -> int:
        if not _INT.match(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer (plain decimal digits)")
        value = int(text)
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"{text} is below {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{text} is above {high}")
        return value

    parse.__name__ = "integer"
    return parse


def decimal(low: float, high: float, *, open_low: bool = False, open_high: bool = False):
    """An argparse type: a finite decimal number (``0.5``, ``.5``, ``5e-2``) in the interval from ``low`` to ``high``,
    each end open or closed as stated."""

    def parse(text: str) -> float:
        if not _REAL.match(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a decimal number")
        value = float(text)
        if (not math.isfinite(value) or value < low or value > high or (open_low and value == low)
                or (open_high and value == high)):
            interval = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
            raise argparse.ArgumentTypeError(f"{text} is not in {interval}")
        return value

    parse.__name__ = "number"
    return parse


def comma_list(item, *, none: bool = False):
    """An argparse type: comma-separated values (``256,512,1024``), each parsed by the type ``item``; with
    ``none=True`` the word ``none`` is the empty list."""

    def parse(text: str) -> tuple:
        if none and text.strip().lower() == "none":
            return ()
        parts = [p.strip() for p in text.split(",")]
        if not all(parts):
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list (an empty entry)")
        return tuple(item(p) for p in parts)

    parse.__name__ = f"list of {getattr(item, '__name__', 'values')}s"
    return parse


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, ``PROG: error: MESSAGE``, with exit status 2 (plain
    argparse prints the whole usage block first).  Subparsers made from it are of the same class."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")
