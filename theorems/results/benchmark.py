"""The quality benchmark of issue 29, claims 6-8, read from one committed sweep (no torch).

The sweep (``realtrace/data/quality_benchmark`` and ``realtrace/data/quality_blind_spot``, PROVENANCE.md there) is
``python -m paper_check quality --all`` with four closed-loop NM policies (H2O, TOVA, StreamingLLM, FIFO), four
kvpress prefill presses (SnapKV, AdaKV, Knorm, ExpectedAttention) and the exact NM optimum, on two prompt sets
declared before it ran:

* the *easy* set: the five shortest of the nine default prompts (needles at depth 10/50/90 %, two
  register look-ups; 372-682 tokens), at K = 32, 64 and 128, the optimum exact and lazy on complete rows;
* the *hard* set: three ``shift-G-dD`` prompts (the decoy-and-sleeper shape of Theorem 2 in text: a drilled register
  hoards the attention, a locker code stated once is asked last; 854-1,240 tokens), at K = 64 and 128, the optimum
  solved on the top 32 entries per row (its ``opt_gap`` bounds the distance from the exact one);
* plus ``needle-1200-d50`` at K = 128 with the exact optimum (one of the prompts the exact optimum misses).

Everything here is arithmetic on the committed ``--json`` documents: the per-(prompt, budget) cases
(:func:`cases`), the per-set summaries of claim ``tracking-benchmark`` (:func:`set_summary`), the measured points of
Figure 14 (:func:`fig14_points`) and the cases where a rule beats the optimum in the output
(:func:`blind_spot_cases`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from realtrace import DATA_DIR, input_dir, model_data_dir
from realtrace.quality.report import slug, steps_name

BENCH_DIR = DATA_DIR / "quality_benchmark"   # committed; readers read realtrace.input_dir of its name
BLIND_DIR = DATA_DIR / "quality_blind_spot"
EASY = ("needle-400-d10", "needle-400-d50", "kv-24-12", "needle-600-d90", "kv-40-1")
HARD = ("shift-16-d0", "shift-16-d50", "shift-24-d50")
POLICIES = ("H2O", "TOVA", "StreamingLLM", "FIFO")
PRESSES = ("SnapKV", "AdaKV", "Knorm", "ExpectedAttention")
RULES = POLICIES + tuple(f"press:{p}" for p in PRESSES)
OPT = "OPT"
MEASURES = ("right", "kl_stream", "kl_answer", "dnll_answer", "regret_stream", "regret_answer")


def read_cases(files) -> dict[tuple[str, int], dict]:
    """Per (prompt, budget) of the committed documents ``files`` (a missing file contributes nothing):
    ``{"prompt", "budget", "tokens", "control" (the full cache answers right), "opt_top", "opt_gap",
    "runs": {rule or "OPT": {measure: value}}}``; a prompt/budget seen in two files is an error (one sweep)."""
    out: dict[tuple[str, int], dict] = {}
    for f in files:
        f = Path(f)
        if not f.is_file():
            continue
        doc = json.loads(f.read_text())
        info = {p["name"]: p for p in doc["prompts"]}
        for run in doc["runs"]:
            if run["kind"] not in ("policy", "press", "opt"):
                continue
            for prompt, m in run["prompts"].items():
                case = out.setdefault((prompt, run["budget"]), {
                    "prompt": prompt, "budget": run["budget"], "tokens": info[prompt]["tokens"],
                    "control": bool(info[prompt]["full_cache_right"]), "opt_top": doc["settings"]["opt_top"],
                    "opt_gap": None, "source": f"{f.parent.name}/{f.name}", "runs": {}})
                if case["source"] != f"{f.parent.name}/{f.name}":
                    raise ValueError(f"{f}: {prompt} at K = {run['budget']} also in {case['source']}")
                case["runs"][run["config"]] = {q: m[q] for q in MEASURES}
                if run["kind"] == "opt":  # the bound of the run (the prompts' entries carry none)
                    case["opt_gap"] = run["total"].get("opt_gap")
    return out


def exact_files() -> tuple[Path, ...]:
    """The stdout of each stage of the sweep whose optimum is exact (PROVENANCE.md), in the input sets
    ``quality_benchmark`` and ``quality_blind_spot`` (committed, or their recomputed copies: :func:`realtrace.input_dir`)."""
    bench, blind = input_dir(BENCH_DIR.name), input_dir(BLIND_DIR.name)
    return bench / "easy_K64_K128.json", bench / "easy_K32.json", blind / "long_K128.json"


def hard_files() -> tuple[Path, ...]:
    """The hard (shifted) set's stage, optimum on top-32 rows."""
    return (input_dir(BENCH_DIR.name) / "hard_K64_K128.json",)


def cases(exact: bool = True) -> dict[tuple[str, int], dict]:
    """The committed cases: with ``exact`` those whose optimum is exact (complete rows), else the hard set's."""
    return read_cases(exact_files() if exact else hard_files())


def _mean(xs) -> float:
    xs = list(xs)
    return math.fsum(xs) / len(xs) if xs else float("nan")


def set_summary(cs: dict[tuple[str, int], dict], prompts, budget: int) -> dict:
    """Per rule on the positive-control prompts of ``prompts`` at ``budget``: answers right, mean answer-NLL change,
    mean stream KL, and the tracking gap -- the rule's NM regret per step minus the optimum's on the same prompt
    (stream rows and answer rows), averaged over the prompts.  ``counted`` names the prompts, ``excluded`` those the
    full cache answers wrongly."""
    here = [cs[(p, budget)] for p in prompts if (p, budget) in cs]
    counted = [c for c in here if c["control"]]
    rules = {}
    for r in RULES:
        rows = [c for c in counted if r in c["runs"] and OPT in c["runs"]]
        if len(rows) != len(counted) or not rows:
            continue
        rules[r] = {"right": sum(bool(c["runs"][r]["right"]) for c in rows),
                    "dnll_answer": _mean(c["runs"][r]["dnll_answer"] for c in rows),
                    "kl_stream": _mean(c["runs"][r]["kl_stream"] for c in rows),
                    "gap_stream": _mean(c["runs"][r]["regret_stream"] - c["runs"][OPT]["regret_stream"] for c in rows),
                    "gap_answer": _mean(c["runs"][r]["regret_answer"] - c["runs"][OPT]["regret_answer"] for c in rows)}
    opt_right = sum(bool(c["runs"][OPT]["right"]) for c in counted if OPT in c["runs"])
    gaps = [c["opt_gap"] for c in counted if c["opt_gap"] is not None]
    return {"budget": budget, "counted": [c["prompt"] for c in counted],
            "excluded": [c["prompt"] for c in here if not c["control"]], "opt_right": opt_right,
            "opt_gap_max": max(gaps) if gaps else None, "rules": rules}


def fig14_points(cs: dict[tuple[str, int], dict] | None = None, prompts=EASY) -> dict:
    """Figure 14's measured points: per configuration (each rule and the optimum) and budget on the
    positive-control prompts of ``prompts``, the budget as a fraction of the prompt (mean of K / T), the accuracy
    (share answered right) and the mean answer-NLL change and stream KL from the full cache."""
    cs = cases() if cs is None else cs
    budgets = sorted({b for (p, b) in cs if p in prompts})
    series: dict[str, list[dict]] = {}
    for b in budgets:
        counted = [cs[(p, b)] for p in prompts if (p, b) in cs and cs[(p, b)]["control"]]
        for name in RULES + (OPT,):
            rows = [c for c in counted if name in c["runs"]]
            if rows and len(rows) == len(counted):
                series.setdefault(name, []).append({
                    "budget": b, "fraction": _mean(b / c["tokens"] for c in rows),
                    "accuracy": sum(bool(c["runs"][name]["right"]) for c in rows) / len(rows),
                    "dnll_answer": _mean(c["runs"][name]["dnll_answer"] for c in rows),
                    "kl_stream": _mean(c["runs"][name]["kl_stream"] for c in rows), "prompts": len(rows)})
    return {"prompts": list(prompts), "budgets": budgets, "series": series}


def case_file(prompt: str, budget: int, config: str) -> Path:
    """Where a saved case's schedule of ``config`` lives: one ``.npz`` replayable as ``file:PATH``, in the committed
    set of the model being read (:func:`realtrace.model_data_dir`: a case is that model's schedules)."""
    return model_data_dir() / BLIND_DIR.name / f"case_{prompt}_K{budget}_{slug(config)}.npz"


def extract_case(steps_dir: Path, prompt: str, budget: int, config: str, out: Path | None = None) -> Path:
    """From a ``--steps`` folder, ``config``'s schedule of ``prompt`` at ``budget`` and its per-row outputs
    (``drop_``, ``kl_``, ``dnll_``, ``top1_``, ``error_``, ``displaced_`` of that prompt) in one file, written
    atomically to ``out`` (default :func:`case_file`)."""
    from kvcore.atomic import replacing

    src = Path(steps_dir) / steps_name(config, budget)
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k.endswith(f"_{prompt}")}
    if f"drop_{prompt}" not in arrays:
        raise ValueError(f"{src}: no schedule drop_{prompt}")
    target = case_file(prompt, budget, config) if out is None else Path(out)
    with replacing(target) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)
    return target
