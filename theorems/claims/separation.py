"""The shifted window of the Section 11 prediction (claim ``gda-validation``), judged in the model's output.

Paper Section 11 ("Empirical validation of Greedy-Dual-Attention"), paraphrased: measured against H2O, StreamingLLM
and TOVA at equal budgets, the decayed, recency-floored policy should track about as well as the heavy-hitter rules on
benign long-context tasks and pull away from them on a suffix shifted away from what the early context attended,
where undecayed accumulation degrades as Theorem 2 predicts.  The shifted window is the committed quality replay of
the ``shift-G-dD`` prompts (:func:`theorems.results.recommendations.shift_quality`): a hotel register drilled by
answered questions hoards the attention, a locker code stated once in another voice is asked for last.

On each prompt/budget case that passes the positive control (the full cache answers it right) the default
*separates* from a rival when the rival is measurably worse than the default at the declared quality margin
(:func:`theorems.claims.significance.quality_losses`: a lost answer, or an answer-NLL change or stream KL above the
default's by more than ``max(0.1 x the default's, ln 1.01)``) and the default is measurably worse than the rival on
no measurement.  The surrogate reading uses the tracking gap of the answer rows (the rows that need the sleeper):
a policy's NM regret per step there minus the optimum's, separated at the declared regret margin
(:func:`theorems.claims.significance.measurably_better`, one row); the stream rows' gap is reported beside it.  A
reading holds when the default separates on every counted case and holds with a correction when it fails on at most
half.  When it fails on more than half the prediction is *not reproduced* (VERDICTS.md: an empirical prediction on
one small model, not a universal statement of the paper's model), provided the positive control passes: the same
comparison must see the optimum separate from H2O in output on more than half of the counted cases (the experiment
can show a policy pulling away from H2O when one does); otherwise the side is not-checkable.
"""

from __future__ import annotations

from . import significance
from .registry import fmt

SHIFT_INPUT = ("a committed quality replay of Default, H2O and TOVA on the shifted prompts "
               "(realtrace/data/quality_section11_shift: python -m paper_check quality Default -p recent=K/4 -p "
               "n_sinks=4 --budget K --prompts shift-16-d0,shift-16-d50,shift-24-d50 --opt-top 32 --json and the same "
               "for H2O and TOVA; needs the [real] extra)")
RIVALS = ("H2O", "TOVA")


def separates_in_output(default: dict, rival: dict, qm: dict) -> bool:
    """The default is measurably better than ``rival`` on one prompt (module docstring)."""
    return bool(significance.quality_losses(rival, default, qm)) and not significance.quality_losses(default, rival, qm)


def tracking_gap(case: dict, pol: str, scope: str = "answer") -> float:
    """``pol``'s NM regret per step on ``scope`` (``answer`` or ``stream``) minus the optimum's."""
    return case[pol][f"regret_{scope}"] - case["OPT"][f"regret_{scope}"]


def separates_in_gap(case: dict, rival: str, margin: dict, scope: str = "answer") -> bool:
    """The default's tracking gap on ``scope`` is below ``rival``'s by more than the declared margin (one row)."""
    return significance.measurably_better(tracking_gap(case, "Default", scope), tracking_gap(case, rival, scope), 1,
                                          margin)


def count_verdict(failed: int, counted: int, beyond_half: str = "refuted") -> str:
    """holds with no failure, ``beyond_half`` when more than half of the counted cases fail, a correction in
    between."""
    return "holds" if not failed else (beyond_half if failed > counted / 2 else "holds-with-correction")


def shift_side(q: dict | None, qm: dict, margin: dict) -> dict:
    """The shifted window's readings from the replay ``q`` at the quality margin ``qm`` and regret margin
    ``margin``: ``{"verdict", "finding", "readings": {name: {"verdict", "finding"}}, "counted", "separated"}``;
    not-checkable (naming :data:`SHIFT_INPUT`) without a replay or a prompt passing the control."""
    if q is None or not any(c["full_cache_right"] for c in q["cases"].values()):
        why = (f"missing input: {SHIFT_INPUT}" if q is None
               else f"no prompt of {q['source']} passes the positive control")
        return {"verdict": "not-checkable", "finding": why, "readings": {}, "counted": [], "separated": []}
    counted = {n: c for n, c in q["cases"].items() if c["full_cache_right"]}
    excluded = sorted(n for n in q["cases"] if n not in counted)
    vs = {r: [n for n, c in counted.items() if separates_in_output(c["Default"], c[r], qm)] for r in RIVALS}
    both = [n for n in vs["H2O"] if n in vs["TOVA"]]
    gap = [n for n, c in counted.items() if separates_in_gap(c, "H2O", margin)]
    gap_stream = [n for n, c in counted.items() if separates_in_gap(c, "H2O", margin, "stream")]
    control = [n for n, c in counted.items() if separates_in_output(c["OPT"], c["H2O"], qm)]
    h2o_degrades = [n for n, c in counted.items() if significance.quality_losses(c["H2O"], c["OPT"], qm)]
    right = {p: sum(c[p]["right"] for c in counted.values()) for p in ("Default", *RIVALS, "OPT")}

    def one(n: str, c: dict) -> str:
        pols = ("Default", *RIVALS, "OPT")
        return (f"{n}: answer {'/'.join('right' if c[p]['right'] else 'wrong' for p in pols)}, answer dNLL "
                + " / ".join(fmt(c[p]["dnll_answer"], 3) for p in pols) + ", stream KL "
                + " / ".join(fmt(c[p]["kl_stream"], 3) for p in pols) + ", answer-row tracking gap "
                + " / ".join(fmt(tracking_gap(c, p), 3) for p in ("Default", *RIVALS)) + " per step")

    runs = ", ".join(f"{label} at K = {n.rsplit('=', 1)[1]}" for n, label in q["configs"].items())
    finding = (f"{q['model']}, {q['mode']} loop, {runs} from {q['source']} (Default/H2O/TOVA/OPT; the optimum solved "
               "on top rows, its cost above the exact optimum's by at most "
               + ", ".join(f"{fmt(g, 3)} per step at {k}" for k, g in q["opt_gap"].items())
               + f"): answered right by Default {right['Default']}, H2O {right['H2O']}, TOVA {right['TOVA']}, OPT "
                 f"{right['OPT']} of {len(counted)} positive-control cases; H2O measurably worse than the optimum in "
                 f"output on {len(h2o_degrades)}; Default separates from H2O in output on {len(vs['H2O'])}, from "
                 f"TOVA on {len(vs['TOVA'])}, from both on {len(both)}, from H2O in the answer-row tracking gap on "
                 f"{len(gap)}, in the stream tracking gap on {len(gap_stream)}; positive control: the optimum separates "
                 f"from H2O in output on {len(control)}: " + "; ".join(one(n, c) for n, c in counted.items())
               + (f"; excluded by the control: {', '.join(excluded)}" if excluded else ""))
    n = len(counted)
    if len(control) <= n / 2:
        return {"verdict": "not-checkable", "finding": f"positive control failed (the optimum separates from H2O in "
                                                       f"output on only {len(control)} of {n}): {finding}",
                "readings": {}, "counted": list(counted), "separated": vs["H2O"]}
    miss = "not-reproduced"
    readings = {
        "shifted window, output: Default measurably better than H2O, the undecayed accumulator (the claim's own)": {
            "verdict": count_verdict(n - len(vs["H2O"]), n, miss),
            "finding": f"separates on {len(vs['H2O'])} of {n}: {', '.join(vs['H2O']) or 'none'}"},
        "shifted window, output: Default measurably better than both heavy-hitter rules, H2O and TOVA": {
            "verdict": count_verdict(n - len(both), n, miss),
            "finding": f"separates from both on {len(both)} of {n}: {', '.join(both) or 'none'}"},
        "shifted window, surrogate: Default's answer-row tracking gap below H2O's by the declared regret margin": {
            "verdict": count_verdict(n - len(gap), n, miss),
            "finding": f"separates on {len(gap)} of {n}: {', '.join(gap) or 'none'}"},
        "shifted window, surrogate: Default's stream tracking gap below H2O's by the declared regret margin": {
            "verdict": count_verdict(n - len(gap_stream), n, miss),
            "finding": f"separates on {len(gap_stream)} of {n}: {', '.join(gap_stream) or 'none'}"}}
    own = next(iter(readings.values()))
    return {"verdict": own["verdict"], "finding": finding, "readings": readings, "counted": list(counted),
            "separated": vs["H2O"]}


__all__ = ["RIVALS", "SHIFT_INPUT", "count_verdict", "separates_in_gap", "separates_in_output", "shift_side",
           "tracking_gap"]
