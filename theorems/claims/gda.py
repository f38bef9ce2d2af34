"""Claims about Theorem 3 and Greedy-Dual-Attention (paper Section 6): the k-competitive bound and the readings that
fail, GD-A's trace on decoy-and-sleeper, the unification of LRU / sinks-plus-window / H2O, its cost per step.
Tables: :mod:`theorems.results.gda`.  Every verdict is derived from the values computed in this run (rules:
``VERDICTS.md``)."""

from __future__ import annotations

import numpy as np

import adversary
import policies
from kvcore.engine import run
from kvcore.traces import AttentionTrace, rm_requests_from_attention
from policies.gda import UNIFICATION
from theorems.results import gda as RG
from theorems.tables import cached

from .registry import Computed, Context, Decision, claim, decides, edit, fmt


# ---------------------------------------------------------------------------------------------------------------------
# Theorem 3 and GD-A
# ---------------------------------------------------------------------------------------------------------------------


@claim("thm3-gda", "§6", "Greedy-Dual-Attention is k-competitive in the recompute model (k/(k-h+1) against an "
       "optimum with cache h), whatever the tie-break.",
       sizes={"seeds": (3, 10), "T": (150, 400), "search_depths": (((2, 6), (3, 5)), ((2, 7), (3, 6)))})
def thm3(ctx: Context) -> Computed:
    table = cached(RG.thm3_attention_table, seeds=ctx.sizes["seeds"], T=ctx.sizes["T"])
    search = cached(RG.thm3_paper_model_search, depths=ctx.sizes["search_depths"])
    control = cached(RG.thm3_paper_model_search, depths=((2, 4),), families=("spec",), free_arrivals=True)
    free, charged, literal, varying = cached(RG.thm3_counterexamples).rows
    evidence = {"test": "theorems/test_thm3_gda.py", "figure": ctx.figure_files("10")}
    if free.holds:
        evidence["toolkit_model_free_arrivals"] = ctx.save_counterexample(
            "thm3_free_arrivals_decoy_stream", adversary.decoy_and_sleeper_rm(free.k, free.params["priming"],
                                                                              free.params["suffix"],
                                                                              free.params["rounds"]))
    if literal.holds:
        evidence["toolkit_model_refresh_below_request_threshold"] = ctx.save_counterexample(
            "thm3_literal_refresh_requests", adversary.unrequested_refresh_counterexample(40)[0])
    if varying.holds:
        evidence["toolkit_model_per_request_costs"] = ctx.save_counterexample(
            "thm3_per_request_costs", adversary.varying_cost_counterexample())
    worst = max(table.rows, key=lambda r: r.ratio / r.bound)
    case = lambda r: {"gda": r.alg_cost, "opt": r.opt_cost, "k": r.k, "h": r.h, "bound": r.bound,  # noqa: E731
                      "reproduced": r.holds}
    searched = lambda t: [{"policy": r.policy, "k": r.k, "h": r.h, "weights": r.params["weights"],  # noqa: E731
                           "depth": r.params["depth"], "sequences": r.params["sequences"],
                           "violations": r.params["violations"],
                           "largest_ratio_over_bound": r.params["worst_ratio_over_bound"]} for r in t.rows]
    return Computed(
        {"paper_model_search": searched(search),
         "paper_model_policy_run": "GD-A with rm_attention_refresh=True, threshold=0.1 (the paper's refresh on "
                                   "attention above the request threshold), the registered default GD-A, Landlord "
                                   "under every tie-break, and the worst lazy policy",
         "positive_control_free_arrivals": {"violations": sum(r.params["violations"] for r in control.rows),
                                            "sequences": control.rows[0].params["sequences"]},
         "corrected_setting": {"runs": len(table.rows), "failures": len(table.failures()),
                               "largest_ratio_over_bound": worst.ratio / worst.bound},
         "free_arrivals": case(free), "charged_arrivals": case(charged),
         "literal_refresh": dict(case(literal), default_gda=literal.params["default_gda_cost"]),
         "per_request_costs": case(varying)},
        {"ratio": "k/(k-h+1), k for h = k, for any tie-break"}, evidence)


# The toolkit-model counterexamples (SPEC's RM, not the paper's), as ``thm3`` names them in its values, with the
# premise of the paper's model each one leaves.
THM3_TOOLKIT_CASES = {"free_arrivals": "arrivals cost 0 (the paper's RM is weighted caching: every fault, the "
                                       "arrival's included, pays its weight)",
                      "literal_refresh": "an item is refreshed by attention below the request threshold while the "
                                         "requests are not the attended items",
                      "per_request_costs": "an item's fault cost changes between its requests (the paper's "
                                           "weight is fixed per token)"}


def _k_h(case: dict) -> str:
    return f"k = h = {case['k']}" if case["k"] == case["h"] else f"k = {case['k']}, h = {case['h']}"


@decides("thm3-gda", flips={
    "a sequence of the paper's model above the bound": (lambda v: edit(v, "paper_model_search/0/violations", 1),
                                                        "refuted"),
    "a seeded run of the paper's model above the bound": (lambda v: edit(v, "corrected_setting/failures", 1),
                                                          "refuted"),
    "the search finds nothing even with free arrivals": (
        lambda v: edit(v, "positive_control_free_arrivals/violations", 0), "not-checkable")})
def thm3_decide(v: dict, e: dict) -> Decision:
    """Two readings.  (Paper's model) Sections 3, 4 and 6: RM requests are the tokens attended above the threshold,
    every fault pays the token's fixed weight growing with position (the arrival's included: "exactly an instance
    of weighted caching"), a credit is refreshed when its token is attended above that same threshold.  Decided by
    the exhaustive search (every sequence to the searched depth, every h <= k, the paper's and the default GD-A, and
    Landlord under every tie-break) and the seeded attention-built runs: holds when no sequence or run exceeds
    k/(k-h+1); refuted by one that does; not-checkable when the search's positive control (the same search with
    free arrivals) finds no violation, since then the search could not have shown one.  (Toolkit's model) SPEC's
    RM and the toolkit's own inputs, which leave the paper's model: refuted by each reproduced counterexample --
    evidence about a different model, never a correction of the paper.  The claim's verdict is the paper's-model
    one."""
    search, c, ctl = v["paper_model_search"], v["corrected_setting"], v["positive_control_free_arrivals"]
    over = [r for r in search if r["violations"]]
    paper_ok = not over and c["failures"] == 0 and v["charged_arrivals"]["reproduced"]
    verdict = ("holds" if paper_ok else "refuted") if ctl["violations"] else "not-checkable"
    gda = [r for r in search if r["policy"].startswith("GD-A") or r["policy"].startswith("Landlord")]
    # h = 1 is trivial (only arrivals can be requested, both pay them): the tightest case is among h >= 2
    tight = max((r for r in gda if r["h"] > 1), key=lambda r: r["largest_ratio_over_bound"])
    lazy_kk = [r for r in search if r["policy"] == "worst lazy policy" and r["h"] == r["k"]]
    sequences = sum(r["sequences"] for r in search if r["policy"] == "GD-A" and r["h"] == 1)
    broken = {n: v[n] for n in THM3_TOOLKIT_CASES if v[n]["reproduced"]}
    readings = {
        "paper's model (attended = requested, fixed weights growing with position, charged arrivals)": {
            "verdict": verdict,
            "finding": f"{sequences} request sequences searched exhaustively (k = "
                       f"{sorted({r['k'] for r in search})}, every h <= k, weights "
                       f"{sorted({r['weights'] for r in search})}): {sum(r['violations'] for r in over)} above the "
                       f"bound; {c['runs']} seeded attention-built runs: {c['failures']} above it"},
        "toolkit's SPEC RM (a different model)": {
            "verdict": "refuted" if broken else "holds",
            "finding": "; ".join(f"{n} ({THM3_TOOLKIT_CASES[n]}): GD-A {fmt(x['gda'])} vs OPT {fmt(x['opt'])}, "
                                 f"{_k_h(x)}" for n, x in broken.items()) or "no counterexample reproduced"}}
    summary = (f"In the paper's recompute model no request sequence of the exhaustive search ({sequences} "
               f"(k, weights, sequence) cases, (k, depth) = {sorted({(r['k'], r['depth']) for r in search})}, "
               f"every h <= k) and "
               f"none of {c['runs']} seeded attention-built runs exceeds k/(k-h+1): "
               f"{sum(r['violations'] for r in search)} violations, largest ratio/bound at h >= 2 "
               f"{fmt(tight['largest_ratio_over_bound'], 3)} ({tight['policy']}, k = {tight['k']}, h = {tight['h']}); "
               f"for h = k even the worst lazy policy stays within k (largest ratio/bound "
               f"{fmt(max(r['largest_ratio_over_bound'] for r in lazy_kk), 3)}).  The same search with free "
               f"arrivals finds {ctl['violations']} violations (positive control).  The toolkit's SPEC RM is a "
               f"different model: there {len(broken)} of {len(THM3_TOOLKIT_CASES)} counterexamples break GD-A "
               f"(readings), none of them inside the paper's model.")
    return Decision(verdict, summary, readings=readings)


@claim("gda-trace", "§6", "On the decoy-and-sleeper input GD-A converges to keeping the sleeper, as the optimum does.",
       sizes={"ks": ((3, 4, 6), (3, 4, 6, 8)), "suffixes": ((40, 80), (100, 200))})
def gda_trace(ctx: Context) -> Computed:
    table = cached(RG.gda_trace_table, ks=ctx.sizes["ks"], suffixes=ctx.sizes["suffixes"])
    evidence = {"test": "theorems/test_thm3_gda.py::test_gda_trace_on_decoy_and_sleeper"}
    if not all(r.params["converges"] for r in table.rows if r.model == "nm"):
        evidence["nm_counterexample"] = ctx.save_counterexample("gda_trace_nm_decoy_sleeper",
                                                                adversary.decoy_and_sleeper(3, 0.05, 80))
    return Computed({"runs": [{"model": r.model, "workload": r.workload, "k": r.k, "converges": r.params["converges"],
                               "regrets" if r.model == "nm" else "paid": r.params["regrets" if r.model == "nm"
                                                                                  else "paid"],
                               "suffixes": r.params["suffixes"]} for r in table.rows]},
                    {"gda": "converges to keeping the sleeper"}, evidence)


@decides("gda-trace", flips={
    "GD-A keeps the sleeper in NM": (lambda v: edit(v, "runs", lambda rs: [dict(r, converges=True) for r in rs]),
                                     "holds")})
def gda_trace_decide(v: dict, e: dict) -> Decision:
    """Universal over the input the paper traces (Section 5's NM decoy-and-sleeper, both token orders): refuted when
    GD-A's NM regret still grows between the two suffix lengths on any run; holds when it is bounded everywhere.
    The RM single-pair and stream runs are reported beside it (where an evicted sleeper can come back)."""
    nm = [r for r in v["runs"] if r["model"] == "nm"]
    single = [r for r in v["runs"] if "single" in r["workload"]]
    stream = [r for r in v["runs"] if "stream" in r["workload"]]
    nm_ok = all(r["converges"] for r in nm)
    first = nm[0]
    return Decision(
        "holds" if nm_ok else "refuted",
        f"NM (the Section 5 input): GD-A converges on {sum(r['converges'] for r in nm)} of {len(nm)} runs (k = "
        f"{first['k']}: regret {[fmt(x) for x in first['regrets']]} at suffixes {first['suffixes']}).  RM with one "
        f"sleeper pair: converges on {sum(r['converges'] for r in single)} of {len(single)}; with a stream of "
        f"sleepers on {sum(r['converges'] for r in stream)} of {len(stream)}.",
        correction=None if nm_ok else
        "It converges only where an evicted sleeper can be recomputed and is attended repeatedly (RM, one sleeper "
        f"pair: {sum(r['converges'] for r in single)} of {len(single)}).  In NM the crunch comes one step after "
        "priming, while every decoy was attended in the last row: all unit credits are equal, the attention "
        "tie-break removes the least recently attended token -- the sleeper -- and the drop is final.")


@claim("gda-unification", "§6, Fig 12", "GD-A at three settings is LRU, StreamingLLM's sink-plus-window, and a "
       "decayed H2O heavy-hitter rule.",
       sizes={"traces": (4, 16)})
def gda_unification(ctx: Context) -> Computed:
    rng = np.random.default_rng(5)
    checked, compared = {}, {}
    for rec in UNIFICATION:
        same, n = True, 0
        for _ in range(ctx.sizes["traces"]):
            rows = []
            for t in range(60):
                m = min(t + 1, int(rng.integers(1, 5)))
                toks = rng.choice(t + 1, size=m, replace=False)
                w = rng.integers(1, 10, size=m).astype(float)
                rows.append(dict(zip(toks.tolist(), (w / w.sum()).tolist())))
            tr = AttentionTrace.from_rows(rows)
            k = 5
            if rec["model"] == "rm":
                k = max(k, int(np.diff(rm_requests_from_attention(tr, 0.3).offsets).max()))
            a = run(policies.make("GD-A", **rec["gda_params"]), tr, k, model=rec["model"], theta=0.3, record=True)
            b = run(policies.make(rec["equivalent"], **rec["equivalent_params"]), tr, k, model=rec["model"],
                    theta=0.3, record=True)
            same &= a.evictions == b.evictions
            n += len(a.evictions)
        checked[rec["label"]], compared[rec["label"]] = same, n
    # Eq. 11 with a positive weight is not a decayed accumulation: the hand-worked 4-row trace of
    # tests/test_gda_unification.py (k = 2): unit-weight GD-A drops token 0 at step 3, DecayedACC the arrival
    rows = AttentionTrace.from_rows([{0: 1.0}, {0: 0.5, 1: 0.5}, {0: 0.005, 1: 0.995}, {3: 1.0}])
    positive = run(policies.make("GD-A", weight="unit", tiebreak="attention", gamma=0.9, threshold=0.01), rows, 2,
                   model="nm", record=True).evictions
    decayed_acc = run(policies.make("DecayedACC", gamma=0.9, protect_arrival=False), rows, 2, model="nm",
                      record=True).evictions
    return Computed(
        {"equivalent_on_seeded_traces": checked, "evictions_compared": compared, "third_row_weight": UNIFICATION[2]["gda_params"].get("weight"),
         "unit_weight_decayed_row": {"gda_evictions": positive, "decayed_acc_evictions": decayed_acc,
                                     "equal": positive == decayed_acc},
         "settings": [{"label": r["label"], "gda_params": {k: str(x) for k, x in r["gda_params"].items()},
                       "equivalent": r["equivalent"], "model": r["model"]} for r in UNIFICATION]},
        {"settings": ["LRU", "StreamingLLM sink + window", "decayed H2O"], "proof": "one proof (Theorem 3) covers all"},
        {"test": "tests/test_gda_unification.py", "figure": ctx.figure_files("12")})


@decides("gda-unification", flips={
    "a setting differs from its system": (lambda v: edit(v, "equivalent_on_seeded_traces", lambda c: {
        k: (False if i == 0 else x) for i, (k, x) in enumerate(c.items())}), "refuted"),
    "unit weights already give the decayed row": (lambda v: edit(v, "unit_weight_decayed_row/equal", True), "holds"),
    "a setting evicted nothing": (lambda v: edit(v, "evictions_compared", lambda c: {**c, next(iter(c)): 0}),
                                  "not-checkable")})
def gda_unification_decide(v: dict, e: dict) -> Decision:
    """Universal per row ("GD-A at this setting *is* that system"): refuted when any registered setting makes
    different evictions from its system on a seeded trace.  Holds when all three match with a positive weight;
    holds-with-correction when the decayed-H2O row needs weight 0 -- credits inert, so Theorem 3 says nothing about
    it -- because with unit weights (the reading the paper's Eq. 11 gives) GD-A and DecayedACC evict differently."""
    checked, compared = v["equivalent_on_seeded_traces"], v["evictions_compared"]
    ok = all(checked.values())
    needs_zero = not v["unit_weight_decayed_row"]["equal"]
    verdict = ("holds-with-correction" if needs_zero else "holds") if ok else "refuted"
    if ok and not all(compared.values()):  # equal because nothing was evicted: no evidence either way
        verdict = "not-checkable"
    u = v["unit_weight_decayed_row"]
    return Decision(
        verdict,
        "Eviction-for-eviction equal on seeded traces: "
        + ", ".join(f"{k}: {x} ({compared[k]} evictions compared)" for k, x in checked.items())
        + f".  With unit weights on the 4-row trace GD-A evicts {u['gda_evictions']} and DecayedACC "
          f"{u['decayed_acc_evictions']}."
        + "".join(f"  Evidence missing for {k}: no eviction was compared." for k, n in compared.items() if not n),
        correction=None if verdict != "holds-with-correction" else
        f"The decayed-H2O row holds only with weight = {v['third_row_weight']} (credits inert, the tie-break decides), "
        "where Theorem 3's bound says nothing; with a positive weight Eq. 11 is not a decayed accumulation.")


@claim("gda-cost", "§6", "GD-A costs O(log k) per eviction and O(1) per lazy rent step, like H2O's heap.",
       sizes={"ks": ((16, 128, 1024), (16, 128, 1024, 4096)), "T": (3000, 12000)})
def gda_cost(ctx: Context) -> Computed:
    table = cached(RG.gda_cost_table, **ctx.sizes)
    return Computed({"per_k": [{"k": r.k, "heap_pops_per_eviction": r.alg_cost, "count_bounds_hold": r.holds,
                                **{x: r.params[x] for x in ("evictions", "rent", "heap_pops", "updates", "admissions")}}
                               for r in table.rows]},
                    {"per_eviction": "O(log k)", "rent": "O(1)"},
                    {"test": "theorems/test_thm3_gda.py::test_gda_operation_counts_flat_in_k, "
                             "tests/test_gda_unification.py"})


@decides("gda-cost", flips={
    "pops per eviction grow with k": (lambda v: edit(v, "per_k", lambda rs: rs[:-1] + [
        dict(rs[-1], heap_pops_per_eviction=rs[-1]["k"])]), "refuted")})
def gda_cost_decide(v: dict, e: dict) -> Decision:
    """Holds when the operation counts respect their per-eviction bounds (rent <= evictions; pops <= 2 evictions +
    updates + admissions) and heap pops per eviction at the largest k stay within 2x + 1 of the smallest k's (a scan
    of the cache would grow like k); refuted otherwise."""
    rows = sorted(v["per_k"], key=lambda r: r["k"])
    lo, hi = rows[0], rows[-1]
    flat = hi["heap_pops_per_eviction"] <= 2.0 * lo["heap_pops_per_eviction"] + 1.0
    ok = flat and all(r["count_bounds_hold"] for r in rows)
    return Decision("holds" if ok else "refuted",
                    "Heap pops per eviction " + ", ".join(f"k={r['k']}: {fmt(r['heap_pops_per_eviction'], 3)}"
                                                          for r in rows)
                    + f" ({'flat' if flat else 'growing'} in k; a scan would grow {hi['k'] // lo['k']}x); at most one "
                      f"O(1) rent update per eviction: {all(r['rent'] <= r['evictions'] for r in rows)}.")
