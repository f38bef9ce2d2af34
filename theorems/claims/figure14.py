"""Figure 14 measured (paper §7 "Choosing the threshold", the paragraph before it, and §10's caveat on heterogeneous
settings): the toolkit's own quality-versus-budget points for its policies, the presses and the exact optimum on one
model, beside the published operating points the paper replots.  Table: :mod:`theorems.results.benchmark`; figure
``14m`` (:mod:`figures.quality_measured`); rules: ``VERDICTS.md``."""

from __future__ import annotations

from figures.published import budget_statements
from theorems.results import benchmark as B
from theorems.tables import cached

from . import significance
from .registry import Computed, Context, Decision, claim, decides, edit, fmt
from .separation import count_verdict

INPUT = ("the committed quality sweep's easy set (realtrace/data/quality_benchmark, PROVENANCE.md there; "
         "needs the [real,kvpress] extras to produce)")
MEASURED_SYSTEMS = {"H2O": "H2O", "TOVA": "TOVA"}  # published system -> the rule of the sweep that is that system


def published_checks(cs: dict, points: dict) -> list[dict]:
    """Per published budget statement of a system the sweep runs (:data:`MEASURED_SYSTEMS`): on each
    positive-control easy prompt, the smallest measured budget K with K / T at least the published fraction, and
    whether the rule and the optimum answer right there."""
    out = []
    for row in budget_statements():
        rule = MEASURED_SYSTEMS.get(row["system"])
        if rule is None:
            continue
        for q in row["points"]:
            per = []
            for p in B.EASY:
                ks = sorted(b for (name, b) in cs if name == p and b / cs[(p, b)]["tokens"] >= q["fraction"])
                if not ks or not cs[(p, ks[0])]["control"]:
                    continue
                c = cs[(p, ks[0])]
                per.append({"prompt": p, "budget": ks[0], "fraction": ks[0] / c["tokens"],
                            "rule_right": bool(c["runs"][rule]["right"]), "opt_right": bool(c["runs"][B.OPT]["right"])})
            out.append({"system": row["system"], "rule": rule, "fraction": q["fraction"], "quality": q["quality"],
                        "prompts": per})
    return out


def shape_checks(points: dict, qm: dict) -> list[dict]:
    """Per configuration measured at three budgets or more: the mean answer-NLL change by budget, whether it never
    rises by more than the declared quality margin as the budget doubles (monotone), and whether it rises more over
    the smallest halving than over the largest (steepening as the budget drops)."""
    out = []
    for name, pts in points["series"].items():
        if len(pts) < 3:
            continue
        loss = [p["dnll_answer"] for p in pts]  # budgets ascending
        monotone = all(hi - lo <= significance.quality_margin(lo, qm) for lo, hi in zip(loss, loss[1:]))
        out.append({"config": name, "budgets": [p["budget"] for p in pts], "dnll_answer": loss,
                    "monotone": monotone, "steepening": loss[0] - loss[1] > loss[-2] - loss[-1]})
    return out


def figure14_table() -> dict:
    cs = B.cases(True)
    points = B.fig14_points(cs)
    qm = significance.declared_quality()
    return {"measured": bool(points["series"]), "points": points, "published": published_checks(cs, points),
            "shape": shape_checks(points, qm), "quality_margin": qm}


@claim("fig14-measured", "§7, §10 (Figure 14; beyond SPEC's catalogue)", "Attention is sparse enough that small "
       "budgets keep most of the quality (the published operating points Figure 14 replots: H2O at a fifth of the "
       "cache, TOVA at an eighth), and the quality-versus-budget curve is near-lossless while the budget covers the "
       "persistent heavy set, then declines ever more steeply as the budget shrinks.")
def figure14_measured(ctx: Context) -> Computed:
    t = cached(figure14_table)
    return Computed(t, {"published": "H2O 20 %, TOVA 1/8 of the cache keep the full model's quality (cited, other "
                                     "models)", "shape": "flat, then a steepening decline"},
                    {"test": "theorems/test_figure14_measured.py", "data": "realtrace/data/quality_benchmark",
                     "figure": ctx.figure_files("14m", "14")})


def _system_verdict(s: dict) -> str:
    n = len(s["prompts"])
    rule = sum(p["rule_right"] for p in s["prompts"])
    if n and rule > n / 2:
        return "holds"
    return "not-reproduced" if sum(p["opt_right"] for p in s["prompts"]) > n / 2 else "not-checkable"


@decides("fig14-measured", flips={
    "no committed sweep": (lambda v: dict(v, measured=False), "not-checkable"),
    "every published rule answering everywhere": (lambda v: edit(v, "published", lambda ps: [dict(s, prompts=[
        dict(p, rule_right=True) for p in s["prompts"]]) for s in ps]), "holds"),
    "no published rule and no optimum answering": (lambda v: edit(v, "published", lambda ps: [dict(s, prompts=[
        dict(p, rule_right=False, opt_right=False) for p in s["prompts"]]) for s in ps]), "not-checkable"),
    "the first published rule answering everywhere, the others not": (lambda v: edit(v, "published", lambda ps: [
        dict(s, prompts=[dict(p, rule_right=i == 0, opt_right=True) for p in s["prompts"]])
        for i, s in enumerate(ps)]), "holds-with-correction")})
def figure14_measured_decide(v: dict, e: dict) -> Decision:
    """Readings.  (published points, the claim's own: the operating points the figure replots) for each cited
    system the sweep runs, at the smallest measured budget at or above its published fraction of each easy prompt:
    the statement is reproduced when the rule answers more than half of the positive-control prompts; not
    reproduced when it does not while the exact optimum at the same budgets does (the control: the budget can keep
    the answer); not-checkable when the optimum does not either.  The claim holds when every statement is
    reproduced, holds with a correction when some are, and is otherwise not-reproduced (or not-checkable when no
    control passes).  These are other models than the cited ones (SmolLM2-135M, Gemma 3 270M), which is why a miss is
    not-reproduced and not refuted.  (shape) every configuration measured at three budgets or more has a mean
    answer-NLL change that never rises by more than the declared quality margin as the budget doubles and rises
    more over the smallest halving than over the largest: holds when all do, a correction when more than half do,
    not-reproduced otherwise."""
    if not v["measured"]:
        return Decision("not-checkable", f"Missing input: {INPUT}.")
    systems = [(s, _system_verdict(s)) for s in v["published"]]
    checked = [x for x in systems if x[1] != "not-checkable"]
    held = sum(verdict == "holds" for _, verdict in checked)
    own = ("not-checkable" if not checked else "holds" if held == len(systems) else
           "holds-with-correction" if held else "not-reproduced")

    def line(s: dict, verdict: str) -> str:
        return (f"{s['system']} at {fmt(s['fraction'], 3)} of the cache ({s['quality']}): {s['rule']} answers "
                f"{sum(p['rule_right'] for p in s['prompts'])} of {len(s['prompts'])}, the optimum "
                f"{sum(p['opt_right'] for p in s['prompts'])}, at K = "
                + ", ".join(f"{p['budget']} ({p['prompt']}, {fmt(p['fraction'], 2)})" for p in s["prompts"])
                + f": {verdict}")

    shape = v["shape"]
    good = [s for s in shape if s["monotone"] and s["steepening"]]
    shape_verdict = count_verdict(len(shape) - len(good), len(shape), "not-reproduced") if shape else "not-checkable"
    pts = v["points"]
    curves = "; ".join(f"{name}: " + ", ".join(f"K={p['budget']} acc {fmt(p['accuracy'], 2)} dNLL "
                                              f"{fmt(p['dnll_answer'], 3)}" for p in ps)
                       for name, ps in pts["series"].items())
    shape_text = (f"{len(good)} of {len(shape)} configurations flat-then-steepening; not: "
                  + (", ".join(f"{s['config']} ({'rises' if not s['monotone'] else 'not steepening'})"
                               for s in shape if s not in good) or "none"))
    summary = (f"On the model read (the cited points are other models), {len(pts['prompts'])} easy prompts at "
               f"K = {', '.join(map(str, pts['budgets']))}.  Published points: "
               + "; ".join(line(s, verdict) for s, verdict in systems) + f".  Shape: {shape_text}.  Curves: {curves}.")
    missed = [s["system"] for s, verdict in systems if verdict != "holds"]
    return Decision(own, summary, correction=(f"Not reproduced on this model: {', '.join(missed)}."
                                              if own == "holds-with-correction" else None),
                    readings={"published points: the cited rule keeps the answers at its published fraction (the "
                              "claim's own)": {"verdict": own, "finding": "; ".join(line(s, x) for s, x in systems)},
                              "shape: flat at large budgets, a steepening decline": {"verdict": shape_verdict,
                                                                                      "finding": shape_text}})

