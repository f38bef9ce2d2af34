"""Claims about budgets across heads (paper §8 "Per-head and per-layer budgets are a multi-cache allocation
problem", §11 "Optimal per-head and per-layer allocation"), decided with exact flows on the complete rows of 12 real
heads (``realtrace/data/smollm2_recall_complete``), the truncated reading (each row's top 32 stored entries,
``realtrace/data/smollm2_recall``, its residual not charged) reported beside it (VERDICTS.md rule 3).
Tables: :mod:`theorems.results.allocation`; rules: ``VERDICTS.md``.

Sizes.  Every size is the same for both readings.  The complete rows cost more (measured, CPU seconds of
``python -m paper_check claim ID`` on a 2-core EPYC shared with other agents, issue 52): the curves ``OPT(0..24)`` of
the 12 complete heads 7.1 s against 2.4 s on the stored entries, the allocation study at the quick budgets 3.3 s
against 2.3 s; the full profile's ``OPT(0..128)`` 48 s.  The quick sizes stay those of the truncated reading."""

from __future__ import annotations

from theorems.results.allocation import allocation_study, curve_study
from theorems.tables import cached

from .registry import CLAIMS, Computed, Context, Decision, claim, decides, edit, fmt

CURVE_SIZES = {"curve_steps": (24, 128)}  # the curve is solved at k = 0..curve_steps on every head
SIZES = {"per_head_ks": ((2, 4, 8), (2, 4, 8, 16, 32, 64)), "dp_per_head": (2, 4)}  # budgets B = heads x k
TEST = "theorems/test_allocation.py"
TRUNCATED = "top-32 stored entries (truncated; residual mass not charged)"
OWN = "complete rows (the claim's own)"


def _study(ctx: Context, rows: str) -> dict:
    z = ctx.sizes
    return cached(allocation_study, per_head_ks=tuple(z["per_head_ks"]), dp_per_head=z["dp_per_head"],
                  curve_steps=curve_steps(ctx.profile), rows=rows)


def curve_steps(profile) -> int:
    """The curve points ``regret-curve-convex`` solves at ``profile``: the allocation study is made on the same
    solved curves (:func:`theorems.results.allocation.flow_curves`), so that a parallel run solves them once.  Not a
    size of the allocation claims: their values do not depend on it."""
    return CLAIMS["regret-curve-convex"].sizes_at(profile)["curve_steps"]


def _curves(curve_k: int, rows: str) -> dict:
    c = cached(curve_study, curve_k=curve_k, rows=rows)
    return {"traces": c["traces"], "T": c["T"], "k_range": [0, c["curve_k"]], "flow_solves": c["flow_solves"],
            "flows_certified": c["flows_certified"], "unattributed": c["unattributed"],
            "heads": {n: {"increases": h["violations"]["increase"], "concave_at": h["violations"]["concave"],
                          "min_second_difference": h["min_second_difference"],
                          "first_decrease": h["first_decrease"], "last_decrease": h["last_decrease"]}
                      for n, h in c["heads"].items()}}


@claim("regret-curve-convex", "§8 (premise)", "The exact no-refetch optimum's regret is a convex, non-increasing "
       "function of the cache size k on every head (the premise under which equalizing marginal regret reductions "
       "is the optimal split of a budget).", sizes=CURVE_SIZES)
def regret_curve_convex(ctx: Context) -> Computed:
    k = ctx.sizes["curve_steps"]
    return Computed({**_curves(k, "complete"), "truncated": _curves(k, "stored")},
                    {"curve": "convex and non-increasing in k on every head"}, {"test": TEST})


def _curve_reading(v: dict) -> tuple[str, str]:
    """The verdict and finding of one reading's curves (see :func:`regret_curve_convex_decide`)."""
    bad = {n: h for n, h in v["heads"].items() if h["increases"] or h["concave_at"]}
    lo, hi = v["k_range"]
    if bad:
        n, h = next(iter(bad.items()))
        where = f"rises at k = {h['increases'][0]}" if h["increases"] else f"is concave at k = {h['concave_at'][0]}"
        return "refuted", (f"on {len(bad)} of {len(v['heads'])} heads of {v['traces']} the exact regret curve OPT(k), "
                           f"k = {lo}..{hi}, is not convex and non-increasing: {n} {where}")
    d2 = min(h["min_second_difference"] for h in v["heads"].values())
    return "holds", (f"on all {len(v['heads'])} heads of {v['traces']} (T = {v['T']}; unattributed residual mass "
                     f"{fmt(v['unattributed'])}) the exact regret curve OPT(k), k = {lo}..{hi} ({v['flow_solves']} "
                     f"flows, {'all certified' if v['flows_certified'] else 'NOT all certified'}), never rises and "
                     f"every second difference is >= 0 in exact arithmetic (smallest {fmt(d2)})")


@decides("regret-curve-convex", flips={
    "a head has a negative second difference": (lambda v: edit(v, "heads/L00_kv0/concave_at", [5]), "refuted"),
    "a curve rises": (lambda v: edit(v, "heads/L09_kv1/increases", [3]), "refuted"),})
def regret_curve_convex_decide(v: dict, e: dict) -> Decision:
    """A universal statement over the captured heads, decided on their complete rows: refuted when any head's exact
    curve rises or has a negative second difference at some k (the head and k are the counterexample), holds
    otherwise.  The same check on the top-32 stored entries is a reading reported beside it, not the verdict (the
    truncated rows are not the heads' attention)."""
    verdict, finding = _curve_reading(v)
    t_verdict, t_finding = _curve_reading(v["truncated"])
    summary = f"On complete rows, {finding}.  Truncated reading: {t_finding}."
    return Decision(verdict, summary, readings={
        OWN: {"verdict": verdict, "finding": finding}, TRUNCATED: {"verdict": t_verdict, "finding": t_finding}})


def _budgets(s: dict) -> list[dict]:
    return [{"B": r["B"], "uniform": r["uniform"], "static": r["static"], "dynamic": r["dynamic"],
             "order_exact": r["order_exact"], "dynamic_certified": r["dynamic_certified"],
             "static_flow_equal": r["static_flow"]["equals_greedy"] and r["static_flow"]["certified"],
             "marginal": r["marginal"], "uniform_last_decrease": r["uniform_last_decrease"],
             "static_slots": r["static_slots"]} for r in s["rows"]]


def _allocation_values(ctx: Context) -> dict:
    own, cut = _study(ctx, "complete"), _study(ctx, "stored")
    return {"heads": own["heads"], "T": own["T"], "traces": own["traces"], "unattributed": own["unattributed"],
            "dp_check": own["dp_check"], "budgets": _budgets(own),
            "truncated": {"traces": cut["traces"], "unattributed": cut["unattributed"], "dp_check": cut["dp_check"],
                          "budgets": _budgets(cut)}}


@claim("equal-marginal-regret", "§8, §11", "The right per-head budget is not each head's local choice but the one "
       "that equalizes the marginal regret reduction per slot across heads.", sizes=SIZES)
def equal_marginal_regret(ctx: Context) -> Computed:
    return Computed(_allocation_values(ctx), {"optimum": "equal marginal regret reduction per slot across heads"},
                    {"test": TEST})


def _marginal_reading(v: dict) -> tuple[str, str, list[float]]:
    """``(verdict, finding, gains)`` of one reading: refuted when the greedy split is not the exact static optimum
    (the dynamic program or the static flow disagrees) or violates the discrete condition at some budget."""
    bs = v["budgets"]
    broken = [b["B"] for b in bs if not b["marginal"]["holds"]]
    unequal = [b["B"] for b in bs if not b["static_flow_equal"]]
    gains = [b["uniform"] - b["static"] for b in bs]
    verdict = "refuted" if broken or unequal or not v["dp_check"]["equal"] else "holds"
    finding = (f"the exact static split of B = {', '.join(str(b['B']) for b in bs)} slots on {v['traces']} (greedy "
               f"on the exact curves; the dynamic program at B = {v['dp_check']['B']} "
               f"{'agrees' if v['dp_check']['equal'] else 'DISAGREES'}, the certified static flow "
               f"{'agrees at every budget' if not unequal else f'DISAGREES at B = {unequal}'}) satisfies the "
               f"marginal condition at {len(bs) - len(broken)} of {len(bs)} budgets and has "
               + ", ".join(f"{fmt(100 * g / b['uniform'], 3)}%" for g, b in zip(gains, bs))
               + " less regret than the uniform split")
    return verdict, finding, gains


@decides("equal-marginal-regret", flips={
    "a slot could move with a gain": (lambda v: edit(v, "budgets/0/marginal", lambda m: dict(
        m, holds=False, largest_next=m["least_last"] + 1)), "refuted"),
    "greedy differs from the dynamic program": (lambda v: edit(v, "dp_check/equal", False), "refuted"),
    "greedy differs from the static flow": (lambda v: edit(v, "budgets/1/static_flow_equal", False), "refuted"),
    "the uniform split is optimal": (lambda v: edit(v, "budgets", lambda bs: [dict(
        b, static=b["uniform"]) for b in bs]), "holds-with-correction"),})
def equal_marginal_regret_decide(v: dict, e: dict) -> Decision:
    """Decided on complete rows.  Readings: (discrete) at the optimum no slot can move to another head with a gain
    -- every head's last slot removes at least as much regret as any head's next slot (the integer form of "equal
    marginal reductions", exact for convex curves); (literal) the heads' last-slot reductions are equal; (truncated)
    the discrete reading on the top-32 stored entries, reported only.  Refuted when the exact static optimum
    (greedy, checked against the dynamic program and the certified static flow, which assumes no convexity)
    violates the discrete condition at some budget, or greedy and either check differ; holds-with-correction when
    the equalized split is no better than the uniform one at every budget (then "not the local choice" is wrong);
    holds otherwise.  The literal reading holds with a correction: at integer budgets the last-slot reductions
    differ (their range is reported)."""
    bs = v["budgets"]
    discrete, finding, gain = _marginal_reading(v)
    t_verdict, t_finding, _ = _marginal_reading(v["truncated"])
    verdict = discrete if discrete == "refuted" else ("holds" if any(g > 0 for g in gain) else "holds-with-correction")
    spread = ", ".join(f"B = {b['B']}: [{fmt(b['marginal']['least_last'], 3)}, {fmt(b['marginal']['greatest_last'], 3)}]"
                       for b in bs)
    uni = ", ".join(f"[{fmt(b['uniform_last_decrease']['min'], 3)}, {fmt(b['uniform_last_decrease']['max'], 3)}]"
                    for b in bs)
    summary = (f"On complete rows, {finding}; under the uniform split the last-slot reductions range over {uni}.  "
               f"Truncated reading: {t_finding}.")
    correction = None
    if verdict == "holds-with-correction":
        correction = "The equalized split is no better than the uniform one at any budget measured."
    return Decision(verdict, summary, correction, readings={
        "discrete: no slot moves to another head with a gain": {
            "verdict": discrete, "finding": f"on complete rows, {finding}"},
        "literal: the last-slot reductions are equal": {
            "verdict": "refuted" if discrete == "refuted" else "holds-with-correction",
            "finding": f"at integer budgets they are bracketed, not equal: range {spread}"},
        TRUNCATED: {"verdict": t_verdict, "finding": t_finding}})


@claim("static-vs-coupled", "§8, §11", "Fixed per-head (FastGen) and per-layer (PyramidKV) schedules are static "
       "approximations of a decision that should be dynamic and coupled across heads; the gap between the static "
       "schedules and the coupled optimum is a concrete question.", sizes=SIZES)
def static_vs_coupled(ctx: Context) -> Computed:
    v = _allocation_values(ctx)
    keep = ("B", "uniform", "static", "dynamic", "order_exact", "dynamic_certified", "static_flow_equal")
    return Computed({"heads": v["heads"], "T": v["T"], "traces": v["traces"], "unattributed": v["unattributed"],
                     "budgets": [{k: b[k] for k in keep} for b in v["budgets"]],
                     "truncated": {"traces": v["truncated"]["traces"], "unattributed": v["truncated"]["unattributed"],
                                   "budgets": [{k: b[k] for k in keep} for b in v["truncated"]["budgets"]]}},
                    {"gap": "the coupled optimum below the static schedules (question: by how much)"},
                    {"test": TEST, "figure": ctx.figure_files("alloc")})


def _gap_reading(v: dict) -> tuple[str, str, list[int]]:
    """``(verdict, finding, budgets where the dynamic optimum gains nothing)`` of one reading."""
    bs = v["budgets"]
    lossy = [b for b in bs if b["static"] > 0]
    gains = [b for b in lossy if b["dynamic"] < b["static"]]
    verdict = "refuted" if lossy and not gains else ("holds" if len(gains) == len(lossy) else "holds-with-correction")
    rows = "; ".join(f"B = {b['B']}: uniform {fmt(b['uniform'])}, static optimum {fmt(b['static'])} "
                     f"({fmt(100 * (b['static'] - b['uniform']) / b['uniform'], 3)}%), dynamic coupled "
                     f"{fmt(b['dynamic'])} ({fmt(100 * (b['dynamic'] - b['static']) / b['static'], 3) if b['static'] else '0'}% "
                     f"vs static)" for b in bs)
    certified = sum(b["dynamic_certified"] and b["static_flow_equal"] for b in bs)
    finding = (f"summed exact NM regret over the heads of {v['traces']} (unattributed residual mass "
               f"{fmt(v['unattributed'])} not charged): {rows}; exact order dynamic <= static <= uniform at "
               f"{sum(b['order_exact'] for b in bs)} of {len(bs)} budgets, both flows certified at {certified}")
    return verdict, finding, [b["B"] for b in lossy if b not in gains]


@decides("static-vs-coupled", flips={
    "the dynamic optimum gains nothing somewhere": (lambda v: edit(v, "budgets/0", lambda b: dict(
        b, dynamic=b["static"])), "holds-with-correction"),
    "the dynamic optimum gains nowhere": (lambda v: edit(v, "budgets", lambda bs: [dict(
        b, dynamic=b["static"]) for b in bs]), "refuted"),})
def static_vs_coupled_decide(v: dict, e: dict) -> Decision:
    """The statement "static schedules approximate a decision that should be dynamic" is decided by the exact
    optima at equal total memory on complete rows (the dynamic coupled optimum priced until certified, the static
    one by greedy on the exact curves and checked against the certified static flow): holds when the dynamic
    coupled optimum's regret is below the best static split's at every budget where the static one loses anything;
    holds-with-correction when it gains nothing at some of them; refuted when it gains at none.  (The order
    dynamic <= static <= uniform is exact: any static split is a coupled schedule.)  The same on the top-32 stored
    entries is the truncated reading, reported beside it."""
    verdict, finding, same = _gap_reading(v)
    t_verdict, t_finding, _ = _gap_reading(v["truncated"])
    summary = f"On complete rows, {finding}.  Truncated reading: {t_finding}."
    correction = None
    if verdict == "holds-with-correction":
        correction = f"At B = {same} the dynamic coupled optimum gains nothing over the best static split."
    return Decision(verdict, summary, correction, readings={
        OWN: {"verdict": verdict, "finding": finding}, TRUNCATED: {"verdict": t_verdict, "finding": t_finding}})
