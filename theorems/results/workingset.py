"""Working sets and quality floors of real prompts (paper §7's qualifications of Theorem 4, §8 "Quality floors are
budget assumptions" and "Reasoning models stress the assumption", §11 "Working-set-adaptive budgets"), measured in
SmolLM2-135M-Instruct on committed data (``realtrace/data/quality_workingset/``, read without torch).

Everything below was declared before any prompt was measured (2026-12-03, issue 29, claims 3-5).

**Persistent heavy-set size of a prompt** (paper §7: ``|U_s H_s(rho tau)|``, the tokens attended above a level in the
recent window, Denning's working set). Per layer and KV head (SmolLM2's 30 x 3 = 90; Gemma 3 270M's 18 x 1), on the
complete full-cache head-mean rows (a sliding-window layer's weigh only its window, as in the model) ``a[t, .]`` of the
whole text (prompt and teacher-forced answer): ``U_t = |{i : a[s, i] >= LEVEL for some s in [t - WINDOW, t - 1]}|``
(:func:`realtrace.analysis.heavy_union_sizes`), and the head's working set is its peak ``max_t U_t`` (Theorem 4's
budget condition holds at every step only when ``k`` covers the peak). The prompt's working set ``ws`` is the mean of
the heads' peaks: the slots that hold every head's working set, divided by the number of heads, i.e. the uniform
per-head budget with the same total. ``LEVEL`` = 0.01 (one hundredth of a row: the per-row unit of VERDICTS.md's
significance margin), ``WINDOW`` = 32 rows. The median and the maximum over heads are recorded beside it, not decided
on.

**Quality floor of a prompt under a policy**.  The smallest budget ``K`` of :data:`GRID` (per layer and KV head)
such that at ``K`` and at every larger grid budget the replay *passes*: the teacher-forced answer is right
(:func:`realtrace.quality.metrics.answer_right`) and its mean KL from the full cache over the answer rows is at most
:data:`KL_PASS` = 0.1 nats.  A prompt that does not pass at the largest grid budget has its floor *above the grid*
(``None``; counted as ``2 x 256`` where a number is needed, and named).  Policies: the exact NM optimum (``OPT``,
solved on the 32 largest entries of each row, its gap bound reported) and three online rules closed loop (H2O,
TOVA, StreamingLLM at registered defaults).  Only prompts the full cache answers right are counted (positive
control).

**Adaptive budgets at equal total memory** (:func:`adaptive_budgets`).  For a mix of ``n`` prompts and a fixed
budget ``K``, the total is ``n K`` slots per layer and KV head.  The adaptive budget of prompt ``p`` is the smallest
grid budget ``>= c ws_p`` (clipped to the grid), with the largest scale ``c`` whose budgets sum to at most ``n K``;
so each adaptive configuration is a replayed grid point (never interpolated) and never uses more memory than the
fixed one.  Quality of a mix: the number of prompts that pass, then the mean answer KL.

**Prompt groups.**  Sharp attention: the ``needle-N-dD`` prose prompts (one four-digit code asked out of a page of
documentation).  Broad attention: the hotel registers (``kv-G-P``, ``shift-G-dD``), where every line is a candidate
answer.  Long-range versus near: the same needle page asked for the code at depth 10 % (far back) or at 90 % (just
read), paired by length (:data:`PAIRS`).

**Two-hop prompts** (declared 2026-12-04, after a run of the positive control alone had answered 5 of 12 two-hop
prompts right and before any working set, replay or floor of them was measured).  Paper §8 names multi-hop
reasoning and a definition used much later; :data:`HOP_PROMPTS` are ``chain-N-dD`` and ``alias-N-dD``
(:mod:`realtrace.quality.prompts`) at the needle pairs' lengths, committed apart in
``realtrace/data/long_range_two_hop`` (same grid, policies, optimum and working-set measure as above).  Each
counted one is paired with the one-hop prompt of its length that asks the code just read (:data:`HOP_PAIRS`), and
the pairs are decided by the same three parts as the needle pairs; a two-hop prompt the full cache answers wrong
is excluded, as everywhere.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from kvcore.traces import AttentionTrace
from realtrace import DATA_DIR, input_dir
from realtrace.analysis import heavy_union_sizes

DIRECTORY = DATA_DIR / "quality_workingset"   # committed; readers read realtrace.input_dir of its name
SWEEP = "sweep.json"
WORKING_SETS = "working_sets.json"
LEVEL = 0.01
WINDOW = 32
GRID = (16, 32, 64, 128, 256)
KL_PASS = 0.1
ABOVE_GRID = 2 * GRID[-1]
OPT_TOP = 32
POLICIES = ("OPT", "H2O", "TOVA", "StreamingLLM")
PROMPTS = ("needle-400-d10", "needle-400-d90", "needle-600-d10", "needle-600-d90", "kv-24-12", "kv-40-20",
           "shift-12-d50")
PAIRS = (("needle-400-d10", "needle-400-d90"), ("needle-600-d10", "needle-600-d90"))
HOP_DIRECTORY = DATA_DIR / "long_range_two_hop"   # not quality_*: the regret-surrogate claim's sets stay issue 29's
HOP_PROMPTS = tuple(f"{kind}-{n}-d{d}" for kind in ("alias", "chain") for n in (400, 600) for d in (10, 90))
HOP_PAIRS = tuple((q, f"needle-{q.split('-')[1]}-d90") for q in HOP_PROMPTS)
FIXED = (32, 64, 128)
MARGIN = 0.10  # a tenth of the reference's own value (VERDICTS.md's significance rule)
QUALITY_FLOOR = math.log(1.01)  # VERDICTS.md's quality margin floor, nats


def group(prompt: str) -> str:
    """``"sharp"`` for the needle prose prompts, ``"broad"`` for the registers (module docstring)."""
    return "sharp" if prompt.startswith("needle-") else "broad"


# ---- the working set (numpy; the model's side is :func:`measure`) ---------------------------------------------------

def complete_trace(rows: np.ndarray, source: str = "rows") -> AttentionTrace:
    """A ``(T, T)`` causal row matrix as a complete toolkit trace (every entry ``i <= t`` stored, residual 0)."""
    T = rows.shape[0]
    r, c = np.tril_indices(T)
    indptr = np.concatenate([[0], np.cumsum(np.arange(1, T + 1))])
    return AttentionTrace(indptr, c, np.asarray(rows, float)[r, c], np.zeros(T), source)


def head_working_set(rows: np.ndarray, level: float = LEVEL, window: int = WINDOW) -> int:
    """One head's working set: ``max_t |U_{s in [t - window, t - 1]} H_s(level)|`` on its complete rows."""
    return int(heavy_union_sizes(complete_trace(rows), level, window).max())


def summarize_heads(peaks: list[int]) -> dict:
    """The prompt's working set (the mean of the heads' peaks) and, recorded only, the median and the maximum."""
    p = np.asarray(peaks, float)
    return {"mean": float(p.mean()), "median": float(np.median(p)), "max": int(p.max()), "heads": [int(x) for x in p]}


def measure(prompts=PROMPTS, threads: int = 1, say=None, model=None, device: str = "cpu") -> dict:
    """The working set of each built-in prompt in the model (``--model``, default SmolLM2-135M-Instruct; ``[real]``
    extra), from the full-cache
    pass's queries and keys, read from or written to the quality reference cache (``$KV_QUALITY_CACHE``) exactly as
    ``python -m paper_check quality`` does, so the rows are the ones its replays are charged on."""
    from realtrace.quality.cache import Store, cache_dir, full_cache
    from realtrace.quality.exact import head_rows
    from realtrace.quality.inputs import tokenize_prompts
    from realtrace.quality.run import worker_model

    store = Store(cache_dir())
    lm = worker_model(threads, store.directory, model, device)  # from the model's copy in the same cache
    scaling = lm.model.model.layers[0].self_attn.scaling
    windows = lm.geometry.windows  # a sliding-window layer's rows (Gemma 3) weigh only its window, as in the model
    out = {}
    for ids in tokenize_prompts(list(prompts), lm.tokenizer, lm.start):
        qkv, _, _ = full_cache(lm, ids, store)
        peaks = [head_working_set(head_rows(lm.torch, qkv[layer][0], qkv[layer][1], g, scaling, windows[layer]).numpy())
                 for layer in sorted(qkv) for g in range(qkv[layer][1].shape[1])]
        out[ids.name] = {"tokens": len(ids.ids), **summarize_heads(peaks)}
        if say:
            say(f"{ids.name}: working set {out[ids.name]['mean']:.1f} (mean of {len(peaks)} heads)")
    return {"level": LEVEL, "window": WINDOW, "model": lm.source.exact, "prompts": out}


# ---- the committed data -----------------------------------------------------------------------------------------

class DataError(ValueError):
    """A committed file that is not the declared experiment."""


def load(directory: Path | None = None, prompts: tuple[str, ...] = PROMPTS) -> dict | None:
    """The sweep (``--json`` of one ``paper_check quality --all`` command) and the working sets of ``directory``
    (default: the input set ``quality_workingset``, or ``long_range_two_hop`` for :data:`HOP_PROMPTS`; read where
    :func:`realtrace.input_dir` says), checked against the declared experiment on ``prompts``; None when either
    file is missing."""
    d = Path(directory or input_dir((HOP_DIRECTORY if prompts == HOP_PROMPTS else DIRECTORY).name))
    if not (d / SWEEP).exists() or not (d / WORKING_SETS).exists():
        return None
    sweep, ws = json.loads((d / SWEEP).read_text()), json.loads((d / WORKING_SETS).read_text())
    s = sweep["settings"]
    if tuple(s["budgets"]) != GRID or s["opt_top"] != OPT_TOP or s["mode"] != "closed" or s["top"] is not None:
        raise DataError(f"{d / SWEEP}: settings {s} are not the declared grid {GRID}, closed loop, --opt-top {OPT_TOP}")
    if tuple(s["prompts"]) != prompts:
        raise DataError(f"{d / SWEEP}: prompts {s['prompts']} are not the declared {list(prompts)}")
    if (ws["level"], ws["window"]) != (LEVEL, WINDOW) or ws["model"] != sweep["model"]["exact"]:
        raise DataError(f"{d / WORKING_SETS}: level/window/model differ from the declared ones or from the sweep's")
    missing = set(s["prompts"]) - set(ws["prompts"])
    if missing:
        raise DataError(f"{d / WORKING_SETS}: no working set for {sorted(missing)}")
    return {"sweep": sweep, "working_sets": ws["prompts"]}


def committed_table(directory: Path | None = None, prompts: tuple[str, ...] = PROMPTS) -> dict | None:
    """:func:`quality_table` of the committed data on ``prompts`` (None when it is missing)."""
    data = load(directory, prompts)
    return None if data is None else quality_table(data)


def hetero_passing(t: dict) -> dict:
    """Per policy, prompts passing on the heterogeneous mix (every counted prompt) under one fixed budget and under
    the adaptive split of the same total, summed over :data:`FIXED` (the figure's panel (b))."""
    comps = [mix_comparison(t, t["counted"], k) for k in FIXED]
    return {pol: {side: sum(c["policies"][pol][side]["passing"] for c in comps) for side in ("fixed", "adaptive")}
            for pol in POLICIES}


def _policy(config: str) -> str:
    return config.split("(", 1)[0]


def passes(m: dict) -> bool:
    """The declared pass criterion of one replay of one prompt."""
    return bool(m["right"]) and m["kl_answer"] <= KL_PASS


def floor(points: dict[int, dict]) -> int | None:
    """The smallest grid budget from which every larger one passes (``None``: above the grid)."""
    out = None
    for k in sorted(points, reverse=True):
        if not passes(points[k]):
            break
        out = k
    return out


def floor_number(f: int | None) -> int:
    return ABOVE_GRID if f is None else f


def quality_table(data: dict) -> dict:
    """Per counted prompt: group, tokens, working set; per policy and prompt: the replay at each grid budget
    (``right``, ``kl_answer``, ``pass``) and the floor.  Excluded prompts (the full cache wrong) are named."""
    sweep = data["sweep"]
    counted = [p["name"] for p in sweep["prompts"] if p["full_cache_right"]]
    grid: dict[str, dict[str, dict[int, dict]]] = {}
    for run in sweep["runs"]:
        pol = _policy(run["config"])
        if pol not in POLICIES:
            continue
        for prompt, m in run["prompts"].items():
            grid.setdefault(pol, {}).setdefault(prompt, {})[run["budget"]] = {
                "right": bool(m["right"]), "kl_answer": float(m["kl_answer"]), "pass": passes(m)}
    missing = [(p, q) for p in POLICIES for q in counted if set(grid.get(p, {}).get(q, {})) != set(GRID)]
    if missing:
        raise DataError(f"the sweep lacks a grid budget for (policy, prompt) {missing[:3]}")
    ws = data["working_sets"]
    opt_gap = max((r["total"]["opt_gap"] or 0.0) for r in sweep["runs"] if r["kind"] == "opt")
    return {"counted": counted, "excluded": [p["name"] for p in sweep["prompts"] if not p["full_cache_right"]],
            "prompts": {q: {"group": group(q), "tokens": ws[q]["tokens"], "ws": ws[q]["mean"],
                            "ws_median": ws[q]["median"], "ws_max": ws[q]["max"]} for q in counted},
            "replays": {p: {q: {str(k): grid[p][q][k] for k in GRID} for q in counted} for p in POLICIES},
            "floors": {p: {q: floor(grid[p][q]) for q in counted} for p in POLICIES},
            "opt_gap_max": opt_gap, "grid": list(GRID), "kl_pass": KL_PASS}


# ---- statistics shared by the claims ----------------------------------------------------------------------------

def ranks(a) -> np.ndarray:
    """0-based ranks, ties at their mean rank."""
    _, inverse, counts = np.unique(np.asarray(a, float), return_inverse=True, return_counts=True)
    start = np.cumsum(counts) - counts
    return (start + (counts - 1) / 2)[inverse]


def spearman(x, y) -> float | None:
    """Spearman's rho (ties at their mean rank); None below 3 points or for a constant side."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def adaptive_budgets(ws: dict[str, float], fixed: int, grid=GRID) -> dict[str, int]:
    """Per prompt the smallest grid budget ``>= c ws_p`` (clipped to the grid) for the largest scale ``c`` whose
    budgets sum to at most ``len(ws) x fixed`` (module docstring).  The candidate scales are the ``g / ws_p``
    at which some prompt's budget steps; the budgets rise with ``c``, so the largest feasible one is found by a
    scan."""
    total = len(ws) * fixed

    def at(c: float) -> dict[str, int]:
        return {p: next((g for g in grid if g >= c * w - 1e-9), grid[-1]) for p, w in ws.items()}

    best = {p: grid[0] for p in ws}
    for c in sorted({g / w for g in grid for w in ws.values() if w > 0}):
        b = at(c)
        if sum(b.values()) <= total:
            best = b
    return best


def floor_budgets(floors: dict[str, int | None], fixed: int, grid=GRID) -> dict[str, int]:
    """The positive control's split of the same total ``len(floors) x fixed``: every prompt starts at the smallest
    grid budget, then prompts in order of their measured floor (smallest first; one above the grid is never raised)
    are raised to their floor while the total allows.  It knows the floors, so it shows what a per-prompt budget
    *can* gain on these replays; it is no rule an online controller could follow."""
    left = len(floors) * fixed - len(floors) * grid[0]
    out = {p: grid[0] for p in floors}
    for p in sorted((p for p in floors if floors[p] is not None), key=lambda p: (floors[p], p)):
        extra = floors[p] - grid[0]
        if extra <= left:
            out[p], left = floors[p], left - extra
    return out


def mix_quality(replays: dict[str, dict[str, dict]], budgets: dict[str, int]) -> dict:
    """A mix's quality with per-prompt budgets: prompts passing, mean answer KL."""
    pts = [replays[p][str(k)] for p, k in budgets.items()]
    return {"passing": sum(r["pass"] for r in pts), "mean_kl_answer": float(np.mean([r["kl_answer"] for r in pts])),
            "slots": int(sum(budgets.values()))}


def planted_heads(T: int, local: int = 8, facts: int = 8, every: int = 4) -> dict:
    """The working-set measure's positive control on planted rows with a known answer.  *Near*: row ``t`` puts its
    mass uniformly on the sink (token 0) and the ``local`` tokens before it.  *Long-range*: the same, and every
    ``every``-th row also attends ``facts`` tokens stated at the start (tokens 1..facts) with the same weight, the
    way a reasoning step revisits facts far back.  The long-range head's working set must exceed the near one's:
    the revisited facts are heavy in every window."""
    def rows(revisit: bool) -> np.ndarray:
        a = np.zeros((T, T))
        for t in range(T):
            cols = {0, *range(max(0, t - local), t + 1)}
            if revisit and t % every == 0:
                cols |= set(range(1, min(facts, t) + 1))
            a[t, sorted(cols)] = 1.0 / len(cols)
        return a

    near, far = head_working_set(rows(False)), head_working_set(rows(True))
    return {"T": T, "near": near, "long_range": far, "ratio": far / near}


def beats(a: dict, f: dict) -> bool:
    """``a`` better than ``f``: more prompts pass, or as many and a mean answer KL lower by more than the quality
    margin ``max(0.10 x f's, ln 1.01)``."""
    if a["passing"] != f["passing"]:
        return a["passing"] > f["passing"]
    return f["mean_kl_answer"] - a["mean_kl_answer"] > max(MARGIN * f["mean_kl_answer"], QUALITY_FLOOR)


def mix_comparison(t: dict, prompts: list[str], fixed: int) -> dict:
    """Per policy, one fixed budget against the declared adaptive split of the same total over ``prompts``."""
    ws = {q: t["prompts"][q]["ws"] for q in prompts}
    budgets = adaptive_budgets(ws, fixed)
    out = {"budgets": budgets, "policies": {}}
    for pol in POLICIES:
        f = mix_quality(t["replays"][pol], {q: fixed for q in prompts})
        a = mix_quality(t["replays"][pol], budgets)
        o = mix_quality(t["replays"][pol], floor_budgets({q: t["floors"][pol][q] for q in prompts}, fixed))
        out["policies"][pol] = {"fixed": f, "adaptive": a, "beats": beats(a, f), "loses": beats(f, a),
                                "pass_gain_per_prompt": (a["passing"] - f["passing"]) / len(prompts),
                                "floor_sized": o, "floor_sized_beats": beats(o, f)}
    return out
