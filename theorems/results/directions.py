"""The mass surrogate's failure directions on the model's heads (paper §3, §9): the committed measurement of both
exact optima per head (``realtrace/data/value_directions``, written by :func:`realtrace.quality.directions.record`;
PROVENANCE.md) read without torch, its instance heads replayed, and a planted positive control.

* :func:`committed_directions` -- per layer group the value-weighted cost each optimum pays and what the mass optimum
  gives away on it (:func:`realtrace.quality.directions.group_summary`), the per-head exactness of the two optima
  (each no worse on its own cost, read from the committed numbers), and the largest instance of each direction
  recomputed from the committed head files (:func:`realtrace.quality.directions.head_directions` on
  :func:`~realtrace.quality.directions.load_head`).
* :func:`planted_control` -- a synthetic head with Dirichlet rows and values of which every fifth is scaled by 4
  (outliers by construction) and peaked rows (heavy entries), on which the same detector must find both directions:
  the positive control of the "not-reproduced" verdict (VERDICTS.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from realtrace import DATA_DIR, input_dir, set_name

DIRECTIONS_DIR = DATA_DIR / "value_directions"   # committed; readers read realtrace.input_dir of its name
HEAD_FILES = {"outlier": "outlier.npz", "aligned": "aligned.npz"}
KIND_KEY = {"outlier": "outlier", "aligned": "aligned_heavy"}


def committed_directions(directory: Path | None = None) -> dict | None:
    """The committed measurement (module docstring), or None when ``directory`` (default: the input set
    ``value_directions``, :func:`realtrace.input_dir`) holds no ``directions.json``."""
    from realtrace.quality.directions import group_summary, head_directions, load_head

    directory = directory or input_dir(DIRECTIONS_DIR.name)
    path = Path(directory) / "directions.json"
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    heads = doc["heads"]
    exact = {"value_optimum_no_worse_on_value": all(h["value"]["by_value"] <= h["value"]["by_mass"] for h in heads),
             "mass_optimum_no_worse_on_mass": all(h["mass"]["by_mass"] <= h["mass"]["by_value"] for h in heads)}
    instances = {}
    for kind, name in HEAD_FILES.items():
        f = Path(directory) / name
        if not f.is_file():
            instances[kind] = None
            continue
        rows, values, meta = load_head(f)
        if (meta["prompt"], meta["budget"]) != (doc["prompt"], doc["budget"]):
            raise ValueError(f"{f}: saved at {meta['prompt']} K = {meta['budget']}, the measurement is "
                             f"{doc['prompt']} K = {doc['budget']}")
        replayed = head_directions(rows, values, meta["budget"])
        inst = replayed[KIND_KEY[kind]]
        instances[kind] = None if inst is None else {
            "file": f"{set_name(Path(directory).name)}/{name}", "layer": meta["layer"], "kv": meta["kv"],
            "count_in_head": replayed["outliers" if kind == "outlier" else "aligned"], **inst}
    return {"source": set_name(Path(directory).name), "prompt": doc["prompt"], "tokens": doc["tokens"],
            "budget": doc["budget"], "model": doc["model"], "thresholds": doc["thresholds"], "heads": len(heads),
            "exact": exact, "groups": group_summary(heads), "instances": instances}


def planted_control(seed: int = 0, T: int = 40, k: int = 6) -> dict:
    """The positive control (module docstring): the direction counts and largest instances the detector finds on
    the planted head."""
    from realtrace.quality.directions import head_directions

    rng = np.random.default_rng(seed)
    rows = np.zeros((T, T))
    for t in range(T):
        rows[t, :t + 1] = rng.dirichlet(np.full(t + 1, 0.3))
    values = rng.normal(size=(T, 8))
    values[::5] *= 4.0
    h = head_directions(rows, values, k)
    return {"T": T, "k": k, "seed": seed, "outliers": h["outliers"], "aligned": h["aligned"],
            "found_both": h["outliers"] > 0 and h["aligned"] > 0}


__all__ = ["DIRECTIONS_DIR", "committed_directions", "planted_control"]
