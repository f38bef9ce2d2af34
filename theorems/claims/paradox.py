"""A finding beyond the catalogue (issue 52, item 4): between schedules at equal memory, does the lower attention-mass
regret go with the better output?  Paper §9 optimizes the regret (Eq. 4) and takes its exact optimum as the quality
ceiling; solving it more exactly (complete rows instead of the top 32 entries of each row), sharing the memory
better (static or coupled splits) or optimizing another cost (value-aware) changes the regret -- here counted
against what it does to the model's answer.  Table: :mod:`theorems.results.paradox`; rules: ``VERDICTS.md``."""

from __future__ import annotations

import math

from theorems.results.paradox import FAMILIES, paradox_table
from theorems.tables import cached

from .registry import Computed, Context, Decision, claim, decides, edit

TEST = "theorems/test_surrogate_paradox.py"
ALPHA = 0.05  # the sign test's level, declared with the rule (decide's docstring)
OWN, ACCURACY = "answer_kl", "accuracy"


def sign_test(better: int, worse: int) -> float:
    """One-sided sign test: ``P(X >= better)`` for ``X ~ Binomial(better + worse, 1/2)`` -- how likely that many of
    the pairs with a measurable difference favour the lower-regret side if the regret said nothing about the output
    (ties, "same", are left out; Conover, *Practical Nonparametric Statistics*, 1999, §3.4).  1 with no pair."""
    n = better + worse
    return sum(math.comb(n, j) for j in range(better, n + 1)) / 2 ** n if n else 1.0


@claim("surrogate-exactness", "§9 (issue 52)", "Of two eviction schedules at equal memory, the one with the lower "
       "attention-mass regret on complete rows gives the better output -- so solving the surrogate more exactly, or "
       "sharing the memory better by it, improves the answer (the premise of §9's use of the regret's exact optimum "
       "as the quality target).")
def surrogate_exactness(ctx: Context) -> Computed:
    t = cached(paradox_table)
    return Computed({"sources": t["sources"], "margin": t["margin"], "pairs": len(t["pairs"]),
                     "counts": t["counts"], "control": t["control"], "alpha": ALPHA, "families": list(FAMILIES)},
                    {"order": "lower complete-row regret -> better output (answer KL, accuracy)"},
                    {"test": TEST, "source": ", ".join(t["sources"])})


def _rule(a: dict, alpha: float) -> tuple[str, float]:
    """The verdict of one count by the rule of :func:`surrogate_exactness_decide`, and the sign test's p."""
    p = sign_test(a["better"], a["worse"])
    if a["worse"] >= a["better"]:
        return "refuted", p
    return ("holds" if p < alpha else "holds-with-correction"), p


def _reading(v: dict, r: str) -> tuple[str, str, float]:
    """The verdict under reading ``r`` by the rule of :func:`surrogate_exactness_decide`, its finding and the sign
    test's p."""
    a = v["counts"][r]["all"]
    verdict, p = _rule(a, v["alpha"])
    what = "answer KL above the other's by more than the quality margin" if r == OWN else "a lost answer"
    fam = "; ".join(f"{f}: {x['worse']} worse / {x['better']} better of {x['pairs']}"
                    for f, x in v["counts"][r]["family"].items())
    by_k = ", ".join(f"K = {k}: {x['worse']}/{x['better']}/{x['pairs']}" for k, x in v["counts"][r]["budget"].items())
    return verdict, (f"of {a['pairs']} pairs the lower-regret schedule has the worse output ({what}) in "
                     f"{a['worse']}, the better in {a['better']}, the same in {a['same']} (sign test p = {p:.3g}; "
                     f"{fam}; worse/better/pairs by budget: {by_k})"), p


def _control_ok(v: dict) -> bool:
    """The count saw the constructed effect (every pair worse) and did not see it where it was absent (no pair
    worse, some better under answer KL)."""
    pres, absn = v["control"]["present"], v["control"]["absent"]
    return (all(pres[r]["worse"] == pres[r]["pairs"] > 0 for r in (OWN, ACCURACY))
            and all(absn[r]["worse"] == 0 for r in (OWN, ACCURACY)) and absn[OWN]["better"] > 0)


@decides("surrogate-exactness", flips={
    "the lower-regret side is worse as often as better": (lambda v: edit(v, "counts/answer_kl/all", lambda a: dict(
        a, worse=a["better"])), "refuted"),
    "the lower-regret side is better only once more than worse": (lambda v: edit(v, "counts/answer_kl/all",
        lambda a: dict(a, better=a["worse"] + 1, same=a["pairs"] - 2 * a["worse"] - 1)), "holds-with-correction"),
    "the control sees no constructed effect": (lambda v: edit(v, "control/present/answer_kl", lambda a: dict(
        a, worse=0, same=a["pairs"])), "not-checkable"),
    "the control sees an effect where none was put": (lambda v: edit(v, "control/absent/answer_kl", lambda a: dict(
        a, worse=1)), "not-checkable"),
    "no pair": (lambda v: edit(v, "counts/answer_kl/all", {"pairs": 0, "worse": 0, "better": 0, "same": 0}),
                "not-checkable")})
def surrogate_exactness_decide(v: dict, e: dict) -> Decision:
    """The rule, declared before the complete counts were made (a partial count -- 42 pairs, before the truncated
    coupled and static solves had run -- had been seen; the rule was not changed after).  Over the pairs of
    :mod:`theorems.results.paradox` (each
    oriented so that ``a`` has the lower complete-row regret), count the pairs where ``a``'s output is measurably
    worse and measurably better (declared quality margin).  Reading ``answer_kl`` (the claim's own: the continuous
    measure of the answer the surrogate is meant to predict) and ``accuracy`` (right/wrong, reported).  Verdict:
    **refuted** -- the finding "lower regret goes with worse output" -- when worse >= better: the surrogate's order
    between these schedules predicts the output no better than its reverse; **holds** when better > worse and the
    one-sided sign test gives p < ``alpha`` = 0.05; **holds-with-correction** when better > worse without that
    significance (a tendency the counts cannot tell from chance).  The same rule per family of pairs (exact vs
    truncated, uniform vs static vs coupled, mass vs value) gives readings, reported.  **not-checkable** with no pair, or when the
    positive control fails: the same count on the same pairs with outputs constructed from the regrets must find
    every pair worse when lower regret is made to go with worse output and none worse when the output follows the
    regret.

    What it means for §9: the regret ranks schedules that differ a lot (policies against the optimum; claim
    ``regret-surrogate``), but between near optima at equal memory it is not a reliable guide to the answer; an
    exactly solved optimum of the surrogate is then a schedule of least attention loss, not the best output a
    schedule can give, and §9's use of it as the quality ceiling holds only as a regret statement."""
    if v["counts"][OWN]["all"]["pairs"] == 0:
        return Decision("not-checkable", "No pair of schedules at equal memory with different regret was found in "
                                         f"the committed replays ({', '.join(v['sources']) or 'none read'}).")
    if not _control_ok(v):
        pres, absn = v["control"]["present"][OWN], v["control"]["absent"][OWN]
        return Decision("not-checkable", f"The positive control failed: with lower regret made to go with worse "
                                         f"output the count found {pres['worse']} of {pres['pairs']} pairs worse, "
                                         f"with the output following the regret {absn['worse']} worse.")
    verdict, finding, p = _reading(v, OWN)
    acc_verdict, acc_finding, _ = _reading(v, ACCURACY)
    pres = v["control"]["present"][OWN]
    absn = v["control"]["absent"][OWN]
    summary = (f"Answer KL: {finding}.  Accuracy: {acc_finding}.  Positive control on the same pairs: with lower "
               f"regret made to go with worse output the count finds {pres['worse']} of {pres['pairs']} worse; with "
               f"the output following the regret {absn['worse']} worse and {absn['better']} better.")
    correction = None
    if verdict == "holds-with-correction":
        correction = (f"Lower regret goes with the better answer in more pairs than the worse one, but not "
                      f"significantly (sign test p = {p:.3g} >= {v['alpha']}).")
    families = {}
    for f, a in v["counts"][OWN]["family"].items():
        if a["pairs"]:
            fv, fp = _rule(a, v["alpha"])
            families[f"answer KL, {f} only"] = {"verdict": fv, "finding": (
                f"{a['worse']} worse / {a['better']} better / {a['same']} the same of {a['pairs']} pairs "
                f"(sign test p = {fp:.3g})")}
    return Decision(verdict, summary, correction, readings={
        "answer KL (the claim's own)": {"verdict": verdict, "finding": finding},
        "accuracy (right/wrong answer)": {"verdict": acc_verdict, "finding": acc_finding}, **families})
