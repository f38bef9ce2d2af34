"""The optimum's blind spot (paper §4 "What the offline optimum is, for attention", §9 "The softmax renormalization
breaks the strict fault model"): where the exact, lazy optimum of the attention-mass surrogate loses to an online
rule or a press in the model's output, with the case saved.  Table: :mod:`theorems.results.benchmark`; rules:
``VERDICTS.md``."""

from __future__ import annotations

import shutil

from kvcore.atomic import replacing
from realtrace import set_name
from theorems.results import benchmark as B
from theorems.tables import cached

from . import significance
from .registry import Computed, Context, Decision, claim, decides, edit, fmt
from .separation import count_verdict

INPUT = ("the committed quality sweep with the exact optimum (realtrace/data/quality_benchmark easy_*.json and "
         "quality_blind_spot/long_K128.json, PROVENANCE.md there; needs the [real,kvpress] extras to produce)")
TEST = "theorems/test_blind_spot.py"
# The declared quality rule's measurements on the answer rows: a prefill press keeps the whole prompt until the
# prefill ends, so the stream rows (VERDICTS.md's stream KL) do not compare it with the optimum at equal memory; on
# the answer rows every schedule holds K positions.
ANSWER_MEASURES = ("dnll_answer", "kl_answer")


def answer_losses(x: dict, ref: dict, qm: dict) -> list[str]:
    """Where ``x`` is measurably worse than ``ref`` on one prompt's answer: ``"answer"`` when only ``ref`` answers
    right, and each of :data:`ANSWER_MEASURES` above ``ref``'s by more than the declared quality margin."""
    lost = ["answer"] if ref["right"] and not x["right"] else []
    return lost + [q for q in ANSWER_MEASURES if x[q] - ref[q] > significance.quality_margin(ref[q], qm)]


def beats(x: dict, ref: dict, qm: dict) -> bool:
    """``x`` measurably better than ``ref`` on the answer: ``ref`` worse by some measurement, ``x`` by none."""
    return bool(answer_losses(ref, x, qm)) and not answer_losses(x, ref, qm)


def _case(c: dict, qm: dict) -> dict:
    opt = c["runs"][B.OPT]
    rules = {r: m for r, m in c["runs"].items() if r != B.OPT}
    return {"prompt": c["prompt"], "budget": c["budget"], "tokens": c["tokens"], "opt": opt,
            "beats_opt": sorted(r for r, m in rules.items() if beats(m, opt, qm)),
            "opt_beats": sorted(r for r, m in rules.items() if beats(opt, m, qm)),
            "answers_opt_misses": sorted(r for r, m in rules.items() if m["right"] and not opt["right"]),
            "lower_kl_answer": sorted(r for r, m in rules.items() if m["kl_answer"] < opt["kl_answer"]),
            "lower_dnll_answer": sorted(r for r, m in rules.items() if m["dnll_answer"] < opt["dnll_answer"]),
            "rules": rules}


def saved_case(cs: list[dict]) -> dict | None:
    """The case to save: among the cases where a rule beats the optimum in output, one where it answers a prompt the
    optimum misses first, then the largest answer-NLL advantage; the rule with the lowest answer-NLL change."""
    best = None
    for c in cs:
        for r in c["beats_opt"]:
            key = (r in c["answers_opt_misses"], c["opt"]["dnll_answer"] - c["rules"][r]["dnll_answer"])
            if best is None or key > best[0]:
                best = (key, c, r)
    if best is None:
        return None
    _, c, r = best
    files = {name: B.case_file(c["prompt"], c["budget"], name) for name in (B.OPT, r)}
    return {"prompt": c["prompt"], "budget": c["budget"], "rule": r,
            "files": {n: f"{set_name(B.BLIND_DIR.name)}/{p.name}" for n, p in files.items() if p.is_file()}}


def blind_spot_table() -> dict:
    qm = significance.declared_quality()
    cs = [_case(c, qm) for c in B.cases(True).values() if c["control"] and B.OPT in c["runs"]]
    cs.sort(key=lambda c: (c["prompt"], c["budget"]))
    gaps = [c["opt_gap"] for c in B.cases(True).values() if c["opt_gap"] is not None]
    return {"measured": bool(cs), "cases": cs, "saved": saved_case(cs), "quality_margin": qm,
            "opt_exact": all(c["opt_top"] is None for c in B.cases(True).values()),
            "opt_gap_max": max(gaps) if gaps else None}


@claim("opt-blind-spot", "§4, §9 (beyond SPEC's catalogue)", "The offline no-refetch optimum (keep the tokens "
       "that will receive the most future attention mass) is the target an eviction policy is measured against: a "
       "policy's quality is how close its resident set stays to the optimum's; the mass it optimizes is the right "
       "first-order surrogate of the output, not the exact loss.")
def opt_blind_spot(ctx: Context) -> Computed:
    t = cached(blind_spot_table)
    evidence = {"test": TEST, "data": f"{set_name(B.BENCH_DIR.name)}, {set_name(B.BLIND_DIR.name)}",
                "figure": ctx.figure_files("bench")}
    if t["saved"]:
        for name, rel in t["saved"]["files"].items():
            evidence[f"case_{name}"] = _copy_case(ctx, rel)
    return Computed(t, {"target": "no rule tracks the optimum less closely and outputs better"}, evidence)


def _copy_case(ctx: Context, rel: str) -> str:
    """A committed case schedule copied to ``paper_check/counterexamples/`` under the output root (replay:
    ``python -m paper_check quality file:PATH --budget K --prompts P --no-opt``); returns its path."""
    from realtrace import DATA_DIR

    name = rel.rsplit("/", 1)[1]
    out = f"paper_check/counterexamples/opt_blind_spot_{name}"
    target = ctx.out_dir / out
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target) as tmp:
        shutil.copyfile(DATA_DIR / rel.split("/", 2)[2], tmp)
    return out


@decides("opt-blind-spot", flips={
    "no committed sweep": (lambda v: dict(v, measured=False), "not-checkable"),
    "the optimum beating no rule anywhere": (lambda v: edit(v, "cases", lambda cs: [dict(c, opt_beats=[])
                                                                                    for c in cs]), "not-checkable"),
    "no rule beating the optimum": (lambda v: edit(v, "cases", lambda cs: [dict(c, beats_opt=[]) for c in cs]),
                                    "holds"),
    "a rule beating the optimum on every case": (lambda v: edit(v, "cases", lambda cs: [dict(
        c, beats_opt=["FIFO"]) for c in cs]), "not-reproduced")})
def opt_blind_spot_decide(v: dict, e: dict) -> Decision:
    """Per (prompt, budget) case that passes the positive control, with the optimum exact and lazy on complete rows:
    a rule or press *beats the optimum* when it is measurably better on the answer at the declared quality margin
    (the optimum loses the answer, or has an answer-NLL change or answer KL above the rule's by more than max(10 %,
    ln 1.01 nats), and the rule is measurably worse on none; the answer rows, where every schedule holds K).  Readings: (margin, the claim's own) holds when no rule
    beats the optimum on any case -- the optimum of the surrogate is then the output's target too; holds with a
    correction when one does on at most half of the cases (the correction names them: the surrogate's blind spot);
    not-reproduced beyond half.  (answers) the same count with "answers a prompt the optimum misses".  (strict) with
    any lower answer KL or answer-NLL change.  Control: the same comparison must see the optimum beat some rule on
    more than half of the cases (it has the power to see a difference in the output); not-checkable otherwise."""
    if not v["measured"]:
        return Decision("not-checkable", f"Missing input: {INPUT}.")
    cs = v["cases"]
    n = len(cs)
    control = [c for c in cs if c["opt_beats"]]
    if len(control) <= n / 2:
        return Decision("not-checkable", f"The comparison sees the optimum beat a rule on only {len(control)} of {n} "
                                         "cases: it cannot show a difference in the output.")

    def where(key: str) -> list[dict]:
        return [c for c in cs if c[key]]

    beaten, flips = where("beats_opt"), where("answers_opt_misses")
    strict = [c for c in cs if c["answers_opt_misses"] or c["lower_kl_answer"] or c["lower_dnll_answer"]]
    own = count_verdict(len(beaten), n, "not-reproduced")

    def show(c: dict) -> str:
        o = c["opt"]
        return (f"{c['prompt']} at K = {c['budget']} (optimum {'right' if o['right'] else 'wrong'}, answer dNLL "
                f"{fmt(o['dnll_answer'], 3)}, answer KL {fmt(o['kl_answer'], 3)}): "
                + ", ".join(f"{r} ({'right' if c['rules'][r]['right'] else 'wrong'}, dNLL "
                            f"{fmt(c['rules'][r]['dnll_answer'], 3)}, KL {fmt(c['rules'][r]['kl_answer'], 3)})"
                            for r in c["beats_opt"]))

    s = v["saved"]
    saved = ("none to save" if s is None else
             f"saved: {s['prompt']} at K = {s['budget']}, the optimum's and {s['rule']}'s schedules and per-row "
             f"outputs ({', '.join(s['files'].values()) or 'NOT committed'})")
    opt_wrong = [c for c in cs if not c["opt"]["right"]]
    exact = ("solved on complete rows" if v["opt_exact"] else
             f"its largest gap to the exact one {fmt(v['opt_gap_max'] or 0, 3)} per step")
    summary = (f"{n} positive-control cases with the exact lazy optimum ({exact}): the optimum answers wrongly on "
               f"{len(opt_wrong)} "
               f"({', '.join(c['prompt'] + ' K=' + str(c['budget']) for c in opt_wrong) or 'none'}); a rule or press beats "
               f"it in output on {len(beaten)} (control: the optimum beats some rule on {len(control)}); a rule "
               f"answers where it misses on {len(flips)}; any lower answer KL or dNLL on {len(strict)}.  "
               + ("; ".join(show(c) for c in beaten) + f".  Case {saved}." if beaten else ""))
    return Decision(own, summary, correction=(f"The optimum of the mass surrogate is beaten in output on "
                                              f"{len(beaten)} of {n} cases." if own == "holds-with-correction"
                                              else None),
                    readings={"margin: no rule measurably better than the optimum in output (the claim's own)": {
                        "verdict": own, "finding": f"beaten on {len(beaten)} of {n}"},
                        "answers: no rule answers a prompt the optimum misses": {
                            "verdict": count_verdict(len(flips), n, "not-reproduced"),
                            "finding": f"on {len(flips)} of {n}"},
                        "strict: no rule with a lower answer KL or answer-NLL change, or an answer it misses": {
                            "verdict": count_verdict(len(strict), n, "not-reproduced"),
                            "finding": f"on {len(strict)} of {n}"}})
