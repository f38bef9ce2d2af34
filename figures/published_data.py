"""The published numbers (Figs. 3 and 14, the seed-002 page's reported bars) and their checks, without plotting.

Every number lives in ``figures/data/published.json`` with one citation per point; :func:`load_published` checks the
file (known source and quantity, a positive finite number, its flags) before anything reads it.  Importing this
module does not import matplotlib, so the claims can read the data without the plotting stack.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from kvcore.errors import ParameterError
from kvcore.numbers import is_real

DATA_FILE = Path(__file__).with_name("data") / "published.json"
QUANTITIES = {"budget_fraction", "throughput_gain", "speedup", "memory_reduction", "memory_reduction_percent",
              "max_stream_tokens", "memory_waste_fraction_before", "memory_waste_fraction_after"}
POINT_FIELDS = {"system", "source", "quantity", "value", "low", "high", "where", "paper_states", "paper_where",
                "source_verified", "context", "quality", "token_budget_equivalent"}


@lru_cache(maxsize=1)
def load_published(path: str = str(DATA_FILE)) -> dict:
    """Read and check the data file: every point has a known source and quantity, a number, and its flags."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ParameterError(f"{path}: cannot read published data: {exc}") from None
    sources = raw.get("sources", {})
    for i, p in enumerate(raw.get("points", [])):
        where = f"{path}: points[{i}]"
        unknown = set(p) - POINT_FIELDS
        if unknown:
            raise ParameterError(f"{where}: unknown field(s) {sorted(unknown)}")
        if p.get("source") not in sources:
            raise ParameterError(f"{where}: source {p.get('source')!r} is not in 'sources'")
        if p.get("quantity") not in QUANTITIES:
            raise ParameterError(f"{where}: quantity {p.get('quantity')!r} is not one of {sorted(QUANTITIES)}")
        nums = [p[k] for k in ("value", "low", "high") if k in p]
        if not nums or not all(is_real(x) and math.isfinite(x) and x > 0 for x in nums):
            raise ParameterError(f"{where}: needs a positive finite value/low/high")
        for flag in ("paper_states", "source_verified"):
            if not isinstance(p.get(flag), bool):
                raise ParameterError(f"{where}: {flag} must be true or false")
        if not p.get("where"):
            raise ParameterError(f"{where}: 'where' (place in the cited source) is empty")
    return raw


def points(quantity: str) -> list[dict]:
    return [p for p in load_published()["points"] if p["quantity"] == quantity]


def citation(source_key: str) -> str:
    s = load_published()["sources"][source_key]
    first = s["authors"].split(",")[0]
    return f"{first} et al., {s['venue']} {s['year']}"
