"""The real-trace study at scale (issue 16, item 4): every layer and KV head of one or more trace sets, several NM
budgets, every registered NM policy and the exact NM optimum, run as independent tasks through
:mod:`kvcore.tasks` (serially, on a local Dask cluster, or on an existing one).

``python -m realtrace study --traces DIR [--traces DIR ...] --budgets 256,512,1024 --out OUT [--workers N |
--scheduler ADDRESS] [--seeds S] [--json]``

Tasks (each one self-contained, so the cluster run returns exactly the serial result):

* one **solve** per (trace, budget ``k``): the exact NM optimum ``optimum(trace, k, model="nm")`` (paper Eq. 4's
  regret; SPEC section 3), every policy of ``policies.all_policies("nm")`` measured against it by
  :func:`kvcore.measure.measure` (randomized policies over seeds ``0..S-1``, mean and Student-t interval), Theorem 4
  (paper Section 7) at every persistence window of :attr:`StudyParams.windows`: the best threshold ``tau*`` with
  the union budget ``k - 1``, the tail mass ``sum_t M_t(tau*)`` and the regret of ``R-LRU-H`` run at ``tau*``
  (:func:`realtrace.analysis.theorem4_check`); and, when the trace set marks needles, where they are kept or lost;
* one **profile** per trace: sink mass, heavy-set sizes, ``(rho, W)``-persistence at every window, the window that
  90% / 100% of heavy entries need, and the light-tail mass at ``tau`` (:mod:`realtrace.analysis`).

Needles.  A segment of the trace set's manifest named ``code`` or ``<anything>_code`` (the tokens of a fact stated
once in the prompt: ``code`` in ``builtin:recall``, ``needle_<j>_code`` in ``builtin:needles``) is a needle; a span
named twice counts once, under its ``_code`` name.  The *query* is the steps from the start of segment ``question``
to the end (the question and the answer that must read a needle).  Under a drop schedule, token ``i`` is resident at step ``t`` while
``t < drop_i`` (NM never brings a token back).  Per needle: ``resident`` = share of its tokens still resident when
the query starts (defined for every needle); ``kept`` = share of the query's stored attention on its tokens that
falls on resident ones (the sleeper measure of :mod:`realtrace.experiments`, per needle; None for a needle the
query does not attend to).  A randomized policy's needle figures are those of
its first seed's run.

Regrets are of the stored attention mass (a captured row's residual is unattributed; the true regret lies within
``sum(residual)`` above) and are quoted per step (divided by ``T``) so layers and sets compare.

Outputs in ``OUT`` (:func:`realtrace.study_figures.write_study`): ``study.json`` (everything), ``study.md``
(tables) and the figures (PNG + SVG), each written atomically; none holds a timing, so two runs write the same
bytes.  Timings go to stderr (and to ``--timings FILE``).  The command line is :mod:`realtrace.study_cli`.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache, partial
from pathlib import Path

import numpy as np

from kvcore.errors import ParameterError
from kvcore.numbers import integer, real
from kvcore.trace_files import load_trace
from kvcore.traces import AttentionTrace

from . import analysis as an
from .traceset import MANIFEST, load_traceset

FORMAT = "kvtrace-study/1"
NEEDLE = re.compile(r"^(\w+_)?code$")


@dataclass(frozen=True)
class StudyParams:
    """Every parameter of a study (stated in its JSON).  ``tau``/``rho``/``windows``: Section 7's thresholds and
    persistence windows; ``seeds``: runs of a randomized policy; ``n_sink``: tokens counted as sinks."""

    budgets: tuple[int, ...] = (256, 512, 1024)
    seeds: int = 5
    tau: float = 0.05
    rho: float = 0.5
    windows: tuple[int, ...] = (32, 256, 2048)
    n_sink: int = 4

    def __post_init__(self):
        if not self.budgets:
            raise ParameterError("budgets: at least one NM budget is needed")
        for k in self.budgets:
            integer(k, "budget", 2)  # Theorem 4 reserves one slot
        if len(set(self.budgets)) != len(self.budgets):
            raise ParameterError(f"budgets {list(self.budgets)}: each budget once")
        integer(self.seeds, "seeds", 1)
        real(self.tau, "tau", 0.0, 1.0, open_low=True)
        real(self.rho, "rho", 0.0, 1.0, open_low=True)
        for W in self.windows:
            integer(W, "window", 1)


@dataclass(frozen=True)
class Needles:
    """Needle token ranges and the query steps of one trace set (empty when its manifest marks none)."""

    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    query: tuple[int, int] | None = None

    @classmethod
    def from_segments(cls, segments: dict[str, tuple[int, int]], T: int) -> Needles:
        spans: dict[str, tuple[int, int]] = {}
        # by position; of two names for one span the `_code` one comes first and is kept
        for name, span in sorted(segments.items(), key=lambda kv: (tuple(kv[1]), kv[0] == "code")):
            if NEEDLE.match(name) and span[1] > span[0] and tuple(span) not in spans.values():
                spans[name] = tuple(span)
        if not spans or "question" not in segments:
            return cls()
        return cls(spans, (segments["question"][0], T))


@dataclass(frozen=True)
class StudyTask:
    """One unit of work: ``kind = "solve"`` (one trace at budget ``k``) or ``"profile"`` (one trace)."""

    kind: str
    set_label: str
    trace: str
    layer: int
    head: str
    path: str
    params: StudyParams
    needles: Needles
    k: int | None = None


class Stopwatch:
    """Wall and CPU seconds of named parts of a task (CPU time is what a busy shared machine does not inflate)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._start = (time.perf_counter(), time.process_time())

    def lap(self, part: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.seconds[part] = wall - self._start[0]
        self.seconds[f"{part} (cpu)"] = cpu - self._start[1]
        self._start = (wall, cpu)


@lru_cache(maxsize=4)
def _load(path: str) -> AttentionTrace:
    """A worker keeps the last few traces: a trace's budgets are often solved by the same worker."""
    return load_trace(path)


def drop_steps(T: int, evictions) -> np.ndarray:
    """``drop[i]`` = the step at which token ``i`` leaves the cache (``T`` if it never does)."""
    drop = np.full(T, T, dtype=np.int64)
    for t, i in evictions or []:
        drop[i] = min(drop[i], t)
    return drop


def needle_retention(trace: AttentionTrace, evictions, needles: Needles) -> dict[str, dict[str, float | None]]:
    """Per needle: ``resident`` and ``kept`` under the drop schedule ``evictions`` (module docstring); ``kept`` is
    None when the query puts no stored attention on the needle."""
    drop = drop_steps(trace.T, evictions)
    q0, q1 = needles.query
    rows = np.repeat(np.arange(trace.T), np.diff(trace.indptr))
    in_query = (rows >= q0) & (rows < q1)
    out = {}
    for name, (a, b) in needles.spans.items():
        on = in_query & (trace.indices >= a) & (trace.indices < b)
        total = float(trace.weights[on].sum())
        kept_mass = float(trace.weights[on & (rows < drop[trace.indices])].sum())
        out[name] = {"resident": float(np.mean(drop[a:b] > q0)), "kept": kept_mass / total if total > 0 else None}
    return out


def profile_trace(trace: AttentionTrace, p: StudyParams) -> dict:
    """Budget-free measures of one trace (Section 7's persistence and tail at ``tau``; sinks; heavy sets)."""
    heavy = an.heavy_set_sizes(trace, p.tau)
    persist = {}
    for W in p.windows:
        frac, n = an.persistence_fraction(trace, p.tau, p.rho, W)
        persist[str(W)] = {"fraction": frac, "rho_q90": an.persistence_rho(trace, p.tau, W, 0.9)}
    return {"sink_mass": float(an.sink_mass(trace, p.n_sink).mean()), "residual": float(trace.residual.mean()),
            "heavy_size_mean": float(heavy.mean()), "heavy_size_max": int(heavy.max(initial=0)),
            "heavy_entries": n, "persistence": persist,
            "W_q90": an.persistence_window(trace, p.tau, p.rho, 0.9),
            "W_q100": an.persistence_window(trace, p.tau, p.rho, 1.0),
            "tail_per_step": float(an.tail_mass(trace, p.tau).mean())}


def solve_trace(trace: AttentionTrace, k: int, p: StudyParams, needles: Needles) -> tuple[dict, dict]:
    """One (trace, budget) solve (module docstring): ``(result, seconds)``; seconds per part, kept apart so the
    result is the same wherever it ran."""
    from kvcore.measure import measure
    from kvcore.optima import optimum
    from policies import all_policies, make

    clock = Stopwatch()
    opt = optimum(trace, k, model="nm", record=bool(needles.spans))
    clock.lap("optimum")
    T = trace.T
    out = {"opt_regret": float(opt.cost), "opt_per_step": float(opt.cost) / T, "opt_gap_bound": float(opt.gap_bound),
           "policies": {}, "theorem4": {}, "needles": {}}
    if needles.spans:
        out["needles"]["OPT"] = needle_retention(trace, opt.evictions, needles)
    for info in all_policies("nm"):
        m = measure(partial(make, info.name), trace, k, model="nm", seeds=range(p.seeds), opt=opt,
                    record=bool(needles.spans))
        mean, low, high = m.ci
        out["policies"][info.name] = {"regret": mean, "ci_low": low, "ci_high": high, "runs": len(m.costs),
                                      "gap": m.tracking_gap, "gap_per_step": m.tracking_gap / T}
        if needles.spans:  # the first seed's schedule
            out["needles"][info.name] = needle_retention(trace, m.evictions, needles)
    clock.lap("policies")
    for W in p.windows:
        thm = an.theorem4_check(trace, k, p.rho, W, opt_regret=float(opt.cost))
        r = thm.recipe
        out["theorem4"][str(W)] = {"tau_star": r.tau_star, "max_union": r.max_union,
                                   "tail_per_step": r.tail_stored / T, "tail_with_residual_per_step":
                                   r.tail_with_residual / T, "persistent_fraction": r.persistent_fraction,
                                   "rlruh_per_step": thm.rlruh_regret / T, "premise_holds": thm.premise_holds,
                                   "bound_holds": thm.bound_holds}
    clock.lap("theorem4")
    return out, clock.seconds


def run_task(task: StudyTask) -> tuple[dict, dict]:
    """The function every worker runs: ``(result, seconds)`` of one :class:`StudyTask`."""
    trace = _load(task.path)
    if task.kind == "profile":
        clock = Stopwatch()
        res = profile_trace(trace, task.params)
        clock.lap("profile")
        return res, clock.seconds
    return solve_trace(trace, task.k, task.params, task.needles)


# --------------------------------------------------------------------------------------------------------------------
# Planning and merging
# --------------------------------------------------------------------------------------------------------------------


def set_labels(dirs: list[str]) -> list[str]:
    """A short unique label per trace-set directory: its name, suffixed ``-2``, ``-3``... on a clash."""
    labels, seen = [], {}
    for d in dirs:
        base = Path(d).resolve().name or "traces"
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return labels


def plan(dirs: list[str], p: StudyParams) -> tuple[list[StudyTask], dict]:
    """All tasks of a study (solves first, the long ones ahead so the workers finish together) and the sets'
    metadata.  Every trace set is read and validated here, before any work is sent out."""
    if not dirs:
        raise ParameterError("--traces: at least one trace-set directory is needed")
    solves, profiles, sets = [], [], {}
    for label, d in zip(set_labels(dirs), dirs):
        ts = load_traceset(d)
        man = json.loads((Path(ts.source) / MANIFEST).read_text(encoding="utf-8"))
        needles = Needles.from_segments(ts.segments, ts.T)
        sets[label] = {"source": str(d), "T": ts.T, "traces": len(ts.traces), "segments": ts.segments,
                       "needles": {n: list(s) for n, s in needles.spans.items()},
                       "query": list(needles.query) if needles.query else None,
                       "model": ts.meta.get("model", {}).get("name")}
        for name in ts.names():
            path = str((Path(ts.source) / man["traces"][name]["file"]).resolve())
            where = (label, name, ts.layers[name], ts.heads[name], path, p, needles)
            profiles.append(StudyTask("profile", *where))
            solves += [StudyTask("solve", *where, k) for k in p.budgets]
    solves.sort(key=lambda t: -sets[t.set_label]["T"])  # stable: trace order within a length
    return solves + profiles, sets


def merge(tasks: list[StudyTask], results: list[tuple[dict, dict]], sets: dict, p: StudyParams) -> dict:
    """The study's JSON document from the results in task order (the same for every run of the same study):
    traces ordered by set (as given), layer and head."""
    from policies import all_policies

    traces: dict[tuple[str, str], dict] = {}
    for task, (res, _) in zip(tasks, results):
        entry = traces.setdefault((task.set_label, task.trace), {"set": task.set_label, "trace": task.trace,
                                                                 "layer": task.layer, "head": task.head,
                                                                 "budgets": {}})
        if task.kind == "profile":
            entry["profile"] = res
        else:
            entry["budgets"][str(task.k)] = res
    order = {label: i for i, label in enumerate(sets)}
    ordered = sorted(traces.values(), key=lambda e: (order[e["set"]], e["layer"], e["head"]))
    for e in ordered:
        e["budgets"] = {str(k): e["budgets"][str(k)] for k in p.budgets}
    return {"format": FORMAT, "params": asdict(p), "policies": [i.name for i in all_policies("nm")],
            "sets": sets, "traces": ordered}


def timing_summary(tasks: list[StudyTask], results: list[tuple[dict, dict]]) -> dict:
    """Seconds per task part: count, mean, max and total (the data behind the projection of a larger study)."""
    parts: dict[str, list[float]] = {}
    for task, (_, sec) in zip(tasks, results):
        for part, s in sec.items():
            parts.setdefault(part, []).append(s)
    for label, cpu in (("solve task", False), ("solve task (cpu)", True)):
        solve = [sum(v for part, v in sec.items() if part.endswith("(cpu)") == cpu)
                 for task, (_, sec) in zip(tasks, results) if task.kind == "solve"]
        if solve:
            parts[label] = solve
    return {part: {"tasks": len(v), "mean": float(np.mean(v)), "max": float(np.max(v)), "total": float(np.sum(v))}
            for part, v in parts.items()}


def run_study(dirs: list[str], params: StudyParams = StudyParams(), *, workers: int | None = None,
              scheduler: str | None = None, progress: bool = True) -> tuple[dict, dict]:
    """Plan, run through :func:`kvcore.tasks.map_tasks`, merge: ``(study, timings)``."""
    from kvcore.tasks import map_tasks

    tasks, sets = plan(dirs, params)
    clock = time.perf_counter()
    results = map_tasks(run_task, tasks, workers=workers, scheduler=scheduler, progress=progress, key="study")
    timings = timing_summary(tasks, results)
    timings["wall"] = {"seconds": time.perf_counter() - clock}
    return merge(tasks, results, sets, params), timings


# --------------------------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------------------------


def _f(x, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def by_layer(study: dict, value) -> dict[tuple[str, int], list[float]]:
    """``value(trace_entry)`` grouped by (set, layer), in layer order."""
    out: dict[tuple[str, int], list[float]] = {}
    for e in study["traces"]:
        out.setdefault((e["set"], e["layer"]), []).append(value(e))
    return out


def needle_means(study: dict, k: str, measure: str = "resident") -> dict[str, dict[str, float]]:
    """Per policy (and OPT) and needle (``set:name``) at budget ``k``: the mean of ``measure`` (``"resident"`` or
    ``"kept"``) over the traces where it is defined."""
    acc: dict[str, dict[str, list[float]]] = {}
    for e in study["traces"]:
        for pol, per in e["budgets"][k]["needles"].items():
            for needle, v in per.items():
                if v[measure] is not None:
                    acc.setdefault(pol, {}).setdefault(f"{e['set']}:{needle}", []).append(v[measure])
    return {pol: {n: float(np.mean(v)) for n, v in per.items()} for pol, per in acc.items()}


def format_markdown(study: dict) -> str:
    """The study's Markdown section: parameters, optimum per layer, tracking gaps, Theorem 4, needles."""
    p = study["params"]
    budgets = [str(k) for k in p["budgets"]]
    lines = ["## Real-trace study at scale", "",
             "Trace sets: " + ", ".join(f"`{label}` ({s['traces']} traces, T = {s['T']}, model {s['model']})"
                                         for label, s in study["sets"].items()) + ".",
             f"NM budgets {', '.join(budgets)}; {len(study['policies'])} registered NM policies "
             f"(randomized ones over {p['seeds']} seeds); tau = {p['tau']}, rho = {p['rho']}, persistence windows "
             f"{', '.join(map(str, p['windows']))}.  Regrets are stored attention mass per step.", "",
             "### The exact optimum's regret per step (mean over KV heads)", ""]
    rows = []
    for (label, layer), vals in by_layer(study, lambda e: [e["budgets"][k]["opt_per_step"] for k in budgets]).items():
        rows.append([label, str(layer), *(_f(float(np.mean([v[i] for v in vals]))) for i in range(len(budgets)))])
    lines += _table(["set", "layer", *(f"k = {k}" for k in budgets)], rows)
    lines += ["", "### Tracking gap per step, regret(ALG) − regret(OPT): mean (max) over all traces", ""]
    rows = []
    for pol in study["policies"]:
        cells = []
        for k in budgets:
            g = [e["budgets"][k]["policies"][pol]["gap_per_step"] for e in study["traces"]]
            cells.append(f"{_f(float(np.mean(g)))} ({_f(float(np.max(g)))})")
        rows.append([pol, *cells])
    lines += _table(["policy", *(f"k = {k}" for k in budgets)], rows)
    W0 = str(p["windows"][0])
    lines += ["", f"### Theorem 4 per layer (mean over KV heads): persistence of heavy entries (a ≥ tau) at each "
              f"window, and at W = {W0} the tail bound Σ M_t(tau*)/T against R-LRU-H's regret per step "
              f"(bound held in n of the heads)", ""]
    rows = []
    for (label, layer), es in by_layer(study, lambda e: e).items():
        cells = [_f(float(np.mean([e["profile"]["persistence"][str(W)]["fraction"] for e in es])), 3)
                 for W in p["windows"]]
        for k in budgets:
            t4 = [e["budgets"][k]["theorem4"][W0] for e in es]
            cells.append(f"{_f(float(np.mean([t['tail_per_step'] for t in t4])), 3)} / "
                         f"{_f(float(np.mean([t['rlruh_per_step'] for t in t4])), 3)} "
                         f"({sum(t['bound_holds'] for t in t4)}/{len(t4)})")
        rows.append([label, str(layer), *cells])
    lines += _table(["set", "layer", *(f"persist W={W}" for W in p["windows"]),
                     *(f"k = {k}: tail / R-LRU-H" for k in budgets)], rows)
    if any(s["needles"] for s in study["sets"].values()):
        lines += ["", "### Needles: share of each needle's tokens still resident when the question starts, and "
                  "(after the slash) share of the query's attention on it that found it resident; mean over traces",
                  ""]
        for k in budgets:
            resident, kept = needle_means(study, k), needle_means(study, k, "kept")
            names = sorted({n for per in resident.values() for n in per},
                           key=lambda n: (n.split(":")[0], study["sets"][n.split(":")[0]]["needles"]
                                          [n.split(":", 1)[1]][0]))
            lines += [f"k = {k}:", ""]
            header = ["policy", *(f"{n} @{_depth(study, n)}" for n in names)]
            lines += _table(header, [[pol, *(f"{_f(resident[pol].get(n), 3)} / {_f(kept[pol].get(n), 3)}"
                                             for n in names)]
                                     for pol in ["OPT", *study["policies"]] if pol in resident]) + [""]
    return "\n".join(lines).rstrip() + "\n"


def _depth(study: dict, needle: str) -> str:
    label, name = needle.split(":", 1)
    s = study["sets"][label]
    return f"{100 * s['needles'][name][0] / s['T']:.0f}%"
