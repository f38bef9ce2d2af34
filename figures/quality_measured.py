"""Figure 14 measured (claim ``fig14-measured``): the toolkit's own quality-versus-budget points -- closed-loop NM
policies, kvpress prefill presses and the exact NM optimum replayed in SmolLM2-135M-Instruct -- beside the budgets at
which the cited systems state their quality (the points Figure 14 replots, :func:`figures.published.budget_statements`).
The cited points come from other models and benchmarks; the figure says so.  Without data only the published
budgets are drawn."""

from __future__ import annotations

from . import _data
from . import _plot as P
from ._style import log_scale, new_figure, titled
from .published import budget_statements
from .registry import figure

FIELDS = ("budget", "fraction", "accuracy", "dnll_answer")
MODEL = "SmolLM2-135M-Instruct"


def _points(data: dict | None) -> dict[str, list[dict]]:
    d = _data.mapping("14m", data, {"series", "prompts", "budgets"})
    series = d.get("series", {})
    if not isinstance(series, dict):
        raise _data.fail("14m", "series must map a configuration to its points")
    out = {}
    for name, pts in series.items():
        if not isinstance(pts, list) or not pts:
            raise _data.fail("14m", f"series[{name!r}] must be a non-empty list of points")
        rows = []
        for i, p in enumerate(pts):
            if not isinstance(p, dict) or any(f not in p for f in FIELDS):
                raise _data.fail("14m", f"series[{name!r}][{i}] needs fields {', '.join(FIELDS)}")
            row = {f: _data.number("14m", f"series[{name!r}][{i}].{f}", p[f], nonneg=True) for f in FIELDS}
            if not 0 < row["fraction"] <= 1 or row["accuracy"] > 1:
                raise _data.fail("14m", f"series[{name!r}][{i}]: fraction must be in (0, 1], accuracy in [0, 1]")
            rows.append(row)
        out[str(name)] = sorted(rows, key=lambda r: r["fraction"])
    return out


def fig14m_notes(data: dict | None) -> list[str]:
    """Where the optimum stands among the measured configurations, from the plotted points."""
    series = _points(data)
    if "OPT" not in series:
        return []
    out = []
    for p in series["OPT"]:
        ahead = [n for n, pts in series.items() if n != "OPT"
                 for q in pts if q["budget"] == p["budget"] and q["accuracy"] > p["accuracy"]]
        if ahead:
            out.append(f"At K = {p['budget']:g} the exact optimum answers fewer prompts than {', '.join(ahead)}.")
    return out


@figure("14m", "fig14_measured_quality_budget", "Figure 14 measured: quality vs budget in one model",
        "accuracy = answered right / prompts the full cache answers; budget fraction = mean over prompts of K / T",
        "Quality against the retained budget, measured by replaying each schedule in SmolLM2-135M-Instruct "
        "(python -m paper_check quality; realtrace/data/quality_benchmark): accuracy = answered right / prompts the "
        "full cache answers; budget fraction = mean over prompts of K / T.  Top: task accuracy; bottom: mean change in "
        "the answer's NLL against the full cache (drawn at 1e-3 where it is below).  Policies run closed loop at K "
        "positions from row K on; a prefill press keeps the whole prompt until the prefill ends and K positions after "
        "it.  Grey diamonds at accuracy 1: the budgets at which cited systems "
        "state near-full quality (figures/data/published.json) -- measured on other, larger models and other "
        "benchmarks, so they are not comparable point for point with this model's curves.", notes=fig14m_notes)
def fig14m(data: dict | None = None):
    """Measured quality-versus-budget curves beside the published budget statements.

    Data: ``{"series": {config: [{"budget", "fraction", "accuracy", "dnll_answer"}, ...]}, "prompts": [...],
    "budgets": [...]}`` -- :func:`theorems.results.benchmark.fig14_points` on the committed sweep.
    """
    series = _points(data)
    fig = new_figure(10, 7.6, left=0.08, right=0.7, top=0.9, bottom=0.08, hspace=0.3, notes=fig14m_notes(data))
    acc, loss = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2, sharex=None)
    for n, (name, pts) in enumerate(series.items()):
        style = dict(color="black", lw=2.2, marker="s") if name == "OPT" else dict(
            color=f"C{n % 10}", marker="o" if not name.startswith("press:") else "^",
            ls="-" if not name.startswith("press:") else "--")
        label = "exact NM optimum (OPT)" if name == "OPT" else name
        xs = [p["fraction"] for p in pts]
        P.line(acc, f"measured/{name}/accuracy", xs, [p["accuracy"] for p in pts], label=label, **style)
        P.line(loss, f"measured/{name}/dnll", xs, [max(p["dnll_answer"], 1e-3) for p in pts], **style)
    systems: dict[float, list[str]] = {}
    for row in budget_statements():
        for q in row["points"]:
            P.line(acc, f"published/{row['system']}/{q['fraction']:g}", [q["fraction"]], [1.0], "D", color="#888888",
                   ms=7, mfc="white", mew=1.4)
            systems.setdefault(q["fraction"], []).append(row["system"])
    for i, (frac, names) in enumerate(sorted(systems.items())):  # staggered: neighbouring budgets are close
        acc.annotate(", ".join(names), (frac, 1.0), textcoords="offset points", xytext=(0, 7 + 11 * (i % 3)),
                     ha="center", fontsize=7, color="#555555")
    acc.plot([], [], "D", color="#888888", mfc="white", label="published budget, stated near-full\nquality (other models)")
    for ax in (acc, loss):
        ax.set_xscale(log_scale())
        ax.set_xlim(0.005, 1.2)
    acc.set_ylim(-0.05, 1.45)
    acc.set_ylabel("task accuracy (positive controls)")
    loss.set_yscale(log_scale())
    loss.set_ylabel("answer NLL change (nats/token)")
    for ax in (acc, loss):
        ax.set_xlabel("retained budget (fraction of the prompt's KV cache, log scale)")
    acc.set_title(f"{MODEL}: measured accuracy; grey: published budgets of cited systems (different models)",
                  fontsize=9)
    loss.set_title(f"{MODEL}: measured output loss on the answer" if series else "no measured data", fontsize=9)
    acc.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=8)
    titled(fig, "Figure 14 measured: quality vs budget in one model, beside the published points")
    return fig


def _rows(d: dict, key: str, text: str, fields: tuple[str, ...]) -> list[dict]:
    rows = d.get(key, [])
    if not isinstance(rows, list):
        raise _data.fail("bench", f"{key} must be a list of records")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or any(f not in row for f in (text, *fields)):
            raise _data.fail("bench", f"{key}[{i}] needs fields {', '.join((text, *fields))}")
        out.append({text: str(row[text]), **{f: _data.number("bench", f"{key}[{i}].{f}", row[f]) for f in fields}})
    return out


def _bench(data: dict | None) -> tuple[list[dict], list[dict]]:
    d = _data.mapping("bench", data, {"rules", "cases"})
    return (_rows(d, "rules", "rule", ("budget", "easy_gap", "hard_dnll")),
            _rows(d, "cases", "case", ("opt_dnll", "best_dnll")))


@figure("bench", "quality_benchmark_tracking_blind_spot", "Tracking gap as the benchmark; the optimum's blind spot",
        "tracking gap = regret per step on the answer rows - the exact optimum's, mean over the easy prompts",
        "(a) Claim tracking-benchmark: each rule's tracking gap = regret per step on the answer rows - the exact "
        "optimum's, mean over the easy prompts, against its mean change of the answer's NLL on the hard (shifted) "
        "prompts, per budget (python -m paper_check quality, SmolLM2-135M-Instruct; realtrace/data/quality_benchmark)."
        "  (b) Claim opt-blind-spot: per prompt and budget, the exact lazy optimum's answer-NLL change against the "
        "best rule's or press's; a point below the diagonal is a case where some rule does better on the answer.")
def bench(data: dict | None = None):
    """The tracking benchmark and the optimum's blind spot, measured.

    Data: ``{"rules": [{"rule", "budget", "easy_gap", "hard_dnll"}, ...], "cases": [{"case", "opt_dnll",
    "best_dnll"}, ...]}`` -- :func:`theorems.results.overlays.bench_overlay` from the claims' tables.
    """
    rules, cases = _bench(data)
    fig = new_figure(11, 5.2, left=0.07, right=0.8, bottom=0.13, wspace=0.3)
    ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    names = sorted({r["rule"] for r in rules})
    for n, name in enumerate(names):
        pts = sorted((r for r in rules if r["rule"] == name), key=lambda r: r["budget"])
        P.line(ax, f"tracking/{name}", [r["easy_gap"] for r in pts], [r["hard_dnll"] for r in pts],
               "^--" if name.startswith("press:") else "o-", color=f"C{n % 10}", label=name)
    ax.set_xlabel("easy set: answer-row tracking gap (per step)")
    ax.set_ylabel("hard set: mean answer NLL change (nats/token)")
    ax.set_title("(a) the gap on the easy set vs the loss on the hard one", fontsize=9)
    if names:
        ax.legend(loc="upper left", bbox_to_anchor=(2.32, 1.0), borderaxespad=0, fontsize=8)
    xs, ys = [c["opt_dnll"] for c in cases], [c["best_dnll"] for c in cases]
    P.line(bx, "blind/cases", xs, ys, "o", color="C3", mfc="none")
    lo, hi = min(xs + ys + [0.0]) - 0.1, max(xs + ys + [1.0]) + 0.1
    P.line(bx, "blind/diagonal", [lo, hi], [lo, hi], ":", color="#888888")
    bx.set_xlabel("exact optimum: answer NLL change")
    bx.set_ylabel("best rule or press: answer NLL change")
    bx.set_title("(b) one circle per (prompt, budget); dotted: equal", fontsize=9)
    titled(fig, "Tracking gap as the benchmark, and the optimum's blind spot (SmolLM2-135M-Instruct)")
    return fig
