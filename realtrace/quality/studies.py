"""Several quality studies of the same prompts run in one process, each written to its own file: how ``paper_check
--full`` remakes an input set whose files are ``quality --json`` outputs on the same prompts
(:data:`theorems.quality_inputs.QUALITY_INPUTS`), so that each prompt's reference and complete rows are made once
for all of them instead of once per file.

A spec is a dict (or its JSON text): ``settings``, the keyword arguments :func:`realtrace.quality.run.evaluate_many`
shares among the studies (``prompts``, ``mode``, ``opt_top``, ``workers``, ``threads``, ...), and ``studies``, per
file its name ``out``, its ``budgets`` and its ``configs`` -- each a name as ``quality`` takes it (``H2O``,
``press:SnapKV``, ``OPT:static``) or a pair ``[name, params]`` for a configured policy (``["Default", {"recent": 32,
"n_sinks": 4}]``, as ``quality Default -p recent=32 -p n_sinks=4``).  Each file is what ``quality ... --json``
prints for its study, except the prompts' ``cache`` counts (:func:`~realtrace.quality.run.evaluate_many`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kvcore.atomic import write_text
from kvcore.errors import ParameterError

from .configs import parse_config
from .report import without_steps


def _configs(names: list, mode: str) -> list:
    out = []
    for c in names:
        name, params = (c, None) if isinstance(c, str) else c
        out += parse_config(name, mode, params)
    return out


def write_studies(spec: str | dict, out_dir: str | Path) -> list[Path]:
    """Run the studies of ``spec`` (module docstring) as one and write each to ``out_dir / out``; returns the
    paths.  The files are written only once every study has run."""
    from .run import evaluate_many

    spec = json.loads(spec) if isinstance(spec, str) else spec
    settings = dict(spec.get("settings", {}))
    outs = [s["out"] for s in spec["studies"]]
    if len(set(outs)) != len(outs) or any(Path(o).name != o for o in outs):
        raise ParameterError(f"studies: each out must be a distinct file name, got {outs}")
    mode = settings.get("mode", "closed")
    studies = [(_configs(s["configs"], mode), s["budgets"]) for s in spec["studies"]]
    results = evaluate_many(studies, say=lambda m: sys.stderr.write(m + "\n"), **settings)
    return [write_text(Path(out_dir) / name, json.dumps(without_steps(res), indent=1) + "\n")
            for name, res in zip(outs, results)]


__all__ = ["write_studies"]
