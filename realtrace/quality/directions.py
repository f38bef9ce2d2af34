"""The mass surrogate's two failure directions (paper §3, "A word on why the attention-mass regret...", §9), measured
as the difference between two exact optima on the model's heads.

Per layer and KV head, on the complete full-cache rows ``a`` and the values ``v`` of one prompt, at budget ``k``:
the lazy exact optimum of the mass regret (paper Eq. 4; the same flow as ``quality OPT``, here through
:func:`kvcore.optima.nm_opt_costs` with the rows as costs, so no torch is needed) and the lazy exact optimum of the
value-weighted cost ``a[t, i] ||v_i - o_t||`` (``quality OPT:value``, :mod:`realtrace.quality.value_cost`).  Each is
optimal for its own cost, so the mass optimum's value cost minus the value optimum's is what the surrogate gives away
on the first-order output bound, and the reverse difference what the value optimum gives away on mass.

Where the two optima part, the entries they disagree on are the named directions (thresholds declared here, before
any head was measured; ``m_t = sum_j a[t, j] ||v_j - o_t||`` is row ``t``'s mass-weighted mean distance):

* *outlier value* (the mass understates the loss): an entry the mass optimum loses and the value optimum keeps with
  ``||v_i - o_t|| >= FAR * m_t``;
* *aligned value* (the mass overstates it): an entry the value optimum loses and the mass optimum keeps with
  ``||v_i - o_t|| <= NEAR * m_t`` and ``a[t, i] >= HEAVY`` (a hundredth of the row, the per-row unit of the declared
  significance margin, VERDICTS.md).

:func:`head_directions` is numpy only; :func:`measure` runs the model (``[real]`` extra) on a built-in prompt.
"""

from __future__ import annotations

import numpy as np

from ..geometry import layer_groups
from .schedule import drop_from_evictions, lazy_drop
from .value_cost import lost, total_cost, value_distance, value_optimum

FAR = 2.0
NEAR = 0.5
HEAVY = 0.01


def mass_optimum(rows: np.ndarray, k: int) -> np.ndarray:
    """The lazy exact optimum of the mass regret on complete ``rows`` (``quality OPT``'s schedule)."""
    from kvcore.optima import nm_opt_costs

    T = rows.shape[0]
    return lazy_drop(drop_from_evictions(nm_opt_costs(rows, k, record=True).evictions, T), k)


def _instance(mask: np.ndarray, key: np.ndarray, rows, dist, mean) -> dict | None:
    if not mask.any():
        return None
    t, i = np.unravel_index(np.argmax(np.where(mask, key, -np.inf)), mask.shape)
    return {"t": int(t), "i": int(i), "mass": float(rows[t, i]), "distance": float(dist[t, i]),
            "row_mean": float(mean[t]), "ratio": float(dist[t, i] / mean[t]), "value_cost": float(rows[t, i] * dist[t, i])}


def head_directions(rows: np.ndarray, values: np.ndarray, k: int) -> dict:
    """Both optima of one head and where they part (module docstring): ``mass`` and ``value`` totals of each
    schedule (``by_mass``, ``by_value``; correctly rounded sums), the counts of outlier and aligned entries and the
    largest of each (the outlier with the most value cost given away, the aligned entry with the most mass), each as
    ``{t, i, mass, distance, row_mean, ratio, value_cost}`` or ``None``."""
    rows = np.asarray(rows, dtype=np.float64)
    T = rows.shape[0]
    dist = value_distance(rows, values)
    costs = np.tril(rows) * dist
    by_mass, by_value = mass_optimum(rows, k), value_optimum(costs, k)[0]
    lm, lv = lost(by_mass, T), lost(by_value, T)
    mean = costs.sum(axis=1)
    ratio = np.divide(dist, mean[:, None], out=np.ones_like(dist), where=mean[:, None] > 0)
    outlier = lm & ~lv & (ratio >= FAR)
    aligned = lv & ~lm & (ratio <= NEAR) & (rows >= HEAVY)
    return {"mass": {"by_mass": total_cost(rows, by_mass), "by_value": total_cost(rows, by_value)},
            "value": {"by_mass": total_cost(costs, by_mass), "by_value": total_cost(costs, by_value)},
            "outliers": int(outlier.sum()), "aligned": int(aligned.sum()),
            "outlier": _instance(outlier, costs, rows, dist, mean), "aligned_heavy": _instance(aligned, rows, rows, dist,
                                                                                               mean)}


def measure(prompt: str, k: int, threads: int = 1, save=None, model=None, device: str = "cpu") -> dict:
    """Every layer and KV head of the model (``--model``, default SmolLM2-135M-Instruct) on the built-in ``prompt``
    at budget ``k``
    (:func:`head_directions`), as a JSON-able dict: ``prompt``, ``tokens``, ``budget``, ``thresholds``, ``model``
    and ``heads`` (one per layer and KV head, ``layer`` and ``kv`` added).  ``save(kind, layer, kv, rows, values,
    instance)`` (optional) receives the head holding the largest instance of each direction, for a replayable
    counterexample.  The model and the full-cache pass come from the quality cache (``$KV_QUALITY_CACHE``, as the
    quality command reads and writes it), where it holds them."""
    from .cache import Store, cache_dir
    from .run import _Reference, tokenize_prompts, worker_model

    store = Store(cache_dir())  # the model's copy and the full-cache pass, as the quality command keeps them
    lm = worker_model(threads, store.directory, model, device)
    (ids,) = tokenize_prompts([prompt], lm.tokenizer, lm.start)
    ref = _Reference(lm, ids, (k,), [], store)
    heads, best = [], {}
    for layer in range(ref.L):
        for g in range(ref.H):
            rows, values = ref.rows(layer, g).numpy(), ref.values(layer, g)
            h = {"layer": layer, "kv": g, **head_directions(rows, values, k)}
            heads.append(h)
            for kind, rank in (("outlier", "value_cost"), ("aligned_heavy", "mass")):
                inst = h[kind]
                if inst is not None and (kind not in best or inst[rank] > best[kind][0]):
                    best[kind] = (inst[rank], layer, g, rows, values, inst)
    if save is not None:
        for kind, (_, layer, g, rows, values, inst) in best.items():
            save(kind, layer, g, rows, values, inst)
    return {"prompt": prompt, "tokens": ref.T, "budget": k, "model": lm.source.exact,
            "thresholds": {"far": FAR, "near": NEAR, "heavy": HEAVY}, "heads": heads}


def save_head(path, prompt: str, k: int, layer: int, kv: int, rows: np.ndarray, values: np.ndarray) -> None:
    """One head as a replayable file (``.npz``, atomic): its rows' lower triangle rounded to float32 (``rows``, row
    by row), its values (float32, as the model holds them), the budget and where it came from.  :func:`load_head`
    reads it back; :func:`head_directions` on what it returns is the replay."""
    from kvcore.atomic import replacing

    tri = np.tril_indices(rows.shape[0])
    with replacing(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, rows=np.asarray(rows, np.float32)[tri], values=np.asarray(values, np.float32),
                            budget=k, layer=layer, kv=kv, prompt=prompt)


def load_head(path) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(rows, values, meta)`` of a file :func:`save_head` wrote: ``rows`` ``(T, T)`` float64, every row
    renormalised to sum 1 in float64 (as :func:`realtrace.quality.exact.head_rows` does), ``values`` float64,
    ``meta`` = ``budget``, ``layer``, ``kv``, ``prompt``."""
    with np.load(path, allow_pickle=False) as z:
        values = z["values"].astype(np.float64)
        T = values.shape[0]
        rows = np.zeros((T, T))
        rows[np.tril_indices(T)] = z["rows"].astype(np.float64)
        meta = {"budget": int(z["budget"]), "layer": int(z["layer"]), "kv": int(z["kv"]), "prompt": str(z["prompt"])}
    return rows / rows.sum(axis=1, keepdims=True), values, meta


def record(out_dir, prompt: str = "kv-24-12", k: int = 128, threads: int = 1, model=None) -> dict:
    """:func:`measure` (of ``model``, a ``--model`` value; default SmolLM2) written to ``out_dir``: ``directions.json`` (every head) and, per direction found, the head
    holding its largest instance (``outlier.npz``, ``aligned.npz``; :func:`save_head`).  Returns the result."""
    import json
    from pathlib import Path

    from kvcore.atomic import write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = {"outlier": "outlier.npz", "aligned_heavy": "aligned.npz"}
    res = measure(prompt, k, threads, lambda kind, layer, g, rows, values, inst: save_head(
        out / names[kind], prompt, k, layer, g, rows, values), model)
    write_text(out / "directions.json", json.dumps(res, indent=1) + "\n")
    return res


def group_summary(heads: list[dict]) -> dict:
    """Per layer group (the thirds of the model's layers, :func:`realtrace.geometry.layer_groups`: SmolLM2's 30
    layers 0-9, 10-19, 20-29; Gemma 3 270M's 18 layers 0-5, 6-11, 12-17) and in total: the summed value cost of each
    optimum, what the mass optimum gives away on it (absolute and as a share of the value optimum's), the same for
    mass the other way, and the direction counts.  The model's layers are those of ``heads`` (every layer is one)."""
    out = {}
    layers = 1 + max(h["layer"] for h in heads)
    for name, rng in (*layer_groups(layers), ("total", range(layers))):
        hs = [h for h in heads if h["layer"] in rng]
        if not hs:
            continue
        vm, vv = (sum(h["value"][s] for h in hs) for s in ("by_mass", "by_value"))
        mm, mv = (sum(h["mass"][s] for h in hs) for s in ("by_mass", "by_value"))
        out[name] = {"heads": len(hs), "value_by_mass": vm, "value_by_value": vv, "value_given_away": vm - vv,
                     "value_given_away_share": (vm - vv) / vv if vv > 0 else 0.0,
                     "mass_by_mass": mm, "mass_by_value": mv, "mass_given_away": mv - mm,
                     "outliers": sum(h["outliers"] for h in hs), "aligned": sum(h["aligned"] for h in hs),
                     "heads_with_outliers": sum(h["outliers"] > 0 for h in hs),
                     "heads_with_aligned": sum(h["aligned"] > 0 for h in hs)}
    return out


__all__ = ["FAR", "HEAVY", "NEAR", "group_summary", "head_directions", "load_head", "mass_optimum", "measure",
           "record", "save_head"]
