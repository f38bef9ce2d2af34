"""Validation of the measured data a caller passes to a figure builder: plain dicts and lists of numbers.

Every problem is one :class:`~kvcore.errors.ParameterError` line naming the figure and the offending key.
"""

from __future__ import annotations

import math
from typing import Any

from kvcore.errors import ParameterError
from kvcore.numbers import is_real


def fail(fig_id: str, message: str) -> ParameterError:
    return ParameterError(f"figure {fig_id}: data: {message}")


def mapping(fig_id: str, data: Any, allowed: set[str]) -> dict:
    """``data`` as a dict with only ``allowed`` keys (``None`` means no data: an empty dict)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise fail(fig_id, f"expected a dict with keys {sorted(allowed)}, got {type(data).__name__}")
    unknown = set(data) - allowed
    if unknown:
        raise fail(fig_id, f"unknown key(s) {sorted(unknown)} (allowed: {sorted(allowed)})")
    return data


def number(fig_id: str, where: str, value: Any, *, positive: bool = False, nonneg: bool = False) -> float:
    if not is_real(value):
        raise fail(fig_id, f"{where} = {value!r}: not a number")
    x = float(value)
    if not math.isfinite(x):
        raise fail(fig_id, f"{where} = {value!r}: not finite")
    if positive and x <= 0:
        raise fail(fig_id, f"{where} = {value!r}: must be > 0")
    if nonneg and x < 0:
        raise fail(fig_id, f"{where} = {value!r}: must be >= 0")
    return x


def records(fig_id: str, data: dict, key: str, fields: dict[str, str], text: tuple[str, ...] = ()) -> list[dict]:
    """``data[key]`` as a list of dicts; ``fields`` maps each numeric field to "req" / "opt"; "label" and the
    ``text`` fields are free text (absent: empty).

    Numeric fields must be finite and >= 0 (all plotted quantities here are counts, ratios or masses).
    """
    rows = data.get(key, [])
    if not isinstance(rows, (list, tuple)):
        raise fail(fig_id, f"{key} must be a list of records, got {type(rows).__name__}")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise fail(fig_id, f"{key}[{i}] must be a dict, got {type(row).__name__}")
        unknown = set(row) - set(fields) - {"label", *text}
        if unknown:
            raise fail(fig_id, f"{key}[{i}]: unknown field(s) {sorted(unknown)}")
        clean = {name: str(row.get(name, "")) for name in ("label", *text)}
        for name, need in fields.items():
            if name not in row:
                if need == "req":
                    raise fail(fig_id, f"{key}[{i}]: missing field {name!r}")
                continue
            clean[name] = number(fig_id, f"{key}[{i}].{name}", row[name], nonneg=True)
        out.append(clean)
    return out


def integer(fig_id: str, where: str, value: Any, low: int = 1) -> int:
    """``value`` as an integer >= ``low``: figure data are JSON numbers, where ``4`` and ``4.0`` are the same number,
    so an integral float counts (checked as a :func:`number` first)."""
    x = number(fig_id, where, value)
    if x != int(x) or x < low:
        raise fail(fig_id, f"{where} = {x:g}: must be an integer >= {low}")
    return int(x)


def sentences(fig_id: str, data: dict, key: str = "notes") -> list[str]:
    """``data[key]`` as a list of sentences (absent: empty)."""
    notes = data.get(key, [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise fail(fig_id, f"{key} must be a list of sentences")
    return notes


def series(fig_id: str, data: dict, key: str) -> dict[str, list[float]]:
    """``data[key]`` as ``{label: [numbers...]}`` (each list non-empty)."""
    raw = data.get(key, {})
    if not isinstance(raw, dict):
        raise fail(fig_id, f"{key} must be a dict label -> list of numbers, got {type(raw).__name__}")
    out = {}
    for label, values in raw.items():
        if not isinstance(values, (list, tuple)) and not hasattr(values, "tolist"):
            raise fail(fig_id, f"{key}[{label!r}] must be a list of numbers")
        vals = [number(fig_id, f"{key}[{label!r}][{i}]", v) for i, v in enumerate(list(values))]
        if not vals:
            raise fail(fig_id, f"{key}[{label!r}] is empty")
        out[str(label)] = vals
    return out
