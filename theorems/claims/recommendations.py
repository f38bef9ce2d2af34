"""Claims about the paper's recommendations: the Section 10 default policy ("gives up nothing measurable on benign
traffic") and the Section 11 prediction for the decayed, recency-floored policy.  Both are comparisons, judged at the
practical-significance margin declared once for every comparative claim (``VERDICTS.md``;
:mod:`theorems.claims.significance`), with the strict reading beside it.  Tables:
:mod:`theorems.results.recommendations`; sizes per profile as declared."""

from __future__ import annotations

from theorems.results.recommendations import (default_policy_table, default_policy_traces, gda_validation,
                                              section10_params, section10_quality, shift_quality)
from theorems.tables import cached

from . import significance
from .separation import count_verdict, shift_side
from .registry import Computed, Context, Decision, claim, decides, edit, fmt


@claim("default-policy", "§10", "Recency floor + pinned sinks + decayed score + random ties is safe on adversarial "
       "traces and gives up nothing measurable on benign traffic.",
       sizes={"T": (2000, 2000), "k": (128, 128), "seeds": (8, 8), "real_traces": (1, -1)})
def default_policy(ctx: Context) -> Computed:
    T, k = ctx.sizes["T"], ctx.sizes["k"]
    table = cached(default_policy_table, T=T, k=k, seeds=ctx.sizes["seeds"], real=ctx.sizes["real_traces"])
    by: dict[str, dict] = {}
    for r in table.rows:
        cell = by.setdefault(r.workload, {"kind": r.params["kind"], "steps": r.params["steps"], "opt": r.opt_cost,
                                          "regret": {}})
        cell["regret"][r.policy] = r.alg_cost
    evidence = {"test": "theorems/test_default_policy.py"}
    worse = sorted(n for n, c in by.items() if c["kind"] == "benign" and c["regret"]["Default"] > c["regret"]["H2O"])
    if worse:
        traces = default_policy_traces(T, k, ctx.sizes["real_traces"])
        evidence["default_worse_than_h2o"] = ctx.save_counterexample(
            "default_policy_" + worse[0].replace(" ", "_").replace("=", ""), traces[worse[0]][1])
    quality, quality_margin = section10_quality(), significance.declared_quality()
    return Computed({"workloads": by, "T": T, "k": k, "default_params": {"recent": max(1, k // 4), "n_sinks": 4},
                     "margin": significance.declared(), "quality_replay": quality, "quality_margin": quality_margin,
                     "quality_counts": _quality_counts(quality, quality_margin)},
                    {"adversarial": "safe", "benign": "gives up nothing measurable"}, evidence)


QUALITY_INPUT = ("a committed quality replay of Default and H2O on benign prompts (realtrace/data/quality_section10: "
                 "python -m paper_check quality Default -p recent=K/4 -p n_sinks=4 --budget K --json and the same for "
                 "H2O; needs the [real] extra)")
SEVERITY = ("holds", "holds-with-correction", "refuted")
COMBINED = ("holds", "holds-with-correction", "not-reproduced", "refuted")  # gda-validation's sides, mildest first


def _output_as_h2o(v: dict) -> dict:
    """A flip's edit: Default's output in the committed replay set to H2O's on every prompt (no quality loss)."""
    return edit(v, "quality_replay/cases", lambda cs: {n: dict(c, Default=dict(c["H2O"])) for n, c in cs.items()})


def _quality_comparison(q: dict | None, qm: dict) -> tuple[dict, dict, list, list]:
    """``(counted, lost, gained, separates)`` on the committed replay ``q`` at the quality margin ``qm``: the cases
    that pass the positive control; those where Default is measurably worse than H2O
    (:func:`theorems.claims.significance.quality_losses`, ``{case: measurements}``); those where H2O is measurably
    worse than Default by some measure; and of these the ones where Default separates -- measurably better by some
    measure and worse by none (gda-validation's "separates").  A case can be in both of the first two: worse by one
    measure each way."""
    counted = {n: c for n, c in (q or {"cases": {}})["cases"].items() if c["full_cache_right"]}
    losses = {n: significance.quality_losses(c["Default"], c["H2O"], qm) for n, c in counted.items()}
    losses = {n: lost for n, lost in losses.items() if lost}
    gains = [n for n, c in counted.items() if significance.quality_losses(c["H2O"], c["Default"], qm)]
    return counted, losses, gains, [n for n in gains if n not in losses]


def _quality_counts(q: dict | None, qm: dict) -> dict | None:
    """The counts the summary states, for the record (None when the replay is missing or no case passes the
    control): positive-control cases, Default measurably worse than H2O, H2O measurably worse than Default, and
    Default separating from H2O (:func:`_quality_comparison`)."""
    counted, losses, gains, separates = _quality_comparison(q, qm)
    if not counted:
        return None
    return {"positive_control": len(counted), "default_measurably_worse": len(losses),
            "h2o_measurably_worse": len(gains), "default_separates": len(separates)}


def _quality(q: dict | None, qm: dict) -> tuple[str, str, dict]:
    """The quality reading of "gives up nothing measurable": per prompt of the committed replay ``q`` that passes the
    positive control, :func:`theorems.claims.significance.quality_losses` of Default against H2O at the declared
    quality margin ``qm``, and the same of H2O against Default (:func:`_quality_comparison`).  Returns ``(verdict,
    finding, {"lost": {prompt: measurements}, "gained": [prompt, ...], "separates": [prompt, ...]})``: not-checkable
    without a replay or a prompt that passes the control, refuted when Default is measurably worse on any counted
    prompt, holds otherwise."""
    counted, losses, gains, separates = _quality_comparison(q, qm)
    none = {"lost": {}, "gained": [], "separates": []}
    if q is None:
        return "not-checkable", f"missing input: {QUALITY_INPUT}", none
    if not counted:
        return "not-checkable", f"no prompt of {q['source']} passes the positive control", none

    def one(n: str, c: dict) -> str:
        d, h = c["Default"], c["H2O"]
        return (f"{n}: answer {'right' if d['right'] else 'wrong'}/{'right' if h['right'] else 'wrong'}, "
                f"answer dNLL {fmt(d['dnll_answer'], 3)} vs {fmt(h['dnll_answer'], 3)} (margin "
                f"{fmt(significance.quality_margin(h['dnll_answer'], qm), 3)}), stream KL {fmt(d['kl_stream'], 3)} vs "
                f"{fmt(h['kl_stream'], 3)} (margin {fmt(significance.quality_margin(h['kl_stream'], qm), 3)})"
                + (f" -- measurably worse: {', '.join(losses[n])}" if n in losses else ""))

    excluded = sorted(n for n in q["cases"] if n not in counted)
    runs = ", ".join(f"{label} at K = {n.rsplit('=', 1)[1]}" for n, label in q["configs"].items())
    finding = (f"{q['model']}, {q['mode']} loop, {runs} from {q['source']}; Default measurably worse than "
               f"H2O on {len(losses)} of {len(counted)} positive-control prompt/budget cases; H2O measurably worse "
               f"than Default on {len(gains)}, Default separating (better by some measure, worse by none) on "
               f"{len(separates)} (Default/H2O): "
               + "; ".join(one(n, c) for n, c in counted.items())
               + (f"; excluded by the control: {', '.join(excluded)}" if excluded else ""))
    return ("refuted" if losses else "holds"), finding, {"lost": losses, "gained": gains, "separates": separates}


@decides("default-policy", flips={
    "Default best on every benign trace, the adaptive adversary beaten, its output as H2O's": (lambda v: edit(
        _output_as_h2o(v), "workloads", lambda w: {
            n: dict(c, regret=dict(c["regret"], Default=min(c["regret"].values())) if c["kind"] == "benign" else
                    {p: 0.0 for p in c["regret"]} if n.startswith("adaptive") else c["regret"]) for n, c in w.items()}),
        "holds"),
    "Default's output in the model as H2O's on every prompt": (_output_as_h2o, "holds-with-correction"),
    "Default's output just inside the quality margin of H2O's on every prompt": (lambda v: edit(
        v, "quality_replay/cases", lambda cs: {n: dict(c, Default={**c["H2O"], **{
            q: c["H2O"][q] + 0.99 * significance.quality_margin(c["H2O"][q], v["quality_margin"])
            for q in significance.QUALITY_MEASURES}}) for n, c in cs.items()}), "holds-with-correction"),
    "no committed quality replay (the regret reading decides alone)": (lambda v: edit(v, "quality_replay", None),
                                                                      "holds-with-correction")})
def default_policy_decide(v: dict, e: dict) -> Decision:
    """Readings of "gives up nothing measurable on benign traffic", each against H2O (the heavy-hitter system the
    default modifies): (margin, the claim's own surrogate reading) a loss of regret counts only above the declared
    practical-significance margin ``v['margin']`` (VERDICTS.md; :mod:`theorems.claims.significance`) -- the paper
    measures a policy by its tracking gap (Sections 9 and 12); (strict) any loss above 1e-9 counts; (quality) the
    model's output in the committed replay ``v['quality_replay']``, per positive-control prompt, at the declared
    quality margin ``v['quality_margin']`` (:func:`_quality`).  "Safe on adversarial traces": (oblivious) on the
    paper's Theorem 2 construction the default's regret equals the optimum's; (adaptive) against an adversary that
    attends each token once it is dropped.  Under the regret reading: refuted when the oblivious part fails or the
    default loses to H2O on a benign trace beyond the margin; holds-with-correction when those hold but the adaptive
    adversary drives it to about one unit per step, or the best other policy beats it measurably on a benign trace;
    holds otherwise.  The verdict combines the two measurements of "gives up": the worse of the regret reading's
    and the quality reading's (holds < holds-with-correction < refuted) -- a measurable loss in the model's output on
    a benign prompt is a counterexample however the surrogate reads, and the surrogate's loss is not cancelled by an
    output that happens to be unharmed; the quality reading counts only where it is checkable (without a replay the
    regret reading decides alone and the quality reading is named as not-checkable).  Flips (each must move the
    committed verdict, refuted by the quality reading): on the replay, Default's output set to H2O's or just inside
    the quality margin of it on every prompt, or the replay removed (the regret reading decides: the adaptive
    adversary's correction); with the output as H2O's, every regret loss and the adaptive one removed (holds).
    ``tests/test_section10_quality.py`` checks the other direction: with the output as H2O's, a regret loss to H2O
    crossing the margin, the margin set to zero, a flipped answer or a stream KL beyond the quality margin refute."""
    w, margin = v["workloads"], v["margin"]
    obl = w["decoy-and-sleeper"]
    safe = obl["regret"]["Default"] <= obl["opt"] + 1e-9
    adaptive = w["adaptive NM adversary (own)"]["regret"]
    floor = 0.9 * (v["T"] - v["k"] - 1)
    everyone_loses = all(x >= floor for x in adaptive.values())
    benign = {n: c for n, c in w.items() if c["kind"] == "benign"}
    strict = {"relative": 0.0, "per_step": 0.0}

    def best_other(c):
        return min((p for p in c["regret"] if p != "Default"), key=lambda p: c["regret"][p])

    def judge(m: dict) -> tuple[str, dict, list[str]]:
        tol = {n: max(significance.margin(c["regret"]["H2O"], c["steps"], m), 1e-9) for n, c in benign.items()}
        lost = {n: c["regret"]["Default"] - c["regret"]["H2O"] for n, c in benign.items()
                if c["regret"]["Default"] - c["regret"]["H2O"] > tol[n]}
        best_lost = {n: (best_other(c), c["regret"]["Default"] - c["regret"][best_other(c)]) for n, c in benign.items()
                     if significance.measurably_worse(c["regret"]["Default"], c["regret"][best_other(c)], c["steps"],
                                                      m) and c["regret"]["Default"] - c["regret"][best_other(c)] > 1e-9}
        parts = []
        if everyone_loses:
            parts.append(f"safe against the oblivious Theorem 2 construction only: the adaptive NM adversary gives "
                         f"every one of {len(adaptive)} policies, Default included, regret >= {fmt(floor)} over "
                         f"{v['T']} steps against an optimum of 0")
        if best_lost:
            parts.append("no measurable loss against H2O, but against the best other policy there is: " + ", ".join(
                f"{n} ({p} loses {fmt(d, 3)} less)" for n, (p, d) in best_lost.items()))
        verdict = "refuted" if not safe or lost else ("holds-with-correction" if parts else "holds")
        return verdict, lost, parts

    regret_verdict, lost, parts = judge(margin)
    strict_verdict, strict_lost, _ = judge(strict)
    quality_verdict, quality_finding, quality_lost = _quality(v["quality_replay"], v["quality_margin"])
    verdict = max(regret_verdict, quality_verdict if quality_verdict in SEVERITY else "holds", key=SEVERITY.index)
    real = {n: c for n, c in benign.items() if n.startswith("real")}
    real_better = [n for n, c in real.items() if significance.measurably_better(
        c["regret"]["Default"], c["regret"]["H2O"], c["steps"], margin)]

    def vs_h2o(n, c):
        d = c["regret"]["Default"] - c["regret"]["H2O"]
        return (f"{n}: {fmt(c['regret']['Default'])} vs {fmt(c['regret']['H2O'])} ({d:+.3g}, "
                f"{d / max(c['regret']['H2O'], 1e-12):+.1%}; margin {fmt(significance.margin(c['regret']['H2O'], c['steps'], margin), 3)})")

    readings = {
        "margin: a loss to H2O counts above the declared margin (the claim's own)": {
            "verdict": regret_verdict,
            "finding": f"measurable losses to H2O on {len(lost)} of {len(benign)} benign traces"},
        "strict: any loss to H2O above 1e-9 counts": {
            "verdict": strict_verdict, "finding": f"losses to H2O on {len(strict_lost)} of {len(benign)} benign "
                                                  "traces: " + (", ".join(f"{n} ({d:+.3g})" for n, d in
                                                                          strict_lost.items()) or "none")},
        "quality: the model's output on benign prompts, per positive-control prompt at the declared quality margin": {
            "verdict": quality_verdict, "finding": quality_finding}}
    qm = v["quality_margin"]
    if quality_verdict == "not-checkable":
        quality_sentence = f"Output quality is not judged ({quality_finding})."
    else:
        quality_sentence = (
            f"In the model (quality margin max({fmt(qm['relative'])} x H2O's value, {fmt(qm['floor_nats'], 3)} "
            f"nats)): Default is measurably worse than H2O on {len(quality_lost['lost'])} of "
            f"{sum(c['full_cache_right'] for c in v['quality_replay']['cases'].values())} positive-control "
            "prompt/budget cases"
            + (" (" + "; ".join(f"{n}: {', '.join(ls)}" for n, ls in quality_lost["lost"].items()) + ")"
               if quality_lost["lost"] else "")
            + f"; H2O measurably worse than Default on {len(quality_lost['gained'])} (Default separating -- better by "
              f"some measure, worse by none -- on {len(quality_lost['separates'])}); quality reading "
              f"{quality_verdict}, regret reading {regret_verdict}.")
    return Decision(
        verdict,
        f"Policy run: the Section 10 default with recency floor {v['default_params']['recent']}, "
        f"{v['default_params']['n_sinks']} pinned sinks, half-life = floor, random ties (k = {v['k']}).  Declared "
        f"margin: max({fmt(margin['relative'])} x H2O's regret, {fmt(margin['per_step'])} x rows).  Regret on "
        f"decoy-and-sleeper {fmt(obl['regret']['Default'])} (OPT {fmt(obl['opt'])}, ACC {fmt(obl['regret']['ACC'])}); "
        f"against H2O on benign traces: " + "; ".join(vs_h2o(n, c) for n, c in benign.items())
        + f".  Measurable losses to H2O: {len(lost)} of {len(benign)} benign traces (strict reading: "
          f"{len(strict_lost)}, verdict {strict_verdict}); on the real traces Default is measurably better than H2O "
          f"on {len(real_better)} of {len(real)}.  The adaptive NM adversary drives all {len(adaptive)} policies to "
          f"regret >= {fmt(floor)}: {everyone_loses}.  " + quality_sentence,
        correction="; ".join(parts) + "." if verdict == "holds-with-correction" else None, readings=readings)


# default_runs: the randomized default's seeds.  Its random tie-break rarely fires on these traces (scores are
# positive), so a fifth seed leaves the values as they are; tests/test_claim_inputs.py varies T instead.
@claim("gda-validation", "§11", "Measured against H2O, StreamingLLM and TOVA at equal budgets, Greedy-Dual-Attention "
       "-- the decayed, recency-floored policy -- should track as well as the heavy-hitter rules on benign long-context "
       "tasks and pull away from them on a distribution-shifted or adversarial suffix, where undecayed accumulation "
       "degrades as Theorem 2 says.",
       sizes={"T": (600, 2000), "k": (32, 128), "real_traces": (1, -1), "default_runs": (4, 4)})
def gda_validation_claim(ctx: Context) -> Computed:
    res, traces = cached(gda_validation, T=ctx.sizes["T"], k=ctx.sizes["k"], real=ctx.sizes["real_traces"],
                         seeds=ctx.sizes["default_runs"])
    cases = {}
    for name, rows in res.items():
        for kk in sorted({r["k"] for r in rows}):
            mine = [r for r in rows if r["k"] == kk]
            cases[f"{name} k={kk}"] = {"trace": name, "k": kk, "judged_params": section10_params("Default", kk),
                                       "steps": {r["window"]: r["steps"] for r in mine},
                                       "gap_per_step": {f"{r['policy']} {r['window']}": r["gap_per_step"]
                                                        for r in mine}}
    values = {"cases": cases, "judged": "Default", "judged_params_rule": "recent = max(1, k // 4), n_sinks = 4, half-life = recent, random ties",
              "also_reported": "GD-A", "margin": significance.declared(), "quality_replay": section10_quality(),
              "shift_replay": shift_quality(), "quality_margin": significance.declared_quality()}
    evidence = {"test": "theorems/test_default_policy.py", "figure": ctx.figure_files("gda_shift")}
    fails = [c["trace"] for c in cases.values() if not _separation(c, "Default", values["margin"])["pattern"]]
    if fails:
        evidence["counterexample"] = ctx.save_counterexample("gda_validation_" + fails[0].replace(" ", "_"),
                                                             traces[fails[0]])
    return Computed(values, {"benign": "matches the heavy-hitter policies", "suffix": "separates (lower regret)"},
                    evidence)


def _separation(c: dict, policy: str, margin: dict) -> dict:
    """One case of the Section 11 pattern for ``policy``, at the declared margin (per-step gaps, so one row):
    it *matches* H2O on the benign window when its gap exceeds H2O's by at most the margin (winning counts as
    matching), and *separates* on the suffix when its gap is below both undecayed accumulators' (H2O, ACC) by more
    than the margin."""
    g = c["gap_per_step"]
    matches = not significance.measurably_worse(g[f"{policy} benign"], g["H2O benign"], 1, margin)
    beats = {r: significance.measurably_better(g[f"{policy} suffix"], g[f"{r} suffix"], 1, margin)
             for r in ("H2O", "ACC")}
    return {"matches_benign": matches, "separates_from": beats, "pattern": matches and all(beats.values())}


def _gda_correction(cases: dict, fails: list[str], margin: dict, why, pol: str) -> str:
    """Where the pattern fails, split by cause: H2O does not degrade on the suffix either (its gap within the margin
    of the optimum's: nothing to separate from), or it degrades and the judged policy is not ahead by the margin."""
    flat = [n for n in fails if not significance.measurably_worse(cases[n]["gap_per_step"]["H2O suffix"], 0.0, 1,
                                                                  margin)]
    behind = [n for n in fails if n not in flat]
    parts = []
    if flat:
        parts.append(f"on {len(flat)} of the {len(fails)} failing cases H2O does not degrade on the suffix either (its "
                     f"gap is within the margin of the optimum's), so there is nothing to separate from: "
                     + "; ".join(why(n, pol) for n in flat))
    if behind:
        parts.append(f"on {len(behind)} H2O degrades but {pol} is not ahead of it by the margin: "
                     + "; ".join(why(n, pol) for n in behind))
    return "The separation does not show everywhere: " + "; and ".join(parts) + "."


def _gda_verdict(cases: dict, policy: str, margin: dict) -> tuple[str, list[str]]:
    fails = [n for n, c in cases.items() if not _separation(c, policy, margin)["pattern"]]
    return ("holds" if not fails else ("refuted" if len(fails) > len(cases) / 2 else "holds-with-correction")), fails


def _shift_separated(v: dict) -> dict:
    """A flip's edit: on every shifted case the default answers right and H2O loses the answer, with an answer NLL
    change and stream KL one nat above the default's (the default separates everywhere in output)."""
    return edit(v, "shift_replay/cases", lambda cs: {n: dict(c, Default=dict(c["Default"], right=True), H2O=dict(
        c["Default"], right=False, dnll_answer=c["Default"]["dnll_answer"] + 1.0,
        kl_stream=c["Default"]["kl_stream"] + 1.0)) for n, c in cs.items()})


def _shift_as_h2o(v: dict) -> dict:
    """A flip's edit: the default's output on every shifted case set to H2O's (no separation anywhere)."""
    return edit(v, "shift_replay/cases", lambda cs: {n: dict(c, Default=dict(c["H2O"])) for n, c in cs.items()})


@decides("gda-validation", flips={
    "the default separates everywhere and its output matches H2O's": (lambda v: edit(_output_as_h2o(
        _shift_separated(v)), "cases",
        lambda cs: {n: dict(c, gap_per_step=dict(c["gap_per_step"], **{
            "Default benign": 0.0, "Default suffix": 0.0, "H2O suffix": 1.0, "ACC suffix": 1.0}))
            for n, c in cs.items()}), "holds"),
    "the default no better than H2O on any suffix": (lambda v: edit(v, "cases", lambda cs: {n: dict(
        c, gap_per_step=dict(c["gap_per_step"], **{"Default suffix": c["gap_per_step"]["H2O suffix"]}))
        for n, c in cs.items()}), "refuted"),
    "Default's stream KL beyond H2O's plus the quality margin on every prompt": (lambda v: edit(
        v, "quality_replay/cases", lambda cs: {n: dict(c, Default=dict(c["Default"], kl_stream=c["H2O"]["kl_stream"]
            + 1.01 * significance.quality_margin(c["H2O"]["kl_stream"], v["quality_margin"]))) for n, c in cs.items()}),
        "refuted"),
    "the default separating from H2O in output on every shifted case": (_shift_separated, "holds-with-correction"),
    "the optimum's output on the shifted prompts as H2O's (the positive control fails)": (lambda v: edit(
        v, "shift_replay/cases", lambda cs: {n: dict(c, OPT=dict(c["H2O"])) for n, c in cs.items()}),
        "holds-with-correction"),
    "no committed shifted replay": (lambda v: edit(v, "shift_replay", None), "holds-with-correction")})
def gda_validation_decide(v: dict, e: dict) -> Decision:
    """The prediction is judged for the policy the sentence names, ``v['judged']`` (the Section 10 default: decayed,
    recency-floored; parameters in the values), per trace/budget case by :func:`_separation` at the declared margin
    ``v['margin']`` (VERDICTS.md, practical significance): it matches H2O on the benign window (not measurably
    worse; better counts as matching) and beats both H2O and ACC on the suffix by more than the margin.  Universal
    over "a shifted or adversarial suffix": refuted when the pattern fails on more than half of the cases,
    holds-with-correction when it fails on some, holds when it shows on every case.  Readings: the same rule for
    the registered plain GD-A (``v['also_reported']``, the policy the earlier verdict judged; no recency floor, no
    sinks) and for the default with a zero margin (strict).  Benign side in the model's output (quality): on each
    positive-control prompt of the committed replay ``v['quality_replay']`` the default *matches* H2O when it is not
    measurably worse at the declared quality margin ``v['quality_margin']`` (:func:`_quality`; better counts as
    matching), with the same rule over prompts (refuted when it fails to match on more than half, holds-with-
    correction on some).  The verdict is the worse of the regret cases' and the quality reading's (holds <
    holds-with-correction < refuted; a not-checkable quality reading leaves the regret verdict): the sentence is a
    conjunction, and the output on benign prompts is the benign side measured where it matters.  Flips: a suffix
    gap at H2O's on every case, the default's stream KL beyond H2O's plus the quality margin on every prompt
    (refuted); with the output as H2O's, the default separating everywhere (holds).  ``tests/test_section10_quality.py``
    checks the count over prompts (a loss on one prompt a correction, on more than half a refutation).

    Shifted window in the model's output (:func:`theorems.claims.separation.shift_side`, the committed replay
    ``v['shift_replay']`` of the ``shift-G-dD`` prompts): the default *separates* on a positive-control case when
    H2O is measurably worse than it at the quality margin and it is measurably worse than H2O on nothing; the same
    count over cases decides (not-reproduced when it fails on more than half while the positive control passes: the
    optimum separates from H2O on more than half; not-checkable when the control fails).  The verdict is the worst
    of the three sides (holds < holds-with-correction < not-reproduced < refuted; synthetic regret cases, benign
    output, shifted output; a not-checkable side is named and left out).  A policy
    that wins on both windows: on the benign window winning counts as matching (one-sided reading, the claim's own),
    so the pattern holds where it also separates on the shift; the two-sided reading ("matches" = within the margin
    either way) counts a measurable benign win as a failure to match and is reported beside it, as are separation
    from both H2O and TOVA and the answer-row tracking gap (the surrogate).  Flips on the shifted side: the
    default's output there set to H2O's (no separation on any case: not-reproduced), and every case separated with
    the benign output as H2O's and the synthetic pattern everywhere (holds)."""
    cases, margin, pol, old = v["cases"], v["margin"], v["judged"], v["also_reported"]
    regret_verdict, fails = _gda_verdict(cases, pol, margin)
    q_verdict, q_finding, q_res = _quality(v["quality_replay"], v["quality_margin"])
    if q_verdict != "not-checkable":
        counted = sum(c["full_cache_right"] for c in v["quality_replay"]["cases"].values())
        q_verdict = ("holds" if not q_res["lost"] else "refuted" if len(q_res["lost"]) > counted / 2
                     else "holds-with-correction")
    shift = shift_side(v["shift_replay"], v["quality_margin"], margin)
    verdict = max(regret_verdict, *(x if x in COMBINED else "holds" for x in (q_verdict, shift["verdict"])),
                  key=COMBINED.index)
    old_verdict, old_fails = _gda_verdict(cases, old, margin)
    strict_verdict, strict_fails = _gda_verdict(cases, pol, {"relative": 0.0, "per_step": 0.0})

    def why(n: str, p: str) -> str:
        s, g = _separation(cases[n], p, margin), cases[n]["gap_per_step"]
        lost = [r for r, ok in s["separates_from"].items() if not ok]
        return (f"{n} (benign gap {fmt(g[p + ' benign'], 3)} vs H2O {fmt(g['H2O benign'], 3)}"
                + ("" if s["matches_benign"] else ": measurably worse") + f"; suffix gap {fmt(g[p + ' suffix'], 3)} vs "
                + ", ".join(f"{r} {fmt(g[r + ' suffix'], 3)}" for r in ("H2O", "ACC"))
                + (f": not below {' and '.join(lost)} by the margin" if lost else "") + ")")

    readings = {
        f"{pol}: the decayed, recency-floored policy of Section 10 (the claim's own)": {
            "verdict": regret_verdict, "finding": f"pattern on {len(cases) - len(fails)} of {len(cases)} cases"
                                           + (f"; not on {'; '.join(why(n, pol) for n in fails)}" if fails else "")},
        f"{old}: the registered plain policy (no recency floor, no sinks; the earlier verdict's policy)": {
            "verdict": old_verdict, "finding": f"pattern on {len(cases) - len(old_fails)} of {len(cases)} cases"
                                               + (f"; not on {'; '.join(why(n, old) for n in old_fails)}"
                                                  if old_fails else "")},
        f"{pol}, strict: any difference counts": {
            "verdict": strict_verdict, "finding": f"pattern on {len(cases) - len(strict_fails)} of {len(cases)} "
                                                  "cases"},
        f"{pol}, benign side in the model's output: matches H2O per positive-control prompt at the declared quality "
        "margin": {"verdict": q_verdict, "finding": q_finding}}
    if q_verdict != "not-checkable":
        off = sorted(set(q_res["lost"]) | set(q_res["gained"]))
        readings[f"{pol}, benign side in the model's output, two-sided: within the quality margin of H2O either way "
                 "(a measurable win is not a match)"] = {
            "verdict": count_verdict(len(off), counted),
            "finding": f"within the margin on {counted - len(off)} of {counted}; off it on {', '.join(off) or 'none'}"}
    readings.update({f"{pol}, {name}": r for name, r in shift["readings"].items()})
    if shift["verdict"] == "not-checkable":
        readings[f"{pol}, shifted window in the model's output"] = {"verdict": "not-checkable",
                                                                    "finding": shift["finding"]}
    quality = ("Benign side in the model's output not judged." if q_verdict == "not-checkable" else
               "In the model's output on benign prompts it fails to match H2O (measurably worse at the quality "
               f"margin) on {len(q_res['lost'])} of {counted} positive-control prompt/budget cases"
               + (f" ({', '.join(q_res['lost'])})" if q_res["lost"] else "")
               + f"; H2O is measurably worse than it on {len(q_res['gained'])} (it separates -- better by some "
                 f"measure, worse by none -- on {len(q_res['separates'])}): quality reading {q_verdict}, regret cases "
                 f"{regret_verdict}.")
    shifted = (f"Shifted window in the model's output not judged ({shift['finding']})."
               if shift["verdict"] == "not-checkable" else
               f"On the shifted prompts it separates from H2O in output (H2O measurably worse, it no worse) on "
               f"{len(shift['separated'])} of {len(shift['counted'])} positive-control prompt/budget cases: shifted "
               f"reading {shift['verdict']}.  {shift['finding']}.")
    return Decision(
        verdict,
        f"Policy judged: {pol} ({v['judged_params_rule']}; run with " + ", ".join(
            f"{p} at k = {kk}" for kk, p in sorted({c["k"]: str(c["judged_params"]) for c in cases.values()}.items()))
        + f").  Declared margin: max({fmt(margin['relative'])} x the rival's gap, "
        f"{fmt(margin['per_step'])}) per step.  It matches H2O on the benign window and beats H2O and ACC on the "
        f"suffix on {len(cases) - len(fails)} of {len(cases)} trace/budget cases"
        + (f"; not on {'; '.join(why(n, pol) for n in fails)}" if fails else "")
        + f".  The registered plain {old} shows the pattern on {len(cases) - len(old_fails)} of {len(cases)} "
          f"({old_verdict}); with a zero margin the default's verdict is {strict_verdict}.  " + quality + "  "
        + shifted,
        correction=None if verdict != "holds-with-correction" else " ".join(
            ([_gda_correction(cases, fails, margin, why, pol)] if fails else [])
            + ([f"The benign side does not hold in the model's output everywhere: {q_finding}."]
               if q_verdict == "holds-with-correction" else [])
            + (["The separation on the shifted prompts does not show on every case in the model's output."]
               if shift["verdict"] == "holds-with-correction" else [])),
        readings=readings)
