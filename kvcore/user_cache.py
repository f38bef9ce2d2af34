"""Where the toolkit keeps what it may recompute: ``$XDG_CACHE_HOME/kv-eviction-theory`` (``~/.cache/...`` when
``XDG_CACHE_HOME`` is unset or empty, as the XDG base directory specification says).  The output-quality cache
(:mod:`realtrace.quality.cache`) and the main job's item timings (:mod:`paper_check.runner`) live under it; deleting
it loses time, never a result."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_root() -> Path:
    """``$XDG_CACHE_HOME/kv-eviction-theory`` (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kv-eviction-theory"
