"""Result tables of randomized policies decided from *exact* expectations (paper Section 4(c) and the marking
argument of Section 4; the toolkit's no-refetch finding).

Sampling seeds with a family-wise interval is sound against a false refutation but cannot certify a bound that the
truth sits close to.  Where ``k`` and the sequence are small, these tables compute the expected cost exactly with
:func:`kvcore.exact_expectation.expected_cost`: the registered policy itself, run step by step over every outcome of
its random draws, states merged (a Markov chain over the policy's own states), in rational arithmetic.  Exact values
are kept as ``Fraction`` until the row is written; bounds are compared in rationals (``harmonic_exact``).  Larger
``k`` stays sampled (:mod:`theorems.results.classic`), with intervals.
"""

from __future__ import annotations

from fractions import Fraction

import policies
from adversary import (adaptive_k_plus_one, marking_phases, oblivious_k_plus_one_nm, phase_starts, two_new_per_phase,
                       uniform_k_plus_one)
from kvcore.engine import run
from kvcore.exact_expectation import NotEnumerable, expected_cost
from kvcore.measure import familywise, mean_ci, measure, ratio
from kvcore.optima import belady, nm_opt

from ..tables import Row, Table


def harmonic_exact(k: int) -> Fraction:
    """``H_k = 1 + 1/2 + ... + 1/k`` as an exact rational."""
    return sum((Fraction(1, i) for i in range(1, k + 1)), Fraction(0))


def eq9_workloads(k: int, phases: int) -> dict:
    """The workloads of :func:`theorems.results.classic.marking_table`, with the same generators and seeds."""
    work = {"phases new=1": marking_phases(k, phases, 1, seed=k, n_items=k + 1),
            f"phases new={k}": marking_phases(k, phases, k, seed=k),
            "uniform k+1": uniform_k_plus_one(k, phases * k, seed=k)}
    if k >= 2:
        work["two new per phase"] = two_new_per_phase(k, phases, seed=k)
    return work


def eq9_exact_table(ks=(2, 4), phases: int = 40) -> Table:
    """Marking's exact ``E[ALG]/OPT`` on the Eq. 9 workloads at small ``k`` against ``2H_k - 1`` (its tight bound,
    Achlioptas, Chrobak & Noga 2000) and the paper's ``2H_k``.  ``holds`` is ``E[ALG] <= (2H_k - 1) OPT`` in exact
    arithmetic; ``params`` carry the exact expectation as ``"p/q"``, whether it is within ``2H_k`` and within
    ``H_k``, and the number of states the chain reached."""
    table = Table("eq9-exact", "E[Marking] <= (2H_k - 1) OPT, exactly (paper Eq. 9 states 2H_k)")
    for k in ks:
        for wname, tr in eq9_workloads(k, phases).items():
            e = expected_cost(policies.make("Marking"), tr, k)
            opt = belady(tr, k).cost
            hk = harmonic_exact(k)
            table.add(Row(table.result, "Marking", "rm", wname, k, k, float(e.cost), opt, float(e.cost) / opt,
                          float(2 * hk - 1), e.cost <= (2 * hk - 1) * Fraction(opt),
                          params={"exact": f"{e.cost.numerator}/{e.cost.denominator}",
                                  "within_2H_k": e.cost <= 2 * hk * Fraction(opt),
                                  "within_H_k": e.cost <= hk * Fraction(opt), "states": e.states,
                                  "phases": phases}))
    return table


def marking_phase_sum_table(ks=(2, 3, 4, 5), phases: int = 6, ratio_phases=(10, 20), marking="Marking") -> Table:
    """The Section 4 marking argument, exactly.

    Rows ``"phase sum"``: Marking on :func:`adversary.marking_phases` with one new token per phase over ``k + 1``
    tokens.  In every phase after the first the phase's cache is the previous phase's ``k`` tokens; the new token
    faults, and the ``i``-th stale token requested is absent with probability ``1/(k - i + 1)`` (``i = 1..k-1``),
    so a phase costs ``H_k`` in expectation.  ``alg_cost`` is the largest exact per-phase expectation, ``bound``
    is ``H_k``; ``holds``: every later phase's exact per-request fault probabilities are ``[1, 1/k, ..., 1/2]``.

    Rows ``"deterministic"``: LRU on the adaptive ``k+1`` adversary built against it -- ``k`` faults in every
    phase (``alg_cost`` the fewest faults in a later phase), and Marking's exact expectation on that same, fixed
    sequence (``params``: its largest per-phase expectation, at most ``H_k``).

    Rows ``"ratio"``: Marking on :func:`adversary.two_new_per_phase` at two lengths: the exact excess
    ``E[ALG] - H_k OPT`` (``params``) grows with the number of phases, so no additive constant makes ``H_k`` a
    competitive ratio of Marking; its ratio tends to ``2H_k - 1``.  ``marking``: the policy run in the Marking rows
    (a registered name or a class; the tests pass a broken one)."""
    table = Table("marking-hk-sum", "marking's per-phase fault probabilities 1/(k-i+1) sum to H_k (paper Section 4)")
    for k in ks:
        hk = harmonic_exact(k)
        tr = marking_phases(k, phases, 1, seed=k, n_items=k + 1)
        e = expected_cost(policies.resolve(marking)(), tr, k)
        starts = phase_starts(tr, k) + [tr.T]
        later = [e.per_step[a:b] for a, b in zip(starts[1:], starts[2:])]
        predicted = [Fraction(1)] + [Fraction(1, k - i + 1) for i in range(1, k)]
        sums = [sum(p, Fraction(0)) for p in later]
        table.add(Row(table.result, "Marking", "rm", "phase sum", k, k, float(max(sums)), 1.0, float(max(sums)),
                      float(hk), all(p == predicted for p in later),
                      params={"phases": len(later), "per_request_probability": [str(x) for x in later[0]],
                              "predicted": [str(x) for x in predicted], "phase_sums_equal_H_k":
                              all(s == hk for s in sums)}))
        adv = adaptive_k_plus_one(policies.make("LRU"), k, phases * k)
        res = run(policies.make("LRU"), adv, k, record=True)
        starts = phase_starts(adv, k) + [adv.T]
        lru = [float(res.per_step[a:b].sum()) for a, b in zip(starts[1:], starts[2:])]
        m = expected_cost(policies.resolve(marking)(), adv, k)
        mark = [sum(m.per_step[a:b], Fraction(0)) for a, b in zip(starts[1:], starts[2:])]
        table.add(Row(table.result, "LRU", "rm", "deterministic", k, k, min(lru), 1.0, min(lru), float(k),
                      min(lru) == k == max(lru),
                      params={"phases": len(lru), "marking_largest_phase_expectation": float(max(mark)),
                              "marking_within_H_k": max(mark) <= hk}))
        if k >= 2:
            excess = []
            for P in ratio_phases:
                t2 = two_new_per_phase(k, P, seed=k)
                ex = expected_cost(policies.resolve(marking)(), t2, k).cost
                excess.append((ex, Fraction(belady(t2, k).cost)))
            (e1, o1), (e2, o2) = excess
            table.add(Row(table.result, "Marking", "rm", "ratio", k, k, float(e2), float(o2), float(e2 / o2),
                          float(hk), e2 - hk * o2 > max(e1 - hk * o1, Fraction(0)),
                          params={"phases": list(ratio_phases), "excess_over_H_k_opt": [float(e1 - hk * o1),
                                                                                        float(e2 - hk * o2)],
                                  "ratio_2H_k_minus_1": float(2 * hk - 1)}))
    return table


def nm_oblivious_table(ks=(2,), T: int = 12, sampled_ks=(4, 8), sampled_T: int = 60, seeds: int = 16,
                       max_states: int = 400) -> Table:
    """Every randomized NM policy of the registry on :func:`adversary.oblivious_k_plus_one_nm`, one trace per
    target ``0..k``: the expected regret averaged over the targets is at least ``(T - k - 1)/(k + 1)`` (Yao), while
    the optimum loses 0 on every target.  Exact (``expected_cost``) at ``ks`` when the policy's reachable states
    stay within ``max_states``; sampled with a family-wise 95% interval otherwise and at ``sampled_ks``.  A row's
    ``alg_cost`` is the average over targets, ``bound`` the lower bound; ``holds``: exact average ``>=`` bound, or
    (sampled) the interval's upper end ``>=`` bound (a sample cannot refute what it straddles)."""
    table = Table("nm-oblivious", "E[regret] averaged over the k+1 targets >= (T-k-1)/(k+1) for every randomized "
                  "NM policy; OPT 0")
    names = [p.name for p in policies.all_policies("nm", deterministic=False)]
    confidence = familywise(max(1, len(names) * (len(ks) + len(sampled_ks))))
    for name in names:
        for k, n, exact_ok in [(k, T, True) for k in ks] + [(k, sampled_T, False) for k in sampled_ks]:
            traces = [oblivious_k_plus_one_nm(k, n, j) for j in range(k + 1)]
            opt = max(nm_opt(tr, k).cost for tr in traces)
            bound = Fraction(n - k - 1, k + 1)
            try:
                if not exact_ok:
                    raise NotEnumerable("sampled by design at this k")
                costs = [expected_cost(policies.make(name), tr, k, "nm", max_states=max_states).cost
                         for tr in traces]
                mean = sum(costs, Fraction(0)) / len(costs)
                row = Row(table.result, name, "nm", "oblivious k+1 (exact)", k, k, float(mean), opt,
                          ratio(float(mean), opt), float(bound), mean >= bound, tracking_gap=float(mean) - opt,
                          params={"T": n, "exact": True, "per_target": [float(c) for c in costs]})
            except NotEnumerable as why:
                per = [measure(policies.resolve(name), tr, k, model="nm", seeds=range(seeds), opt=0.0,
                               confidence=confidence).costs for tr in traces]
                avg = [sum(c[s] for c in per) / len(per) for s in range(seeds)]
                mean, lo, hi = mean_ci(avg, confidence)
                row = Row(table.result, name, "nm", "oblivious k+1 (sampled)", k, k, mean, opt, ratio(mean, opt),
                          float(bound), hi >= float(bound), seeds, lo, hi, tracking_gap=mean - opt,
                          params={"T": n, "exact": False, "why_sampled": str(why)})
            table.add(row)
    return table
