"""Displaced attention mass and attention-output error per layer and KV head, per run and prompt (claim
``displaced-mass-output-error``; paper §3, "A word on why the attention-mass regret ... is the right surrogate", and
§9): the compact file the claim decides from, derived from a ``quality --steps`` output folder.

The replay pass (:class:`realtrace.quality.replay.MaskedPass`) records, per layer, KV head and row ``t``, the output
error ``e_t = ||O_R - O|| / ||O||`` (over the KV head's query heads) and the displaced mass ``m_t = 1 - exp(L_R - L)``
(the softmax mass of the evicted keys, mean over the query heads); ``--steps`` saves both per row in
``DIR/steps/<config>_K<budget>.npz`` as ``error_<prompt>`` and ``displaced_<prompt>``, arrays ``(layers, KV heads,
rows)``.  :func:`derive` reduces each to its **stream mean**, rows ``K .. T - 2`` -- exactly the reduction behind the
study's ``error_stream`` / ``displaced_stream`` (float32 mean over rows, as :mod:`realtrace.quality.run` takes it), so
the mean of a run's ``(layers, KV heads)`` array is the committed JSON's per-prompt value to the bit.  The full cache
(no evictions, no ``--steps`` arrays) is not a run here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from kvcore.atomic import write_text

from .report import steps_name

PROMPTS = "kv-24-12,needle-400-d50,needle-600-d90"
# the sweep behind realtrace/data/quality_heads (its PROVENANCE.md spells it); ``--out DIR`` is added by remake
SWEEP = ("quality", "--all", "--policies", "H2O,TOVA,StreamingLLM", "--presses", "SnapKV,Knorm", "--budgets",
         "32,64,128", "--prompts", PROMPTS, "--steps", "--workers", "1", "--threads", "1", "--json")
STUDY, MEANS = "heads.json", "head_means.json"


def stream_mean(rows: np.ndarray, budget: int) -> np.ndarray:
    """``(layers, KV heads)``: the mean of ``rows[:, :, K:T-1]`` in the array's own dtype (the study's stream)."""
    return rows[:, :, budget:rows.shape[2] - 1].mean(axis=2)


def derive(out_dir: str | Path) -> dict:
    """The compact per-head file of a ``quality --steps --out DIR`` folder (module docstring): ``{"scope", "model",
    "layers", "kv_heads", "points": [{"config", "kind", "budget", "prompt", "displaced", "error"}, ...]}``, the two
    arrays as nested lists ``[layer][KV head]``, in the order of the study's runs and prompts."""
    out = Path(out_dir)
    study = json.loads((out / "quality.json").read_text())
    runs = []
    for run in study["runs"]:
        if run["kind"] == "full":
            continue
        path = out / "steps" / steps_name(run["config"], run["budget"])
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no per-row arrays (was the study run with --steps?)")
        with np.load(path) as arrays:
            for prompt in run["prompts"]:
                means = {q: stream_mean(arrays[f"{q}_{prompt}"], run["budget"]) for q in ("displaced", "error")}
                runs.append({"config": run["config"], "kind": run["kind"], "budget": run["budget"], "prompt": prompt,
                             **{q: [[float(x) for x in row] for row in m] for q, m in means.items()}})
    shape = np.asarray(runs[0]["error"]).shape if runs else (0, 0)
    return {"scope": "stream: rows K .. T - 2, mean per layer and KV head", "model": study["model"]["exact"],
            "layers": int(shape[0]), "kv_heads": int(shape[1]), "points": runs}


def derive_file(out_dir: str, target: str) -> None:
    """:func:`derive` of ``out_dir`` written to ``target`` (atomically), one run a line."""
    doc = derive(out_dir)
    head = json.dumps({k: v for k, v in doc.items() if k != "points"})[:-1]
    write_text(target, head + ', "points": [\n' + ",\n".join(json.dumps(r) for r in doc["points"]) + "\n]}\n")


def remake(target: str, *args: str) -> None:
    """The whole set into ``target``: the sweep :data:`SWEEP` with ``args`` added (``--model M`` for another
    model; its stdout becomes ``heads.json``), then :func:`derive_file` of its folder into ``head_means.json``; the
    per-row folder is discarded."""
    dest = Path(target)
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([sys.executable, "-m", "paper_check", *SWEEP, *args, "--out", tmp], stdout=subprocess.PIPE,
                           text=True)
        if p.returncode != 0:
            sys.exit(p.returncode)
        write_text(dest / STUDY, p.stdout)
        derive_file(tmp, str(dest / MEANS))


__all__ = ["MEANS", "PROMPTS", "STUDY", "SWEEP", "derive", "derive_file", "remake", "stream_mean"]
