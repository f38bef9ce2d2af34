"""Claims decided from exact expectations of randomized policies: the Section 4 marking argument, and the toolkit's
own finding that no-refetch regret is unbounded for every deterministic policy (adaptive adversary) and, in
expectation, for every randomized one (oblivious adversary).  Tables: :mod:`theorems.results.randomized` and
:func:`theorems.results.attention.nm_adaptive_table`.  Rules: ``VERDICTS.md``."""

from __future__ import annotations

from theorems.results import attention as RA
from theorems.results.randomized import marking_phase_sum_table, nm_oblivious_table
from theorems.tables import cached

from .registry import Computed, Context, Decision, claim, decides, edit, fmt


@claim("marking-hk-sum", "§4 (the marking argument, in the attention setting)",
       "Within a phase the i-th re-attended token has been evicted by the marking policy with probability about "
       "1/(k-i+1); summing these over the phase gives the H_k factor rather than the deterministic k.",
       sizes={"ks": ((2, 3, 4), (2, 3, 4, 5, 6)), "phases": (6, 8), "ratio_phases": ((6, 12), (10, 20))})
def marking_sum(ctx: Context) -> Computed:
    z = ctx.sizes
    table = cached(marking_phase_sum_table, ks=z["ks"], phases=z["phases"], ratio_phases=z["ratio_phases"])
    rows = lambda w: [r for r in table.rows if r.workload == w]  # noqa: E731
    return Computed(
        {"policy_run": "Marking (registered; exact expectation over every outcome of its draws)",
         "phase_sum": [{"k": r.k, "per_request_probability": r.params["per_request_probability"],
                        "predicted_1_over_k_minus_i_plus_1": r.params["predicted"],
                        "probabilities_exact": r.holds, "phase_expectation": r.alg_cost, "H_k": r.bound,
                        "phase_sums_equal_H_k": r.params["phase_sums_equal_H_k"], "phases": r.params["phases"]}
                       for r in rows("phase sum")],
         "deterministic": [{"k": r.k, "lru_faults_per_phase": r.alg_cost, "equals_k": r.holds,
                            "marking_largest_phase_expectation_same_sequence":
                                r.params["marking_largest_phase_expectation"],
                            "marking_within_H_k": r.params["marking_within_H_k"]} for r in rows("deterministic")],
         "ratio": [{"k": r.k, "phases": r.params["phases"], "exact_ratio": r.ratio, "H_k": r.bound,
                    "excess_over_H_k_opt": r.params["excess_over_H_k_opt"], "excess_grows": r.holds,
                    "two_H_k_minus_1": r.params["ratio_2H_k_minus_1"]} for r in rows("ratio")]},
        {"per_request_probability": "about 1/(k-i+1)", "phase_factor": "H_k", "deterministic": "k"},
        {"test": "theorems/test_marking_hk_sum.py, tests/test_exact_expectation.py"})


@decides("marking-hk-sum", flips={
    "a phase probability off 1/(k-i+1)": (lambda v: edit(v, "phase_sum/0/probabilities_exact", False), "refuted"),
    "Marking's excess over H_k OPT stops growing": (
        lambda v: edit(v, "ratio", lambda rs: [dict(r, excess_grows=False) for r in rs]), "holds")})
def marking_sum_decide(v: dict, e: dict) -> Decision:
    """Readings.  (Per phase) on a phase with one new token among k+1, the i-th stale token re-attended is absent with
    probability 1/(k-i+1), so a phase costs H_k in expectation where a deterministic policy can be made to pay k:
    holds when every exact per-request probability equals 1/(k-i+1), every LRU phase on its adaptive sequence costs
    k and Marking's exact phase expectation on that sequence is at most H_k; refuted otherwise.  (Ratio) the sum
    gives Marking a competitive ratio of H_k: refuted when Marking's exact expected cost exceeds H_k OPT by an
    amount that grows with the number of phases (no additive constant absorbs it), holds otherwise.  The claim's
    verdict: the per-phase reading's, with a correction when the ratio reading fails (the sentence sums one new
    token's phase; with several new tokens per phase Marking's ratio is 2H_k - 1)."""
    ph, det, rt = v["phase_sum"], v["deterministic"], v["ratio"]
    phase_ok = all(r["probabilities_exact"] and r["phase_sums_equal_H_k"] for r in ph) and \
        all(r["equals_k"] and r["marking_within_H_k"] for r in det)
    ratio_broken = [r for r in rt if r["excess_grows"]]
    readings = {
        "per phase (one new token)": {
            "verdict": "holds" if phase_ok else "refuted",
            "finding": "; ".join(f"k={r['k']}: P(fault) = {r['per_request_probability']}, phase sum "
                                 f"{fmt(r['phase_expectation'])} = H_k {fmt(r['H_k'])}" for r in ph)},
        "ratio (Marking is H_k-competitive)": {
            "verdict": "refuted" if ratio_broken else "holds",
            "finding": "; ".join(f"k={r['k']}: E[ALG] - H_k OPT = {[fmt(x) for x in r['excess_over_H_k_opt']]} at "
                                 f"{r['phases']} phases" for r in rt)}}
    verdict = "refuted" if not phase_ok else ("holds-with-correction" if ratio_broken else "holds")
    worst = max(rt, key=lambda r: r["exact_ratio"] / r["H_k"]) if rt else None
    summary = (f"Exact expectations of the registered Marking: on a phase with one new token among k+1 the i-th "
               f"stale token is absent with probability exactly 1/(k-i+1) and a phase costs exactly H_k, for k = "
               f"{[r['k'] for r in ph if r['probabilities_exact']]} of {[r['k'] for r in ph]}; LRU on its adaptive "
               f"sequence pays k in every phase (k = {[r['k'] for r in det if r['equals_k']]}), Marking at most H_k "
               f"per phase on that same sequence.")
    if worst:
        summary += (f"  As a competitive ratio the factor is not H_k: with two new tokens per phase Marking's exact "
                    f"ratio is {fmt(worst['exact_ratio'])} at k = {worst['k']} (H_k = {fmt(worst['H_k'])}), and "
                    f"E[ALG] - H_k OPT grows with the phases in {len(ratio_broken)} of {len(rt)} k.")
    return Decision(verdict, summary, readings=readings, correction=None if verdict != "holds-with-correction" else
                    "The harmonic sum is exact for a phase with one new token (H_k there, against k for a "
                    "deterministic policy), but it does not make H_k the marking policy's competitive factor: with "
                    f"two new tokens per phase its exact expected cost exceeds H_k OPT by "
                    f"{[fmt(x) for x in worst['excess_over_H_k_opt']]} at {worst['phases']} phases (k = "
                    f"{worst['k']}), growing with the phases; its ratio there is {fmt(worst['exact_ratio'])}, below "
                    f"2H_k - 1 = {fmt(worst['two_H_k_minus_1'])} (Marking's tight ratio, Achlioptas, Chrobak & "
                    "Noga 2000).  H_k is the optimal randomized ratio of other algorithms (OnlineMin), as Eq. 9 "
                    "says.")


@claim("nm-det-unbounded", "toolkit finding (not the paper's; cf. §4(a) and §5)",
       "In the no-refetch model every deterministic policy has unbounded regret against an adaptive adversary "
       "(it loses T-k-1 while the optimum loses 0), and every randomized policy has expected regret at least "
       "(T-k-1)/(k+1) against an oblivious one; the paper proves unboundedness only for pure accumulation.",
       sizes={"adaptive_ks": ((2, 4), (2, 4, 8)), "adaptive_Ts": ((60, 120), (200, 400)), "exact_ks": ((2,), (2,)),
              "exact_T": (12, 14), "sampled_ks": ((4,), (4, 8)), "sampled_T": (60, 200), "seeds": (8, 16)})
def nm_unbounded(ctx: Context) -> Computed:
    z = ctx.sizes
    adaptive = cached(RA.nm_adaptive_table, ks=z["adaptive_ks"], Ts=z["adaptive_Ts"])
    oblivious = cached(nm_oblivious_table, ks=z["exact_ks"], T=z["exact_T"], sampled_ks=z["sampled_ks"],
                       sampled_T=z["sampled_T"], seeds=z["seeds"])
    return Computed(
        {"attribution": "the toolkit's finding; the paper proves unbounded regret only for undecayed accumulation "
                        "(Theorem 2) and credits recency and decay with the deployed policies' safety (§5)",
         "construction_deterministic": "adversary.adaptive_k_plus_one_nm: row t puts all mass on the lowest token "
                                       "the policy has dropped (on the arriving token until it drops one)",
         "construction_randomized": "adversary.oblivious_k_plus_one_nm: rows 0..k on the arriving token, then all "
                                    "mass on a fixed target in 0..k, the target uniform (Yao)",
         "deterministic": [{"policy": r.policy, "k": r.k, "T": r.params["T"], "regret": r.alg_cost,
                            "lower_bound_T_minus_k_minus_1": r.bound, "opt_regret": r.opt_cost, "holds": r.holds}
                           for r in adaptive.rows],
         "randomized": [{"policy": r.policy, "k": r.k, "T": r.params["T"], "exact": r.params["exact"],
                         "mean_regret_over_targets": r.alg_cost,
                         "interval": None if r.params["exact"] else [r.ci_low, r.ci_high],
                         "lower_bound": r.bound, "opt_regret": r.opt_cost, "holds": r.holds}
                        for r in oblivious.rows]},
        {"deterministic": "regret >= T-k-1, OPT 0", "randomized": "E[regret] >= (T-k-1)/(k+1), OPT 0"},
        {"test": "theorems/test_nm_adaptive.py, theorems/test_nm_randomized_oblivious.py"})


@decides("nm-det-unbounded", flips={
    "a deterministic policy escapes the adaptive adversary": (
        lambda v: edit(v, "deterministic/0/holds", False), "refuted"),
    "a randomized policy below the oblivious bound": (lambda v: edit(v, "randomized/0/holds", False), "refuted")})
def nm_unbounded_decide(v: dict, e: dict) -> Decision:
    """Universal over policies (the registry's, both parts): holds when every deterministic NM policy loses at least
    T-k-1 on its adaptive trace with an optimum of 0 (``holds`` per row), and every randomized NM policy's expected
    regret averaged over the k+1 oblivious targets is at least (T-k-1)/(k+1) with an optimum of 0 (exact where
    enumerable; a sampled row counts as holding unless its interval lies entirely below the bound); refuted by one
    row that escapes."""
    det, rnd = v["deterministic"], v["randomized"]
    det_bad = [r for r in det if not r["holds"]]
    rnd_bad = [r for r in rnd if not r["holds"]]
    exact = [r for r in rnd if r["exact"]]
    summary = (f"A toolkit finding, not the paper's.  Adaptive adversary: {len(det) - len(det_bad)} of {len(det)} "
               f"deterministic-policy runs ({len({r['policy'] for r in det})} policies) lose at least T-k-1 while "
               f"the optimum loses {fmt(max(r['opt_regret'] for r in det))}.  Oblivious adversary: "
               f"{len(rnd) - len(rnd_bad)} of {len(rnd)} randomized-policy rows ({', '.join(sorted({r['policy'] for r in rnd}))}) "
               f"have expected regret averaged over the targets at least (T-k-1)/(k+1), optimum "
               f"{fmt(max(r['opt_regret'] for r in rnd))}; exactly: "
               + "; ".join(f"{r['policy']} k={r['k']} T={r['T']}: {fmt(r['mean_regret_over_targets'])} >= "
                           f"{fmt(r['lower_bound'])}" for r in exact) + ".")
    return Decision("refuted" if det_bad or rnd_bad else "holds", summary)
