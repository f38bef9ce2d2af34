"""Tables, the quality-versus-budget figure and the output folder of a quality study (:mod:`realtrace.quality.run`).

Everything written goes through :mod:`kvcore.atomic` (a temporary name renamed over the target; figures without
timestamps, so the same result gives the same bytes).  Files in ``--out``:

* ``quality.json`` -- the result of :func:`realtrace.quality.run.evaluate` (without per-step arrays);
* ``quality.md``   -- per budget, one row per configuration: regret, value-weighted cost, attention-output error and displaced mass per
  layer group and in total, and every output metric, beside the exact optimum and the full cache;
* ``quality_vs_budget.png`` / ``.svg`` -- six panels against the budget;
* with ``--steps``: ``steps/<config>_K<k>.npz`` per run, per prompt ``drop_<prompt>`` (the schedule, reusable as
  ``file:PATH``), ``kl_``, ``dnll_``, ``top1_`` (per row) and ``error_``, ``displaced_`` (per layer, KV head, row).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from kvcore.atomic import replacing, save_figure, write_text

STEM = "quality_vs_budget"
RC = {"figure.dpi": 100, "savefig.dpi": 150, "font.family": "DejaVu Sans", "font.size": 8, "axes.titlesize": 9,
      "legend.fontsize": 6.5, "axes.grid": True, "grid.alpha": 0.3, "lines.linewidth": 1.2,
      "svg.hashsalt": "kv-eviction-theory", "svg.fonttype": "none", "path.simplify": False}
GROUPS = ("early", "middle", "late")
PANELS = (("regret_stream", "regret per step (stored mass), stream"),
          ("error_stream", "attention-output error, stream"),
          ("kl_stream", "KL(full || evicted), stream rows"),
          ("kl_answer", "KL(full || evicted), answer rows"),
          ("dnll_answer", "change in NLL of the answer (nats/token)"),
          ("accuracy", "task accuracy (controls that pass)"))


def _f(x, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _rows(top) -> str:
    return "complete attention rows" if top is None else f"the top {top} entries per row"


def _row(run: dict) -> list[str]:
    t, g = run["total"], run["groups"]
    acc = "-" if t["accuracy"] is None else f"{t['right']}/{t['counted']}"
    total = run.get("max_resident_total")
    return ([run["config"], "-" if run["budget"] is None else str(run["budget"]),
             str(run["max_resident"]) + ("" if total is None else f" / {total}")]
            + [_f(g[x]["regret_stream"]) for x in GROUPS if x in g]
            + [_f(t["regret_stream"]), _f(t["opt_gap"], 6), _f(t.get("value_stream"))]
            + [_f(g[x]["error_stream"]) for x in GROUPS if x in g] + [_f(t["error_stream"]), _f(t["displaced_stream"])]
            + [_f(t["kl_stream"]), _f(t["top1_stream"], 3), _f(t["regret_answer"]), _f(t.get("value_answer")),
               _f(t["error_answer"]), _f(t["kl_answer"]), _f(t["dnll_answer"], 3), acc])


HEADER = (["config", "K", "peak (trace / all)"] + [f"regret {g}" for g in GROUPS] + ["regret", "OPT gap", "value"]
          + [f"error {g}" for g in GROUPS] + ["error", "displaced", "KL", "top-1", "regret (ans)", "value (ans)",
                                              "error (ans)", "KL (ans)", "dNLL (ans)", "accuracy"])


def table(runs: list[dict]) -> str:
    """One markdown table of ``runs`` (module docstring); the full cache's row is appended."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_row(r)) + " |" for r in runs]
    return "\n".join(lines)


def markdown(res: dict) -> str:
    """The whole report: settings, prompts and the positive control, one table per budget, the definitions."""
    s = res["settings"]
    lines = ["# Eviction judged by the model's output: quality beside regret", "",
             f"Model {res['model']['exact']} (transformers {res['model']['transformers']}, "
             f"torch {res['model']['torch']}); policies in {s['mode']} loop unless marked; seed {s['seed']}; policies "
             f"observe {_rows(s['top'])}; "
             + ("the optimum is not replayed (--no-opt)" if s.get("no_opt") else
                f"the optimum is solved on {_rows(s['opt_top'])}") + "; regret is charged on complete rows.", "",
             "| prompt | tokens | what | full cache right |", "|---|---:|---|---|"]
    lines += [f"| {p['name']} | {p['tokens']} | {p['what']} | {'yes' if p['full_cache_right'] else 'NO: excluded'} |"
              for p in res["prompts"]]
    lines.append("")
    lines.append("Excluded from accuracy (the full cache answers them wrongly): "
                 + (", ".join(res["excluded"]) if res["excluded"] else "none") + ".")
    full = [r for r in res["runs"] if r["kind"] == "full"]
    for k in s["budgets"]:
        lines += ["", f"## Budget K = {k}", "", table([r for r in res["runs"] if r["budget"] == k] + full)]
    lines += ["", "Columns: regret = NM regret per step of the schedule on the complete attention rows of the full "
              "cache (paper Eq. 4); OPT gap = the optimum's cost minus the optimum of the rows it was solved on, per "
              "step (0 up to rounding on complete rows; otherwise a bound on its distance from optimal; in value units for "
              "OPT:value); value = the value-weighted cost per step, every lost entry a[t, i] times ||v_i - o_t|| "
              "(o_t the full-cache output of the KV head: the first-order bound of the output error, paper Sections 3 "
              "and 9; the cost OPT:value minimizes); error = relative L2 error of the "
              "attention output against the full cache with the same queries, keys and values (the quantity the "
              "paper's Section 9 surrogate linearises); displaced = the full-cache attention on evicted keys in that "
              "run; KL = KL(full || evicted) of the next-token distribution; top-1 = share of rows whose argmax "
              "agrees; stream = rows after the budget binds, ans = rows predicting the answer; peak = the largest "
              "cache one layer and KV head holds (a prefill press keeps K prompt positions plus the answer), and the "
              "most positions all of them hold together at one step (OPT:static and OPT:coupled share K x layers x "
              "KV heads unevenly); accuracy = "
              "right answers among the prompts the full cache answers right.", "",
              f"![quality versus budget]({STEM}.png)", ""]
    return "\n".join(lines)


def summary(res: dict, name: str) -> str:
    """Plain text for one configuration: per budget, its values per layer group and in total beside the exact
    optimum's and the full cache's."""
    counted = [p["name"] for p in res["prompts"] if p["full_cache_right"]]
    against = "the full cache" if res["settings"].get("no_opt") else "the exact NM optimum and the full cache"
    out = [f"{name} against {against} on {len(res['prompts'])} prompts "
           f"({len(counted)} pass the full-cache control; excluded: {', '.join(res['excluded']) or 'none'})"]
    full = [r for r in res["runs"] if r["kind"] == "full"]
    for k in res["settings"]["budgets"]:
        rows = [r for r in res["runs"] if r["budget"] == k and r["config"] == name]
        rows += [r for r in res["runs"] if r["budget"] == k and r["kind"] == "opt" and r["config"] != name] + full
        out += ["", f"budget K = {k:<26d}" + "".join(f"{r['config'][:20]:>21s}" for r in rows)]
        for label, key in (("regret per step", "regret_stream"), ("value-weighted cost", "value_stream"),
                           ("attention-output error", "error_stream"),
                           ("displaced mass", "displaced_stream")):
            for g in (*GROUPS, "total"):
                vals = [r["total"].get(key) if g == "total" else r["groups"].get(g, {}).get(key) for r in rows]
                out.append(f"  {label if g == 'early' else '':24s}{g:>8s}" + "".join(f"{_f(v):>21s}" for v in vals))
        out.append(f"  {'OPT gap bound':24s}{'total':>8s}" + "".join(f"{_f(r['total']['opt_gap'], 6):>21s}" for r in rows))
        for label, key, digits in (("KL(full || evicted)", "kl", 4), ("change in NLL", "dnll", 3),
                                   ("top-1 agreement", "top1", 3)):
            for scope in ("stream", "answer"):
                out.append(f"  {label if scope == 'stream' else '':24s}{scope:>8s}"
                           + "".join(f"{_f(r['total'][f'{key}_{scope}'], digits):>21s}" for r in rows))
        out.append(f"  {'task accuracy':24s}{'':8s}" + "".join(
            f"{'-' if r['total']['accuracy'] is None else str(r['total']['right']) + '/' + str(r['total']['counted']):>21s}"
            for r in rows))
    out += ["", "stream = rows after the budget binds; answer = rows predicting the answer; regret is charged on the "
            "complete attention rows of the full cache (nothing unattributed); value-weighted cost = each lost entry "
            "a[t, i] times ||v_i - o_t||, o_t the full-cache output (paper Sections 3, 9); OPT gap bound = how far the optimum's "
            "schedule can be from the exact optimum (0 up to rounding when solved on complete rows)"]
    return "\n".join(out)


def figure(res: dict, out_dir: Path) -> list[Path]:
    """Six panels (:data:`PANELS`) against the budget, one line per configuration; the full cache as a grey line."""
    import matplotlib
    from matplotlib.figure import Figure

    from figures._style import log_scale

    runs = [r for r in res["runs"] if r["kind"] != "full"]
    full = [r for r in res["runs"] if r["kind"] == "full"]
    names = list(dict.fromkeys(r["config"] for r in runs))
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(13, 7.2))
        fig.subplots_adjust(left=0.05, right=0.99, top=0.93, bottom=0.2, wspace=0.28, hspace=0.35)
        axes = fig.subplots(2, 3).ravel()
        colours = matplotlib.colormaps["tab20"]
        for ax, (key, title) in zip(axes, PANELS):
            for i, name in enumerate(names):
                pts = sorted((r["budget"], r["total"][key]) for r in runs
                             if r["config"] == name and r["total"][key] is not None)
                if not pts:
                    continue
                kind = next(r["kind"] for r in runs if r["config"] == name)
                style = dict(color="k", lw=2.2, marker="s") if kind == "opt" else dict(
                    color=colours(i % 20), marker="o", ls="--" if kind == "press" else
                    (":" if "open loop" in name else "-"))
                ax.plot(*zip(*pts), ms=3, label=name, **style)
            if full and full[0]["total"][key] is not None:
                ax.axhline(full[0]["total"][key], color="0.5", lw=1, label="full cache")
            ax.set_xscale(log_scale(base=2))
            ax.set_xticks(res["settings"]["budgets"], [str(k) for k in res["settings"]["budgets"]])
            ax.set_title(title)
            ax.set_xlabel("budget K (tokens per layer and KV head)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=8, frameon=False)
        fig.suptitle(f"Quality versus budget in {res['model']['exact']}: policies (solid: closed loop, dotted: "
                     "open loop), kvpress presses (dashed), "
                     + ("" if res["settings"].get("no_opt") else "the exact NM optimum (black), ")
                     + "the full cache (grey)",
                     fontsize=10)
        return save_figure(fig, out_dir, STEM)


def slug(text: str) -> str:
    """A configuration's name as file names spell it: every run of other characters one ``_``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def steps_name(config: str, budget: int) -> str:
    """The file, inside ``OUT/steps``, where :func:`write` saves the per-row arrays of ``config`` at ``budget``."""
    return f"{slug(config)}_K{budget}.npz"


def without_steps(res: dict) -> dict:
    """A study's result without its runs' per-step arrays: what ``--json`` prints and ``quality.json`` holds."""
    return {**res, "runs": [{k: v for k, v in r.items() if k != "steps"} for r in res["runs"]]}


def write(res: dict, out_dir: str | Path) -> list[Path]:
    """The output folder (module docstring); returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for run in res["runs"]:
        if "steps" not in run:
            continue
        arrays = {f"{q}_{p}": np.asarray(v) for p, per in run["steps"].items() for q, v in per.items()}
        (out / "steps").mkdir(exist_ok=True)
        path = out / "steps" / steps_name(run["config"], run["budget"])
        with replacing(path) as tmp:
            np.savez_compressed(tmp, **arrays)
        paths.append(path)
    clean = without_steps(res)
    paths.append(write_text(out / "quality.json", json.dumps(clean, indent=1) + "\n"))
    paths.append(write_text(out / "quality.md", markdown(clean)))
    paths += figure(clean, out)
    return paths


__all__ = ["figure", "markdown", "summary", "table", "without_steps", "write"]
