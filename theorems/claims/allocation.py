"""Claims about budgets across heads (paper §8 "Per-head and per-layer budgets are a multi-cache allocation
problem", §11 "Optimal per-head and per-layer allocation"), decided on the committed real traces with exact flows.
Tables: :mod:`theorems.results.allocation`; rules: ``VERDICTS.md``."""

from __future__ import annotations

from theorems.results.allocation import allocation_study, curve_study
from theorems.tables import cached

from .registry import CLAIMS, Computed, Context, Decision, claim, decides, edit, fmt

CURVE_SIZES = {"curve_steps": (24, 128)}  # the curve is solved at k = 0..curve_steps on every head
SIZES = {"per_head_ks": ((2, 4, 8), (2, 4, 8, 16, 32, 64)), "dp_per_head": (2, 4)}  # budgets B = heads x k
TEST = "theorems/test_allocation.py"


def _study(ctx: Context) -> dict:
    z = ctx.sizes
    return cached(allocation_study, per_head_ks=tuple(z["per_head_ks"]), dp_per_head=z["dp_per_head"],
                  curve_steps=curve_steps(ctx.profile))


def curve_steps(profile) -> int:
    """The curve points ``regret-curve-convex`` solves at ``profile``: the allocation study is made on the same
    solved curves (:func:`theorems.results.allocation.flow_curves`), so that a parallel run solves them once.  Not a
    size of the allocation claims: their values do not depend on it."""
    return CLAIMS["regret-curve-convex"].sizes_at(profile)["curve_steps"]


@claim("regret-curve-convex", "§8 (premise)", "The exact no-refetch optimum's regret is a convex, non-increasing "
       "function of the cache size k on every head (the premise under which equalizing marginal regret reductions "
       "is the optimal split of a budget).", sizes=CURVE_SIZES)
def regret_curve_convex(ctx: Context) -> Computed:
    c = cached(curve_study, curve_k=ctx.sizes["curve_steps"])
    return Computed({"traces": c["traces"], "T": c["T"], "k_range": [0, c["curve_k"]], "flow_solves": c["flow_solves"],
                     "flows_certified": c["flows_certified"],
                     "heads": {n: {"increases": h["violations"]["increase"], "concave_at": h["violations"]["concave"],
                                   "min_second_difference": h["min_second_difference"],
                                   "first_decrease": h["first_decrease"], "last_decrease": h["last_decrease"]}
                               for n, h in c["heads"].items()}},
                    {"curve": "convex and non-increasing in k on every head"}, {"test": TEST})


@decides("regret-curve-convex", flips={
    "a head has a negative second difference": (lambda v: edit(v, "heads/L00_kv0/concave_at", [5]), "refuted"),
    "a curve rises": (lambda v: edit(v, "heads/L09_kv1/increases", [3]), "refuted")})
def regret_curve_convex_decide(v: dict, e: dict) -> Decision:
    """A universal statement over the captured heads: refuted when any head's exact curve rises or has a negative
    second difference at some k (the head and k are the counterexample), holds otherwise."""
    bad = {n: h for n, h in v["heads"].items() if h["increases"] or h["concave_at"]}
    lo, hi = v["k_range"]
    if bad:
        n, h = next(iter(bad.items()))
        where = f"rises at k = {h['increases'][0]}" if h["increases"] else f"is concave at k = {h['concave_at'][0]}"
        return Decision("refuted", f"On {len(bad)} of {len(v['heads'])} heads of {v['traces']} the exact regret curve "
                                   f"OPT(k), k = {lo}..{hi}, is not convex and non-increasing: {n} {where}.")
    d2 = min(h["min_second_difference"] for h in v["heads"].values())
    return Decision("holds", f"On all {len(v['heads'])} heads of {v['traces']} (T = {v['T']}) the exact regret curve "
                             f"OPT(k), k = {lo}..{hi} ({v['flow_solves']} flows, "
                             f"{'all certified' if v['flows_certified'] else 'NOT all certified'}), "
                             f"never rises and every second difference is >= 0 in exact arithmetic (smallest "
                             f"{fmt(d2)}).")


@claim("equal-marginal-regret", "§8, §11", "The right per-head budget is not each head's local choice but the one "
       "that equalizes the marginal regret reduction per slot across heads.", sizes=SIZES)
def equal_marginal_regret(ctx: Context) -> Computed:
    s = _study(ctx)
    return Computed({"heads": s["heads"], "dp_check": s["dp_check"],
                     "budgets": [{"B": r["B"], "uniform": r["uniform"], "static": r["static"],
                                  "marginal": r["marginal"], "uniform_last_decrease": r["uniform_last_decrease"],
                                  "static_slots": r["static_slots"]} for r in s["rows"]]},
                    {"optimum": "equal marginal regret reduction per slot across heads"}, {"test": TEST})


@decides("equal-marginal-regret", flips={
    "a slot could move with a gain": (lambda v: edit(v, "budgets/0/marginal", lambda m: dict(
        m, holds=False, largest_next=m["least_last"] + 1)), "refuted"),
    "greedy differs from the dynamic program": (lambda v: edit(v, "dp_check/equal", False), "refuted"),
    "the uniform split is optimal": (lambda v: edit(v, "budgets", lambda bs: [dict(
        b, static=b["uniform"]) for b in bs]), "holds-with-correction")})
def equal_marginal_regret_decide(v: dict, e: dict) -> Decision:
    """Readings: (discrete) at the optimum no slot can move to another head with a gain -- every head's last slot
    removes at least as much regret as any head's next slot (the integer form of "equal marginal reductions",
    exact for convex curves); (literal) the heads' last-slot reductions are equal.  Refuted when the exact static
    optimum (greedy, checked against the dynamic program) violates the discrete condition at some budget, or greedy
    and the program differ; holds-with-correction when the equalized split is no better than the uniform one at
    every budget (then "not the local choice" is wrong); holds otherwise.  The literal reading holds with a
    correction: at integer budgets the last-slot reductions differ (their range is reported)."""
    bs = v["budgets"]
    broken = [b["B"] for b in bs if not b["marginal"]["holds"]]
    gain = [b["uniform"] - b["static"] for b in bs]
    spread = ", ".join(f"B = {b['B']}: [{fmt(b['marginal']['least_last'], 3)}, {fmt(b['marginal']['greatest_last'], 3)}]"
                       for b in bs)
    uni = ", ".join(f"[{fmt(b['uniform_last_decrease']['min'], 3)}, {fmt(b['uniform_last_decrease']['max'], 3)}]"
                    for b in bs)
    if broken or not v["dp_check"]["equal"]:
        verdict = "refuted"
    else:
        verdict = "holds" if any(g > 0 for g in gain) else "holds-with-correction"
    discrete = ("refuted" if broken or not v["dp_check"]["equal"] else "holds")
    summary = (f"The exact static split of B = {', '.join(str(b['B']) for b in bs)} slots over {v['heads']} heads "
               f"(greedy on the exact convex curves; the dynamic program at B = {v['dp_check']['B']} "
               f"{'agrees' if v['dp_check']['equal'] else 'DISAGREES'}) satisfies the marginal condition at "
               f"{len(bs) - len(broken)} of {len(bs)} budgets (no slot moves with a gain) and has "
               + ", ".join(f"{fmt(100 * g / b['uniform'], 3)}%" for g, b in zip(gain, bs))
               + " less regret than the uniform split; under the uniform split the last-slot reductions range over "
               + uni + ".")
    correction = None
    if verdict == "holds-with-correction":
        correction = "The equalized split is no better than the uniform one at any budget measured."
    return Decision(verdict, summary, correction, readings={
        "discrete: no slot moves to another head with a gain": {
            "verdict": discrete, "finding": f"least last-slot reduction >= largest next-slot reduction at "
                                            f"{len(bs) - len(broken)} of {len(bs)} budgets"},
        "literal: the last-slot reductions are equal": {
            "verdict": "refuted" if discrete == "refuted" else "holds-with-correction",
            "finding": f"at integer budgets they are bracketed, not equal: range {spread}"}})


@claim("static-vs-coupled", "§8, §11", "Fixed per-head (FastGen) and per-layer (PyramidKV) schedules are static "
       "approximations of a decision that should be dynamic and coupled across heads; the gap between the static "
       "schedules and the coupled optimum is a concrete question.", sizes=SIZES)
def static_vs_coupled(ctx: Context) -> Computed:
    s = _study(ctx)
    return Computed({"heads": s["heads"], "T": s["T"], "unattributed": s["unattributed"],
                     "budgets": [{"B": r["B"], "uniform": r["uniform"], "static": r["static"], "dynamic": r["dynamic"],
                                  "order_exact": r["order_exact"], "dynamic_certified": r["dynamic_certified"]}
                                 for r in s["rows"]]},
                    {"gap": "the coupled optimum below the static schedules (question: by how much)"},
                    {"test": TEST, "figure": ctx.figure_files("alloc")})


@decides("static-vs-coupled", flips={
    "the dynamic optimum gains nothing somewhere": (lambda v: edit(v, "budgets/0", lambda b: dict(
        b, dynamic=b["static"])), "holds-with-correction"),
    "the dynamic optimum gains nowhere": (lambda v: edit(v, "budgets", lambda bs: [dict(
        b, dynamic=b["static"]) for b in bs]), "refuted")})
def static_vs_coupled_decide(v: dict, e: dict) -> Decision:
    """The statement "static schedules approximate a decision that should be dynamic" is decided by the exact
    optima at equal total memory: holds when the dynamic coupled optimum's regret is below the best static split's
    at every budget where the static one loses anything; holds-with-correction when it gains nothing at some of them;
    refuted when it gains at none.  (The order dynamic <= static <= uniform is exact: any static split is a coupled
    schedule.)"""
    bs = v["budgets"]
    lossy = [b for b in bs if b["static"] > 0]
    gains = [b for b in lossy if b["dynamic"] < b["static"]]
    verdict = "refuted" if lossy and not gains else ("holds" if len(gains) == len(lossy) else "holds-with-correction")
    rows = "; ".join(f"B = {b['B']}: uniform {fmt(b['uniform'])}, static optimum {fmt(b['static'])} "
                     f"({fmt(100 * (b['static'] - b['uniform']) / b['uniform'], 3)}%), dynamic coupled "
                     f"{fmt(b['dynamic'])} ({fmt(100 * (b['dynamic'] - b['static']) / b['static'], 3) if b['static'] else '0'}% "
                     f"vs static)" for b in bs)
    summary = (f"Summed exact NM regret over {v['heads']} heads (T = {v['T']}, stored entries only; {fmt(v['unattributed'])} "
               f"unattributed residual mass not charged): {rows}.  Exact order dynamic <= static <= uniform at "
               f"{sum(b['order_exact'] for b in bs)} of {len(bs)} budgets.")
    correction = None
    if verdict == "holds-with-correction":
        same = [b["B"] for b in lossy if b not in gains]
        correction = f"At B = {same} the dynamic coupled optimum gains nothing over the best static split."
    return Decision(verdict, summary, correction)
