"""Numbers, checked one way everywhere: values passed to a function, and text typed on a command line.

Values.  An *integer* is a Python ``int`` or a numpy integer, never a ``bool`` (``True`` is an ``int`` to Python,
and a flag passed where a count belongs is a mistake, not the number 1), never a float (``3.0`` arrives only from
arithmetic or JSON that meant something else).  A *real* is any integer or a Python/numpy float, never a bool, and
finite unless stated.  :func:`integer` and :func:`real` return the plain Python value or raise a one-line
:class:`~kvcore.errors.ParameterError` naming the parameter.

Text.  ``int()`` and ``float()`` coerce: ``int("1_000")`` is 1000, ``int("+3")`` is 3, ``int("٣")`` (an
Arabic-Indic digit) is 3, ``float("nan")`` and ``float("1e400")`` (infinity) are numbers.  A command line that passes
them on silently runs something the user did not type, so the argparse types below accept plain ASCII decimal text
only and then apply the same range checks as the value checks; argparse turns a refusal into one usage line and exit
status 2 (:class:`kvcore.command.OneLineParser`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any

import numpy as np

from .errors import ParameterError

_INT = re.compile(r"-?[0-9]+\Z")
_REAL = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")


def is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    return is_integer(value) or isinstance(value, (float, np.floating))


def _interval(low, high, open_low: bool = False, open_high: bool = False) -> str:
    """``>= 1``, ``in [0, 1)``, ...: the range a value must lie in, as the error messages say it."""
    if high is None:
        return f"{'>' if open_low else '>='} {low:g}" if low is not None else "any value"
    if low is None:
        return f"{'<' if open_high else '<='} {high:g}"
    return f"in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"


def _outside(x: float, low, high, open_low: bool, open_high: bool) -> bool:
    return ((low is not None and (x < low or (open_low and x == low)))
            or (high is not None and (x > high or (open_high and x == high))))


def integer(value: Any, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int`` when it is an integer (module docstring) in ``[low, high]`` (``None``: unbounded);
    else ParameterError ``NAME = VALUE: must be an integer >= LOW``."""
    if not is_integer(value) or _outside(int(value), low, high, False, False):
        bound = "" if low is None and high is None else " " + _interval(low, high)
        raise ParameterError(f"{name} = {value!r}: must be an integer{bound}")
    return int(value)


def real(value: Any, name: str, low: float | None = None, high: float | None = None, *, open_low: bool = False,
         open_high: bool = False, finite: bool = True) -> float:
    """``value`` as a ``float`` when it is a real (module docstring), finite unless ``finite=False`` (NaN is never
    accepted), inside the interval from ``low`` to ``high`` with each end open or closed as stated; else
    ParameterError ``NAME = VALUE: must be a (finite) number in [LOW, HIGH]``."""
    ok = is_real(value) and not math.isnan(value) and (math.isfinite(value) or not finite)
    if not ok or _outside(float(value), low, high, open_low, open_high):
        bound = "" if low is None and high is None else " " + _interval(low, high, open_low, open_high)
        raise ParameterError(f"{name} = {value!r}: must be a {'finite ' if finite else ''}number{bound}")
    return float(value)


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
        if not math.isfinite(value) or _outside(value, low, high, open_low, open_high):
            raise argparse.ArgumentTypeError(f"{text} is not {_interval(low, high, open_low, open_high)}")
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


INFINITIES = {"inf": math.inf, "infinity": math.inf, "-inf": -math.inf, "-infinity": -math.inf}


def parse_param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE read as JSON when it parses (numbers, true/false, null, lists), ``inf``, or else as a
    string; the policy then checks the type and range (``policies.make``).  A number too large for a float is an
    error, never silently infinity."""
    if "=" not in text:
        raise ParameterError(f"--param {text!r}: expected NAME=VALUE")
    name, raw = text.split("=", 1)
    if raw.strip().lower() in INFINITIES:
        return name.strip(), INFINITIES[raw.strip().lower()]
    try:
        value = json.loads(raw, parse_constant=lambda c: raw)   # NaN / Infinity literals stay strings
    except json.JSONDecodeError:
        value = raw
    if isinstance(value, float) and not math.isfinite(value):
        raise ParameterError(f"--param {text!r}: {raw} does not fit a float (write inf for infinity)")
    return name.strip(), value
