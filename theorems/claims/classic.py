"""Claims about the classical bounds transferred by the paper (Sections 2.2 and 4): Eq. 6, 8, 9, LRU's phase argument,
LFU, and Balance/Landlord at equal weights.  Tables: :mod:`theorems.results.classic`."""

from __future__ import annotations

import numpy as np

import policies
from adversary import marking_phases
from kvcore.engine import run
from kvcore.exact_expectation import NotEnumerable, expected_cost
from kvcore.formulas import harmonic, landlord_bound
from kvcore.traces import PagingTrace
from theorems.results.classic import (cyclic_table, deterministic_rm_policies, eq6_table, eq8_table, lfu_table,
                                      lru_phase_table, marking_table, uniform_limit_table, upper_bound_policies)
from theorems.results.randomized import eq9_exact_table
from theorems.tables import cached

from .registry import Computed, Context, Decision, claim, decides, edit, fmt


@claim("eq6-det-lower-bound", "§4(a)", "No deterministic eviction policy can guarantee a ratio below k: an adversary "
       "over k+1 tokens that always requests the missing one forces a fault on every step.",
       sizes={"ks": ((2, 4, 8, 16), (2, 4, 8, 16, 32, 64)), "T_per_k2": (20, 20)})
def eq6(ctx: Context) -> Computed:
    table = cached(eq6_table, ks=ctx.sizes["ks"], T_per_k2=ctx.sizes["T_per_k2"])
    return Computed(
        {"policies": deterministic_rm_policies(), "T_per_k2": ctx.sizes["T_per_k2"],
         "runs": [{"policy": r.policy, "k": r.k, "T": r.params["T"], "faults": r.alg_cost, "opt": r.opt_cost,
                   "ratio": r.ratio, "lower_bound": r.bound, "every_request_faults": r.alg_cost == r.params["T"]}
                  for r in table.rows]},
        {"ratio_at_least": "k(1 - eps), eps -> 0 as T grows: every request faults"},
        {"test": "theorems/test_eq6_det_lower_bound.py", "figure": ctx.figure_files("8")})


@decides("eq6-det-lower-bound", flips={
    "a policy escapes a fault": (lambda v: edit(v, "runs/0/every_request_faults", False), "refuted")})
def eq6_decide(v: dict, e: dict) -> Decision:
    """Universal over deterministic policies: refuted when any run does not fault on every adaptive request or its
    ratio falls below the derived lower bound ``T / (T/k + k) = k(1 - eps)``; holds otherwise."""
    bad = [r for r in v["runs"] if not (r["every_request_faults"] and r["ratio"] >= r["lower_bound"] * (1 - 1e-12))]
    eps = max(1 - r["lower_bound"] / r["k"] for r in v["runs"])
    ks = sorted({r["k"] for r in v["runs"]})
    if bad:
        return Decision("refuted", f"{len(bad)} of {len(v['runs'])} runs escape: " + ", ".join(
            f"{r['policy']} k={r['k']} ratio {fmt(r['ratio'])} < {fmt(r['lower_bound'])}" for r in bad[:5]) + ".")
    return Decision("holds", f"All {len(v['policies'])} deterministic RM policies fault on every one of the "
                             f"T = {v['T_per_k2']}k^2 adaptive requests and reach ratio >= k(1 - {eps:.3f}) against "
                             f"Belady for k in {ks}.")


@claim("eq8-landlord", "§4(b)", "Landlord with cache k is k/(k-h+1)-competitive against an optimum with cache h; "
       "with h = k/2 the ratio is about 2.",
       sizes={"ks": ((2, 3, 4, 8), (2, 4, 8, 16)), "T": (400, 3000), "seeds": (2, 4), "T_cycles": (200, 1000)})
def eq8(ctx: Context) -> Computed:
    ks = ctx.sizes["ks"]
    table = cached(eq8_table, ks=ks, T=ctx.sizes["T"], seeds=ctx.sizes["seeds"])
    cyc = cached(cyclic_table, ks=ks, T_cycles=ctx.sizes["T_cycles"])
    worst = max(table.rows, key=lambda r: r.ratio / r.bound)
    return Computed(
        {"policies": upper_bound_policies(), "runs": len(table.rows),
         "violations": [{"policy": r.policy, "workload": r.workload, "k": r.k, "h": r.h, "ratio": r.ratio,
                         "bound": r.bound} for r in table.failures()],
         "largest_ratio_over_bound": {"value": worst.ratio / worst.bound, "policy": worst.policy, "k": worst.k,
                                      "h": worst.h, "workload": worst.workload},
         "cyclic_lru": [{"k": r.k, "h": r.h, "ratio": r.ratio, "bound": r.bound, "holds": r.holds}
                        for r in cyc.rows if r.policy == "LRU"],
         "cyclic_failures": len(cyc.failures()), "bound_k2000_h1000": landlord_bound(2000, 1000)},
        {"bound": "k/(k-h+1)", "at_h_equal_k_over_2": 2},
        {"test": "theorems/test_eq8_landlord.py", "figure": ctx.figure_files("7")})


@decides("eq8-landlord", flips={
    "one run above the bound": (lambda v: edit(v, "violations", [{"policy": "Landlord", "workload": "x", "k": 2,
                                                                  "h": 2, "ratio": 3.0, "bound": 2.0}]), "refuted"),
    "the h = k/2 ratio far from 2": (lambda v: edit(v, "bound_k2000_h1000", 3.0), "refuted")})
def eq8_decide(v: dict, e: dict) -> Decision:
    """Universal: refuted by any run of a policy declaring ``k/(k-h+1)`` above it, or by the cyclic sequence failing
    to approach it (the bound would then not be the right constant), or by k/(k-h+1) at k = 2000, h = 1000 not
    rounding to the stated 2; holds otherwise."""
    half = v["bound_k2000_h1000"]
    ok = not v["violations"] and not v["cyclic_failures"] and round(half) == e["at_h_equal_k_over_2"]
    w = v["largest_ratio_over_bound"]
    summary = (f"No run of {', '.join(v['policies'])} exceeded k/(k-h+1): the largest ratio/bound was "
               f"{fmt(w['value'], 3)} ({w['policy']}, k={w['k']}, h={w['h']}, {w['workload']}) over {v['runs']} runs; "
               if not v["violations"] else
               f"{len(v['violations'])} runs exceed k/(k-h+1), e.g. " + ", ".join(
                   f"{x['policy']} k={x['k']} h={x['h']} ratio {fmt(x['ratio'])} > {fmt(x['bound'])}"
                   for x in v["violations"][:3]) + "; ")
    summary += (f"LRU on the cyclic sequence reaches within O(1/T) of it ({len(v['cyclic_lru'])} (k, h) pairs, "
                f"{v['cyclic_failures']} failures); k = 2000, h = 1000 gives {half:.4f}.")
    return Decision("holds" if ok else "refuted", summary)


@claim("eq9-randomized", "§4(c)", "Marking is 2H_k-competitive and H_k is the optimal randomized ratio; for "
       "k = 200 that is 200 (deterministic) against about 6, and for k = 2000 H_k is about 8.1.",
       sizes={"ks": ((2, 4, 8), (2, 4, 8, 16)), "phases": (40, 200), "marking_seeds": (16, 64),
              "uniform_T": (8000, 40000), "uniform_seeds": (6, 16)})
def eq9(ctx: Context) -> Computed:
    ks = ctx.sizes["ks"]
    mark = cached(marking_table, ks=ks, phases=ctx.sizes["phases"], seeds=ctx.sizes["marking_seeds"])
    uni = cached(uniform_limit_table, ks=ks, T=ctx.sizes["uniform_T"], seeds=ctx.sizes["uniform_seeds"])
    small = tuple(k for k in ks if k <= EQ9_EXACT_MAX_K)
    exact = cached(eq9_exact_table, ks=small, phases=ctx.sizes["phases"])
    sampled = {(r.workload, r.k): r for r in mark.rows if r.policy == "Marking"}
    try:
        expected_cost(policies.make("OnlineMin"), marking_phases(2, 3, 1, n_items=3), 2)
        online_min_exact = "enumerable"
    except NotEnumerable as why:
        online_min_exact = f"not enumerable ({why}); sampled"
    return Computed(
        {"H_200": harmonic(200), "H_2000": harmonic(2000),
         "exact_marking": [{"workload": r.workload, "k": r.k, "expected_cost": r.params["exact"], "opt": r.opt_cost,
                            "exact_ratio": r.ratio, "within_2H_k_minus_1": r.holds,
                            "within_2H_k": r.params["within_2H_k"], "within_H_k": r.params["within_H_k"],
                            "sampled_ratio_ci": [sampled[r.workload, r.k].ci_low / r.opt_cost,
                                                 sampled[r.workload, r.k].ci_high / r.opt_cost]}
                           for r in exact.rows],
         "online_min_exact": online_min_exact,
         "randomized": [{"policy": r.policy, "guarantee": policies.get(r.policy).guarantee, "workload": r.workload,
                         "k": r.k, "seeds": r.seeds, "mean_ratio": r.ratio, "ratio_ci": [r.ci_low / r.opt_cost,
                                                                                         r.ci_high / r.opt_cost],
                         "bound": r.bound, "within_bound": r.holds} for r in mark.rows],
         "yao_uniform_k_plus_one": [{"policy": r.policy, "k": r.k, "mean_ratio": r.ratio,
                                     "ratio_ci": [r.ci_low, r.ci_high], "H_k": r.bound, "consistent_with_H_k": r.holds}
                                    for r in uni.rows if r.policy != "FWF"],
         "fwf_uniform_k_plus_one": [{"k": r.k, "ratio": r.ratio, "exact_prediction": r.bound,
                                     "counts_exact": r.holds} for r in uni.rows if r.policy == "FWF"]},
        {"marking_bound": "2H_k", "optimal_randomized": "H_k", "k200": {"deterministic": 200, "randomized": 6},
         "H_2000": 8.1},
        {"test": "theorems/test_eq9_randomized.py, tests/test_hk_policy.py, tests/test_exact_expectation.py",
         "figure": ctx.figure_files("8")})


# Up to this k the eq9 workloads are small enough for exact expectations (kvcore.exact_expectation)
EQ9_EXACT_MAX_K = 4


@decides("eq9-randomized", flips={
    "Marking's interval above 2H_k": (lambda v: edit(v, "randomized", lambda rs: [
        dict(r, ratio_ci=[3 * harmonic(r["k"]), 4 * harmonic(r["k"])]) if r["policy"] == "Marking" else r
        for r in rs]), "refuted"),
    "an exact expectation above 2H_k": (lambda v: edit(v, "exact_marking/0/within_2H_k", False), "refuted"),
    "H_2000 stated right": (lambda v: edit(v, "H_2000", 8.1), "holds")})
def eq9_decide(v: dict, e: dict) -> Decision:
    """Parts: (1) Marking within the paper's 2H_k -- decided from the exact expectation where it was computed (small
    k: refuted when an exact E[ALG] exceeds 2H_k OPT) and otherwise from sampling (refuted when the lower end of a
    Marking ratio interval exceeds 2H_k); (2) H_k is the optimal randomized ratio -- from below, every lazy policy's ratio on
    uniform k+1 is consistent with H_k (Yao); from above, every policy declaring the bound H_k stays within it
    (refuted when a lower-bound row is inconsistent; an H_k policy above H_k is our implementation's fault and makes
    the part not checkable); (3) the numbers: H_200 about 6 and H_2000 about 8.1 at the precision stated (one
    decimal for 8.1).  A wrong stated number with (1) and (2) holding is holds-with-correction."""
    marking = [r for r in v["randomized"] if r["policy"] == "Marking"]
    exact = v["exact_marking"]
    exact_ks = {r["k"] for r in exact}
    over_2hk = [r for r in marking if r["k"] not in exact_ks and r["ratio_ci"][0] > 2 * harmonic(r["k"]) + 1e-9]
    over_2hk += [r for r in exact if not r["within_2H_k"]]
    lower = [r for r in v["yao_uniform_k_plus_one"] if not r["consistent_with_H_k"]]
    hk_rows = [r for r in v["randomized"] if r["guarantee"] == "H_k"]
    hk_fail = [r for r in hk_rows if not r["within_bound"]]
    h2000 = round(v["H_2000"], 1)
    numbers_ok = h2000 == e["H_2000"] and round(v["H_200"]) == e["k200"]["randomized"]
    if over_2hk or lower:
        verdict = "refuted"
    elif not hk_rows or hk_fail:
        verdict = "not-checkable"
    else:
        verdict = "holds" if numbers_ok else "holds-with-correction"
    worst_marking = max(marking, key=lambda r: r["mean_ratio"] - (2 * harmonic(r["k"]) - 1))
    hk_names = sorted({r["policy"] for r in hk_rows})
    worst_hk = max(hk_rows, key=lambda r: r["mean_ratio"] / r["bound"], default=None)
    summary = (f"Marking's largest mean ratio {fmt(worst_marking['mean_ratio'])} ({worst_marking['workload']}, "
               f"k={worst_marking['k']}) against 2H_k - 1 = {fmt(2 * harmonic(worst_marking['k']) - 1)}; "
               f"{len(over_2hk)} Marking results above 2H_k.  Exact at k = {sorted(exact_ks)}: "
               + "; ".join(f"k={r['k']} {r['workload']}: {fmt(r['exact_ratio'])} (sampled interval "
                           f"[{fmt(r['sampled_ratio_ci'][0])}, "
                           f"{fmt(r['sampled_ratio_ci'][1])}])" for r in exact if r["exact_ratio"] > 1)
               + f", all {sum(r['within_2H_k_minus_1'] for r in exact)} of {len(exact)} within 2H_k - 1.  "
               f"Lower bound: all "
               f"{len(v['yao_uniform_k_plus_one'])} lazy-policy rows on uniform k+1 consistent with H_k "
               f"({len(lower)} inconsistent).  Upper bound: ")
    summary += (f"{', '.join(hk_names)} stayed within H_k on all {len(hk_rows)} runs (largest mean ratio/H_k "
                f"{fmt(worst_hk['mean_ratio'] / worst_hk['bound'], 3)})" if worst_hk and not hk_fail else
                f"{len(hk_fail)} of {len(hk_rows)} runs of an H_k-declaring policy above H_k" if hk_rows else
                "no registered policy declares H_k")
    summary += (f" (OnlineMin: {v['online_min_exact']}).  H_200 = {v['H_200']:.4f}, "
                f"H_2000 = {v['H_2000']:.4f}.")
    return Decision(verdict, summary, correction=None if numbers_ok or verdict != "holds-with-correction" else
                    f"H_2000 = {v['H_2000']:.4f} rounds to {h2000}, not {e['H_2000']}; Marking's tight bound is "
                    "2H_k - 1 (Achlioptas, Chrobak & Noga 2000), so 2H_k is valid but loose.")


@claim("lru-phase-argument", "§2.2", "LRU faults at most k times per phase (a maximal run with k distinct pages) and "
       "the optimum faults at least once per phase boundary.",
       sizes={"ks": ((2, 4, 8), (2, 4, 8, 16, 32)), "T": (2000, 20000), "seeds": (3, 8)})
def lru_phase(ctx: Context) -> Computed:
    table = cached(lru_phase_table, **ctx.sizes)
    return Computed(
        {"runs": [{"workload": r.workload, "k": r.k, "most_faults_in_a_phase": r.alg_cost,
                   "phases": r.params["phases"], "opt_faults": r.opt_cost, "holds": r.holds} for r in table.rows]},
        {"lru_faults_per_phase_at_most": "k", "opt_faults_per_boundary_at_least": 1},
        {"test": "theorems/test_lru_phase_argument.py"})


@decides("lru-phase-argument", flips={
    "a phase with k+1 faults": (lambda v: edit(v, "runs/0", lambda r: dict(r, most_faults_in_a_phase=r["k"] + 1)),
                                "refuted")})
def lru_phase_decide(v: dict, e: dict) -> Decision:
    """Universal: refuted when some phase has more than k LRU faults or OPT pays fewer than (phases - 1) faults."""
    bad = [r for r in v["runs"] if r["most_faults_in_a_phase"] > r["k"] or r["opt_faults"] < r["phases"] - 1]
    return Decision("refuted" if bad else "holds",
                    f"On {len(v['runs'])} seeded sequences LRU's largest per-phase fault count "
                    + ("never exceeded k and OPT paid at least one fault per phase boundary."
                       if not bad else f"or OPT's count broke the argument in {len(bad)} runs."))


@claim("lfu-unbounded", "§2.2", "LFU's competitive ratio is unbounded.",
       sizes={"ks": ((2, 4, 8), (2, 4, 8)), "ms": ((2, 8, 32, 128), (2, 8, 32, 128, 512))})
def lfu(ctx: Context) -> Computed:
    table = cached(lfu_table, **ctx.sizes)
    return Computed({"runs": [{"k": r.k, "m": r.params["m"], "lfu": r.alg_cost, "opt": r.opt_cost, "ratio": r.ratio,
                               "exact_as_derived": r.holds} for r in table.rows]},
                    {"ratio": "unbounded"}, {"test": "theorems/test_lfu_unbounded.py"})


@decides("lfu-unbounded", flips={
    "the ratio stops growing with m": (lambda v: edit(v, "runs", lambda rs: [dict(r, ratio=1.0) for r in rs]),
                                       "refuted")})
def lfu_decide(v: dict, e: dict) -> Decision:
    """Holds when, for every k, the ratio grows with m at least linearly -- the last m's ratio exceeds the first's
    by at least (m_last - m_first) / (k + 1), as (k-1)+2(m-1) over k+1 does -- so no constant bounds it; refuted
    when the ratio stops growing for some k."""
    by_k: dict[int, list] = {}
    for r in v["runs"]:
        by_k.setdefault(r["k"], []).append(r)
    grows = all(rs[-1]["ratio"] - rs[0]["ratio"] >= (rs[-1]["m"] - rs[0]["m"]) / (k + 1) - 1e-9
                for k, rs in by_k.items())
    top = max(v["runs"], key=lambda r: r["ratio"])
    exact = sum(r["exact_as_derived"] for r in v["runs"])
    return Decision("holds" if grows else "refuted",
                    f"On the priming sequence LFU's ratio reaches {fmt(top['ratio'], 3)} at k={top['k']}, m={top['m']} "
                    f"and {'grows' if grows else 'does not grow'} linearly in m; {exact} of {len(v['runs'])} runs pay "
                    "exactly (k-1)+2(m-1) against OPT's k+1.")


@claim("balance-uniform-lru", "§4", "Balance and Landlord both reduce to LRU when all weights are equal.",
       sizes={"sequences": (40, 200)})
def balance_uniform(ctx: Context) -> Computed:
    names = ("LRU", "FIFO", "Balance", "Landlord")
    same = {"Balance": {"LRU": 0, "FIFO": 0}, "Landlord": {"LRU": 0, "FIFO": 0}}
    n = ctx.sizes["sequences"]
    evidence = {"test": "tests/test_classic_policies.py::test_unit_cost_balance_is_fifo"}
    for s in range(n):
        rng = np.random.default_rng(s)
        k = int(rng.integers(2, 6))
        trace = PagingTrace.unit(rng.integers(0, k + 3, size=60))
        ev = {name: run(policies.make(name), trace, k, "rm", record=True).evictions for name in names}
        for pol in same:
            for ref in ("LRU", "FIFO"):
                same[pol][ref] += ev[pol] == ev[ref]
        if "counterexample" not in evidence and ev["Balance"] != ev["LRU"]:
            evidence["counterexample"] = ctx.save_counterexample("balance_vs_lru_unit_cost", trace)
    return Computed({"sequences": n, "identical_evictions": same},
                    {"Balance_uniform_weights": "LRU", "Landlord_uniform_weights": "LRU"}, evidence)


@decides("balance-uniform-lru", flips={
    "Balance equal to LRU everywhere": (lambda v: edit(v, "identical_evictions/Balance/LRU", v["sequences"]),
                                        "holds")})
def balance_uniform_decide(v: dict, e: dict) -> Decision:
    """Universal ("reduces to LRU"): refuted by one unit-cost sequence on which either policy evicts differently
    from LRU (the trace is saved); holds when both match LRU on every sequence."""
    same, n = v["identical_evictions"], v["sequences"]
    ok = same["Balance"]["LRU"] == n and same["Landlord"]["LRU"] == n
    fifo = same["Balance"]["FIFO"] == n
    return Decision("holds" if ok else "refuted",
                    f"On {n} seeded unit-cost sequences Landlord (full reset) made LRU's evictions on "
                    f"{same['Landlord']['LRU']} and Balance on {same['Balance']['LRU']}; Balance made FIFO's on "
                    f"{same['Balance']['FIFO']}" + (": with equal weights Balance ignores hits and is FIFO, not LRU."
                                                    if fifo and not ok else "."))
