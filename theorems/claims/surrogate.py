"""Regret as a first-order surrogate of output quality (paper Sections 3 and 9), judged on every committed quality
replay in the model.  Table: :mod:`theorems.results.surrogate`."""

from __future__ import annotations

from theorems.results.surrogate import surrogate_table
from theorems.tables import cached

from .registry import Computed, Context, Decision, claim, decides, edit, fmt

SEED = 29  # the issue number; any fixed value would do
INPUT = ("committed quality replays (realtrace/data/quality_*: the --json output of python -m paper_check quality; "
         "needs the [real] extra to produce)")


@claim("regret-surrogate", "§3, §9", "The attention-mass regret is correct to first order as a measure of what "
       "eviction does to the attention output, so it is the right surrogate of output quality (with two named "
       "failure directions).", sizes={"resamples": (200, 2000)})
def regret_surrogate(ctx: Context) -> Computed:
    t = cached(surrogate_table, resamples=ctx.sizes["resamples"], seed=SEED)
    return Computed(t, {"prediction": "regret and output loss rise together (rank correlation above 0)"},
                    {"test": "theorems/test_regret_surrogate.py", "source": ", ".join(t["sources"]),
                     "figure": ctx.figure_files("surrogate")})


def _above(r: dict, key: str) -> bool:
    return r[f"{key}_ci95"][0] > 0


@decides("regret-surrogate", flips={
    "the answer pair's intervals below 0": (lambda v: edit(v, "pairs/answer", lambda r: dict(
        r, pooled_ci95=[-0.5, -0.1], within_ci95=[-0.5, -0.1])), "holds-with-correction"),
    "both pairs' intervals containing 0": (lambda v: edit(v, "pairs", lambda ps: {n: dict(
        r, pooled_ci95=[-0.1, 0.3], within_ci95=[-0.1, 0.3]) for n, r in ps.items()}), "not-reproduced"),
    "the planted control's interval containing 0": (lambda v: edit(v, "control/planted", lambda r: dict(
        r, pooled_ci95=[-0.1, 0.3])), "not-checkable"),
    "the planted control's within-prompt interval containing 0": (lambda v: edit(v, "control/planted", lambda r: dict(
        r, within_ci95=[-0.1, 0.3])), "not-checkable"),
    "no committed replay": (lambda v: {"sources": [], "points": 0}, "not-checkable")})
def regret_surrogate_decide(v: dict, e: dict) -> Decision:
    """What the paper's claim predicts: if the regret is a first-order surrogate, a schedule with more regret
    changes the output more, so across policies x budgets x prompts the rank correlation of regret with the output
    loss is positive -- pooled and, more sharply, within a prompt (where the prompt's own difficulty cannot make
    it).  What would refute it: a pair whose 95% bootstrap interval lies at or below 0.  Decision: not-checkable
    without a replay, or when the procedure's planted control fails (a noisy increasing relation on the same prompt
    structure must give pooled and within-prompt intervals above 0; the independent pairing, one random permutation,
    is reported beside it and not decided on: a single draw lands outside its own interval by chance); holds when
    the pooled and within-prompt intervals of both pairs (stream regret/KL, answer-row regret/answer NLL change) lie
    above 0; holds-with-correction when some but not all do; not-reproduced when none does (an empirical claim: the
    model is one of many)."""
    if not v["points"]:
        return Decision("not-checkable", f"Missing input: {INPUT}.")
    ctl = v["control"]
    control_ok = _above(ctl["planted"], "pooled") and _above(ctl["planted"], "within")

    def line(name: str, r: dict) -> str:
        return (f"{name} ({r['x']} vs {r['y']}): pooled rho {fmt(r['pooled'], 3)} [95% {fmt(r['pooled_ci95'][0], 3)}, "
                f"{fmt(r['pooled_ci95'][1], 3)}], within-prompt mean {fmt(r['within'], 3)} "
                f"[{fmt(r['within_ci95'][0], 3)}, {fmt(r['within_ci95'][1], 3)}]")

    controls = (f"Controls on the same {v['points']} points: planted increasing relation "
                f"{line('planted', ctl['planted'])}; independent pairing {line('independent', ctl['independent'])}.")
    head = (f"{v['points']} (run, prompt) points from {', '.join(v['sources'])}, prompt-level bootstrap of "
            f"{v['resamples']} draws (seed {v['seed']}): ")
    if not control_ok:
        return Decision("not-checkable", head + "the procedure's control failed, so it cannot show the effect.  "
                        + controls)
    checks = {(n, s): _above(r, s) for n, r in v["pairs"].items() for s in ("pooled", "within")}
    up = sum(checks.values())
    verdict = "holds" if up == len(checks) else ("not-reproduced" if not up else "holds-with-correction")
    missed = [f"{n} {s}" for (n, s), ok in checks.items() if not ok]
    readings = {f"{s}: rank correlation of {n} regret with the output loss above 0": {
        "verdict": "holds" if ok else "not-reproduced", "finding": line(n, v["pairs"][n])}
        for (n, s), ok in checks.items()}
    return Decision(verdict, head + "; ".join(line(n, r) for n, r in v["pairs"].items())
                    + f".  Intervals above 0: {up} of {len(checks)}.  " + controls,
                    correction=(f"Not every interval lies above 0: {', '.join(missed)}." if verdict ==
                                "holds-with-correction" else None), readings=readings)
