"""The figures of the quality claims (issue 29): what the model's output does under each schedule, from the committed
replays (or their ``--full`` recomputation).

* ``surrogate`` -- claim ``regret-surrogate`` (paper §3, §9): regret against output loss, one point per run and
  prompt, the points of one prompt joined, with the rank correlations the claim decides from;
* ``gda_shift`` -- claim ``gda-validation``'s shifted window (paper §11): tracking gap and answer KL per policy and
  budget on the ``shift-G-dD`` prompts;
* ``value_directions`` -- claim ``surrogate-failure-directions`` (paper §3, §9): value-weighted cost and mass
  regret of the exact mass optimum and the exact value optimum, per layer group.

Each draws nothing without data but its axes and a note (the data are measurements; there is no formula to draw).
"""

from __future__ import annotations

import math

from . import _data
from . import _plot as P
from ._style import log_scale, new_figure, titled
from .registry import figure

NO_DATA = "no data: paper_check draws this from the committed replays"


def _no_data(ax, key: str) -> None:
    P.line(ax, key, [], [])
    ax.text(0.5, 0.5, NO_DATA, transform=ax.transAxes, ha="center", va="center", fontsize=8)


def _panels(notes: list[str], height: float, bottom: float, labels: dict, has_data: bool):
    """A figure of panels side by side, each labelled ``labels[panel] = (x label, y label)``: ``(fig, [(ax,
    panel), ...])`` listing the panels to draw; without data every panel says so instead."""
    fig = new_figure(10, height, left=0.07, right=0.98, bottom=bottom, notes=notes)
    drawn = []
    for ax, (panel, (xl, yl)) in zip(fig.subplots(1, len(labels)), labels.items()):
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        if has_data:
            drawn.append((ax, panel))
        else:
            _no_data(ax, f"{panel}/none")
    return fig, drawn


def _value(fig_id: str, where: str, v) -> float:
    """A finite number of either sign (a change of NLL can be negative)."""
    return _data.number(fig_id, where, v)


def _interval(fig_id: str, where: str, v) -> list[float]:
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise _data.fail(fig_id, f"{where} must be [low, high]")
    lo, hi = (_value(fig_id, f"{where}[{i}]", x) for i, x in enumerate(v))
    if lo > hi:
        raise _data.fail(fig_id, f"{where} = [{lo:g}, {hi:g}]: low above high")
    return [lo, hi]


# ---- regret against output loss (regret-surrogate) -------------------------------------------------------------

SURROGATE_PANELS = {"stream": ("regret_stream", "kl_stream", "stream regret per step (attention mass)",
                               "stream KL from the full cache (nats)"),
                    "answer": ("regret_answer", "dnll_answer", "answer-row regret per step (attention mass)",
                               "change of the answer's NLL (nats)")}


def _surrogate_data(data: dict | None) -> dict:
    d = _data.mapping("surrogate", data, {"points", "correlation"})
    if not d:
        return {}
    pts = d.get("points")
    if not isinstance(pts, list) or not pts:
        raise _data.fail("surrogate", "points must be a non-empty list")
    fields = [q for x, y, *_ in SURROGATE_PANELS.values() for q in (x, y)]
    out = []
    for i, p in enumerate(pts):
        if not isinstance(p, dict) or set(p) != {"set", "prompt", *fields}:
            raise _data.fail("surrogate", f"points[{i}] must have exactly set, prompt, {', '.join(fields)}")
        out.append({"set": str(p["set"]), "prompt": str(p["prompt"]),
                    **{q: _value("surrogate", f"points[{i}].{q}", p[q]) for q in fields}})
    corr = d.get("correlation")
    if not isinstance(corr, dict) or set(corr) != set(SURROGATE_PANELS):
        raise _data.fail("surrogate", f"correlation must give {sorted(SURROGATE_PANELS)}")
    rho = {}
    for name, c in corr.items():
        if not isinstance(c, dict):
            raise _data.fail("surrogate", f"correlation[{name!r}] must be a dict")
        rho[name] = {k: _value("surrogate", f"correlation[{name!r}].{k}", c.get(k)) for k in ("pooled", "within")}
        rho[name].update({k: _interval("surrogate", f"correlation[{name!r}].{k}", c.get(k))
                          for k in ("pooled_ci95", "within_ci95")})
    return {"points": out, "rho": rho}


def surrogate_notes(data: dict | None) -> list[str]:
    z = _surrogate_data(data)
    if not z:
        return []
    groups = len({(p["set"], p["prompt"]) for p in z["points"]})
    names = len({p["prompt"] for p in z["points"]})
    return [f"{len(z['points'])} points: {names} prompts, {groups} (input set, prompt) groups (the bootstrap's "
            "unit)."] + [
        f"{name}: pooled Spearman rho {r['pooled']:.2f} [{r['pooled_ci95'][0]:.2f}, {r['pooled_ci95'][1]:.2f}], mean "
        f"within-prompt rho {r['within']:.2f} [{r['within_ci95'][0]:.2f}, {r['within_ci95'][1]:.2f}] (95% prompt "
        f"bootstrap)." for name, r in z["rho"].items()]


@figure("surrogate", "quality_regret_surrogate", "Regret against output loss in the model",
        "rho = Spearman(regret, loss) over runs x prompts (pooled) and within each prompt (mean)",
        "Attention-mass regret (paper Eq. 4) against the model's output loss, one point per policy, press or "
        "optimum run and prompt of the committed quality replays (paper §3: regret as a first-order surrogate of "
        "quality; §9), the runs of one prompt joined by a grey line in order of regret; coloured by input set.  "
        "Left: stream rows, right: the answer's rows.  The rank correlation the claim regret-surrogate decides from: "
        "rho = Spearman(regret, loss) over runs x prompts (pooled) and within each prompt (mean).",
        notes=surrogate_notes)
def surrogate(data: dict | None = None):
    """Regret against output loss per run and prompt.

    Data: ``{"points": [{"set", "prompt", "regret_stream", "kl_stream", "regret_answer", "dnll_answer"}, ...],
    "correlation": {"stream": {"pooled", "pooled_ci95", "within", "within_ci95"}, "answer": {...}}}`` -- the
    points of :func:`theorems.results.surrogate.quality_points` and the claim's rank correlations.
    """
    z = _surrogate_data(data)
    fig, drawn = _panels(surrogate_notes(data), 4.8, 0.22, {n: v[2:] for n, v in SURROGATE_PANELS.items()}, bool(z))
    sets = sorted({p["set"] for p in z.get("points", [])})
    for ax, name in drawn:
        xq, yq = SURROGATE_PANELS[name][:2]
        prompts = sorted({(p["set"], p["prompt"]) for p in z["points"]})
        for s, pr in prompts:
            mine = sorted((p[xq], p[yq]) for p in z["points"] if (p["set"], p["prompt"]) == (s, pr))
            ax.plot([a for a, _ in mine], [b for _, b in mine], "-", color="0.75", lw=0.7, zorder=1)
        for i, s in enumerate(sets):
            mine = [p for p in z["points"] if p["set"] == s]
            P.line(ax, f"{name}/{s}", [p[xq] for p in mine], [p[yq] for p in mine], "o", color=f"C{i}", ms=4,
                   mfc="none", label=s, zorder=2)
        if name == "stream":
            ax.set_yscale(log_scale())
        r = z["rho"][name]
        ax.set_title(f"{name}: pooled rho {r['pooled']:.2f}, within-prompt {r['within']:.2f}", fontsize=9)
    if sets:
        fig.legend(*drawn[0][0].get_legend_handles_labels(), loc="lower center", ncol=len(sets), fontsize=8,
                   bbox_to_anchor=(0.5, 0.0 if not fig.notes else 0.09))
    titled(fig, "Regret against output loss (regret-surrogate)")
    return fig


# ---- tracking gap and answer KL on the shifted prompts (gda-validation) ---------------------------------------

SHIFT_PANELS = {"gap": "answer-row tracking gap (regret per step - OPT's)", "kl_answer": "answer KL from the full "
                "cache (nats)"}


def _shift_data(data: dict | None) -> dict:
    d = _data.mapping("gda_shift", data, {"budgets", "policies", "prompts"})
    if not d:
        return {}
    budgets = d.get("budgets")
    if not isinstance(budgets, list) or not budgets:
        raise _data.fail("gda_shift", "budgets must be a non-empty list")
    budgets = [_data.integer("gda_shift", f"budgets[{i}]", b) for i, b in enumerate(budgets)]
    pols = d.get("policies")
    if not isinstance(pols, dict) or not pols:
        raise _data.fail("gda_shift", "policies must map a policy to its panels")
    out = {}
    for pol, panels in pols.items():
        if not isinstance(panels, dict) or not set(panels) <= set(SHIFT_PANELS) or not panels:
            raise _data.fail("gda_shift", f"policies[{pol!r}] must map some of {sorted(SHIFT_PANELS)} to per-budget "
                                          "lists of per-prompt values")
        out[str(pol)] = {}
        for panel, per_budget in panels.items():
            if not isinstance(per_budget, list) or len(per_budget) != len(budgets):
                raise _data.fail("gda_shift", f"policies[{pol!r}][{panel!r}] must hold one list per budget")
            out[str(pol)][panel] = [[_value("gda_shift", f"policies[{pol!r}][{panel!r}][{i}][{j}]", v)
                                     for j, v in enumerate(vs)] if isinstance(vs, list) and vs else
                                    _fail_list(pol, panel, i) for i, vs in enumerate(per_budget)]
    return {"budgets": budgets, "policies": out, "prompts": str(d.get("prompts", ""))}


def _fail_list(pol, panel, i):
    raise _data.fail("gda_shift", f"policies[{pol!r}][{panel!r}][{i}] must be a non-empty list of per-prompt values")


def shift_notes(data: dict | None) -> list[str]:
    z = _shift_data(data)
    out = []
    for i, k in enumerate(z.get("budgets", [])):
        for panel, what in (("gap", "mean answer-row tracking gap"), ("kl_answer", "mean answer KL")):
            vals = {p: sum(v[panel][i]) / len(v[panel][i]) for p, v in z["policies"].items() if panel in v}
            out.append(f"K = {k}, {what}: " + ", ".join(f"{p} {x:.3f}" for p, x in vals.items()) + ".")
    return out


@figure("gda_shift", "quality_gda_shift", "GD-A on distribution-shifted prompts: tracking gap and answer KL",
        "gap = regret_answer(policy) - regret_answer(OPT) per step; KL(p_full || p_policy) on the answer's rows",
        "The shifted window of the claim gda-validation (paper §11, empirical validation of Greedy-Dual-Attention): "
        "the Section 10 default (decayed, recency-floored GD-A), H2O and TOVA replayed closed loop in the model on "
        "the shift-G-dD prompts (a hotel register that hoards attention, then a question about a code stated once "
        "in an aside), at each budget K per layer and KV head: the mean over prompts (marker) and the range over "
        "prompts (bar) of gap = regret_answer(policy) - regret_answer(OPT) per step; KL(p_full || p_policy) on the "
        "answer's rows (the optimum solved on top-32 rows, its gap bound in the claim's values).", notes=shift_notes)
def gda_shift(data: dict | None = None):
    """Tracking gap and answer KL per policy and budget.

    Data: ``{"budgets": [K, ...], "policies": {name: {"gap": [[per prompt] per budget], "kl_answer": [...]}},
    "prompts": str}`` -- from :func:`theorems.results.recommendations.shift_quality` (a policy may lack "gap", as
    the optimum does).
    """
    z = _shift_data(data)
    fig, drawn = _panels(shift_notes(data), 4.6, 0.2,
                         {p: ("budget K per layer and KV head", label) for p, label in SHIFT_PANELS.items()}, bool(z))
    for ax, panel in drawn:
        pols = [p for p in z["policies"] if panel in z["policies"][p]]
        for j, pol in enumerate(pols):
            vals = z["policies"][pol][panel]
            xs = [i + (j - (len(pols) - 1) / 2) * 0.12 for i in range(len(z["budgets"]))]
            P.errorbar(ax, f"{panel}/{pol}", xs, [sum(v) / len(v) for v in vals], [min(v) for v in vals],
                       [max(v) for v in vals], fmt="o", color=f"C{j}", capsize=3, label=pol)
        ax.set_xticks(range(len(z["budgets"])), [str(k) for k in z["budgets"]])
        ax.set_xlim(-0.5, len(z["budgets"]) - 0.5)
        if panel == "gap":
            ax.axhline(0.0, color="0.6", lw=0.8, zorder=0)
    if z:
        fig.text(0.5, 0.9, z["prompts"], ha="center", fontsize=8)
        fig.legend(*drawn[1][0].get_legend_handles_labels(), loc="lower center", ncol=len(z["policies"]), fontsize=8,
                   bbox_to_anchor=(0.5, 0.0 if not fig.notes else 0.11))
    titled(fig, "GD-A on shifted prompts: tracking gap and answer KL (gda-validation)")
    return fig


# ---- the two optima per layer group (surrogate-failure-directions) --------------------------------------------

DIRECTION_PANELS = {"value": "value-weighted cost sum a ||v - o||", "mass": "mass regret (paper Eq. 4)"}
OPTIMA = {"by_mass": "exact mass optimum", "by_value": "exact value optimum"}


def _directions_data(data: dict | None) -> dict:
    d = _data.mapping("value_directions", data, {"groups", "source"})
    if not d:
        return {}
    groups = d.get("groups")
    if not isinstance(groups, dict) or not groups:
        raise _data.fail("value_directions", "groups must map a layer group to its four sums")
    keys = [f"{panel}_{opt}" for panel in DIRECTION_PANELS for opt in OPTIMA]
    out = {}
    for g, vals in groups.items():
        if not isinstance(vals, dict) or set(vals) != set(keys):
            raise _data.fail("value_directions", f"groups[{g!r}] must have exactly {', '.join(keys)}")
        out[str(g)] = {k: _data.number("value_directions", f"groups[{g!r}].{k}", vals[k], nonneg=True) for k in keys}
    return {"groups": out, "source": str(d.get("source", ""))}


def directions_notes(data: dict | None) -> list[str]:
    z = _directions_data(data)
    out = []
    groups = z.get("groups", {})
    if len(groups) > 1:
        groups = dict(groups, total={k: sum(v[k] for v in groups.values()) for k in next(iter(groups.values()))})
    for g, v in groups.items():
        value_share = (v["value_by_mass"] - v["value_by_value"]) / v["value_by_value"] if v["value_by_value"] else 0.0
        mass_share = (v["mass_by_value"] - v["mass_by_mass"]) / v["mass_by_mass"] if v["mass_by_mass"] else 0.0
        out.append(f"{g}: the mass optimum's value cost is {value_share:+.1%} of the value optimum's; the value "
                   f"optimum's mass regret {mass_share:+.1%} of the mass optimum's.")
    return out


@figure("value_directions", "quality_value_directions", "Mass optimum and value optimum per layer group",
        "value cost = sum_t sum_(i evicted) a[t, i] ||v_i - o_t||; mass regret = sum_t sum_(i evicted) a[t, i]",
        "The claim surrogate-failure-directions (paper §3, §9: the regret misjudges an evicted outlier value and a "
        "value aligned with the retained average): on every layer and KV head of the model, the exact lazy optimum "
        "of the mass regret and the exact lazy optimum of the value-weighted cost, each scored on both costs, "
        "summed per layer group: value cost = sum_t sum_(i evicted) a[t, i] ||v_i - o_t||; mass regret = sum_t "
        "sum_(i evicted) a[t, i].  Each optimum is lowest on its own cost; the difference on the other is what the "
        "surrogate gives away.", notes=directions_notes)
def value_directions(data: dict | None = None):
    """Both optima scored on both costs per layer group.

    Data: ``{"groups": {group: {"value_by_mass", "value_by_value", "mass_by_mass", "mass_by_value"}}, "source":
    str}`` -- :func:`theorems.results.directions.committed_directions`' ``groups`` (totals per layer group).
    """
    z = _directions_data(data)
    fig, drawn = _panels(directions_notes(data), 4.6, 0.13,
                         {p: ("layer group", label) for p, label in DIRECTION_PANELS.items()}, bool(z))
    for ax, panel in drawn:
        groups = list(z["groups"])
        for j, (opt, name) in enumerate(OPTIMA.items()):
            xs = [i + (j - 0.5) * 0.38 for i in range(len(groups))]
            P.bars(ax, f"{panel}/{opt}", xs, [z["groups"][g][f"{panel}_{opt}"] for g in groups], 0.36,
                   color=f"C{j}", label=name)
        ax.set_xticks(range(len(groups)), groups)
        top = max(z["groups"][g][f"{panel}_{opt}"] for g in groups for opt in OPTIMA)
        ax.set_ylim(0, top * 1.25 if top > 0 and math.isfinite(top) else 1.0)
        ax.legend(loc="upper left", fontsize=8)
    if z:
        fig.text(0.5, 0.9, z["source"], ha="center", fontsize=8)
    titled(fig, "Mass optimum and value optimum per layer group (surrogate-failure-directions)")
    return fig
