"""Result tables of the classical bounds (SPEC section 5, paper Section 4): one function per result.

Each function runs the policies a result concerns through its workloads against the exact optimum and returns a
:class:`~theorems.tables.Table` whose rows carry the computed numbers, the bound the result predicts, and whether
it held.  The bound in every row is derived independently of the run (a formula in k, h, T or a count read off
the trace), never copied from an earlier run.  The ``test_*`` modules assert on these tables at CI sizes;
``paper_check`` renders the same tables at quick/full sizes, memoized so nothing is computed twice in one run.
"""

from __future__ import annotations

import math

import numpy as np

import policies
from adversary import (adaptive_k_plus_one, cyclic_k_plus_one, lfu_priming, marking_phases, phase_starts,
                       two_new_per_phase, uniform_k_plus_one)
from kvcore.engine import run
from kvcore.formulas import GUARANTEES, harmonic, landlord_bound
from kvcore.measure import familywise, mean_ci, measure, ratio, within
from kvcore.optima import belady, optimum
from kvcore.traces import PagingTrace

from ..tables import Row, Table, evaluate


def deterministic_rm_policies() -> list[str]:
    """Every registered deterministic policy that runs in RM: the population Eq. 6 speaks about."""
    return [i.name for i in policies.all_policies("rm", deterministic=True)]


def upper_bound_policies(weighted: bool | None = None) -> list[str]:
    """Every registered deterministic RM policy that declares the bound ``k/(k-h+1)`` (policy metadata
    ``guarantee``; ``weighted=True``: only those whose bound holds with per-item fault costs)."""
    extra = {} if weighted is None else {"weighted": weighted}
    return [i.name for i in policies.all_policies("rm", deterministic=True, guarantee="k/(k-h+1)", **extra)]


def randomized_guarantee_policies() -> list[str]:
    """Every registered randomized RM policy that declares a bound on its expected cost (``guarantee``)."""
    return [i.name for i in policies.all_policies("rm", deterministic=False)
            if i.guarantee is not None and GUARANTEES[i.guarantee].expectation]


def full_cache_policies() -> list[str]:
    """Every registered lazy RM policy (metadata ``lazy``: it evicts only what a fault needs, so its cache stays
    full): on i.i.d. uniform requests over k+1 items each of them misses exactly the one absent item."""
    return [i.name for i in policies.all_policies("rm", lazy=True)]


def opt_upper_bound_k_plus_one(T: int, k: int, h: int) -> float:
    """SPEC section 5: on any sequence of ``T`` requests over ``k+1`` items, ``OPT_h <= (k-h+1)/k * T + h``."""
    return (k - h + 1) / k * T + h


# ---------------------------------------------------------------------------------------------------------------------
# Eq. 6: every deterministic policy is at best k-competitive
# ---------------------------------------------------------------------------------------------------------------------


def eq6_table(ks=(2, 3, 4), T_per_k2: int = 20, names: list[str] | None = None) -> Table:
    """Adaptive adversary on k+1 items (paper Section 4(a), Eq. 6).  Per policy and k, with ``T = T_per_k2 * k^2``:
    the policy faults on all T requests, OPT_k <= T/k + k (SPEC), hence ratio >= T/(T/k + k) = k(1 - eps) with
    ``eps = k^2/(T + k^2)``.  The row's bound is that lower bound; ``holds`` means ratio >= it and misses = T."""
    table = Table("eq6-det-lower-bound", "every deterministic policy has ratio >= k(1-eps) on the adaptive "
                  "adversary over k+1 items (Sleator-Tarjan 1985; paper Eq. 6)")
    for name in names or deterministic_rm_policies():
        for k in ks:
            T = T_per_k2 * k * k
            trace = adaptive_k_plus_one(policies.make(name), k, T)
            m = measure(policies.resolve(name), trace, k, opt=belady(trace, k))
            lower = T / opt_upper_bound_k_plus_one(T, k, k)
            table.add(Row.of(table.result, m, "adaptive k+1", lower, m.misses[0] == T and m.ratio >= lower * (1 - 1e-12),
                             params={"T": T, "eps": k * k / (T + k * k)}))
    return table


def opt_on_k_plus_one_table(ks=(2, 3, 4), T: int = 400, seeds: int = 3) -> Table:
    """SPEC section 5: ``OPT_h <= (k-h+1)/k * n + h`` on any sequence over k+1 items, for every h <= k."""
    table = Table("opt-k-plus-one", "OPT_h <= (k-h+1)/k n + h on sequences over k+1 items")
    for k in ks:
        for s in range(seeds):
            trace = uniform_k_plus_one(k, T, seed=s)
            for h in range(1, k + 1):
                opt = belady(trace, h).cost
                b = opt_upper_bound_k_plus_one(T, k, h)
                table.add(Row(table.result, "OPT", "rm", f"uniform k+1 seed {s}", k, h, opt, opt, 1.0, b,
                              within(opt, b), params={"T": T}))
    return table


# ---------------------------------------------------------------------------------------------------------------------
# Eq. 8: ALG_k <= k/(k-h+1) OPT_h, and the cyclic sequence that approaches it
# ---------------------------------------------------------------------------------------------------------------------


def eq8_table(ks=(2, 3, 4), T: int = 300, seeds: int = 3, names=None) -> Table:
    """Eq. 8 on seeded sequences: uniform and Zipf unit-cost sequences over 2k items for every policy of ``names``
    (default: every policy declaring ``k/(k-h+1)``); weighted sequences (one fault cost 1..9 per item) for those
    whose guarantee is declared ``weighted`` (Landlord, GD-A)."""
    table = Table("eq8-landlord", "ALG_k <= k/(k-h+1) OPT_h, additive constant 0 (Young 2002; paper Eq. 8)")
    names = upper_bound_policies() if names is None else list(names)
    weighted_ok = set(upper_bound_policies(weighted=True))
    for k in ks:
        for s in range(seeds):
            rng = np.random.default_rng(1000 * k + s)
            n = 2 * k
            zipf = rng.zipf(1.3, size=T) % n
            unit = {"uniform": PagingTrace.unit(rng.integers(0, n, size=T)), "zipf": PagingTrace.unit(zipf)}
            # one fault cost per item (Young's weighted caching; per-request costs void the bound)
            item_cost = rng.integers(1, 10, size=n).astype(float)
            weighted = PagingTrace(unit["uniform"].items, item_cost[unit["uniform"].items], unit["uniform"].offsets,
                                   "weighted uniform")
            for h in range(1, k + 1):
                for wname, tr in unit.items():
                    opt = belady(tr, h).cost
                    for name in names:
                        table.add(evaluate(table.result, policies.make(name), tr, k, h=h, opt_cost=opt,
                                           workload=f"{wname} seed {s}", bound=landlord_bound(k, h)))
                opt_w = optimum(weighted, h).cost
                for name in [x for x in names if x in weighted_ok]:
                    table.add(evaluate(table.result, policies.make(name), weighted, k, h=h, opt_cost=opt_w,
                                       workload=f"weighted seed {s}", bound=landlord_bound(k, h)))
    return table


def cyclic_opt_upper(T: int, k: int, h: int) -> float:
    """Belady with ``h`` slots on the cyclic sequence over N = k+1 items faults on the h cold misses and then at
    most ``N - h`` times in every window of ``N - 1`` requests (the items it keeps cover the next h-1 distinct
    requests of the cycle), so ``OPT_h <= h + ceil((T - h)/(N - 1)) (N - h)``."""
    N = k + 1
    return h + math.ceil(max(T - h, 0) / (N - 1)) * (N - h)


def cyclic_table(ks=(2, 3, 4, 8), T_cycles: int = 200) -> Table:
    """LRU and FIFO on ``1..k+1`` repeated fault on every request; against Belady_h the ratio is at least
    ``T / cyclic_opt_upper`` and at most k/(k-h+1), so it approaches k/(k-h+1) as T grows (SPEC section 5)."""
    table = Table("eq8-cyclic", "LRU/FIFO on the cyclic k+1 sequence realize ratio -> k/(k-h+1)")
    for k in ks:
        T = T_cycles * (k + 1)
        trace = cyclic_k_plus_one(k, T)
        for h in range(1, k + 1):
            opt = belady(trace, h).cost
            lower = T / cyclic_opt_upper(T, k, h)
            for name in ("LRU", "FIFO"):
                m = measure(policies.resolve(name), trace, k, h, opt=opt)
                table.add(Row.of(table.result, m, "cyclic k+1", landlord_bound(k, h),
                                 m.misses[0] == T and lower <= m.ratio * (1 + 1e-12) and m.within(landlord_bound(k, h)),
                                 params={"T": T, "ratio_lower": lower}))
    return table


# ---------------------------------------------------------------------------------------------------------------------
# Eq. 9: randomized bounds
# ---------------------------------------------------------------------------------------------------------------------


def marking_table(ks=(2, 3, 4, 8), phases: int = 60, seeds: int = 16, names=None) -> Table:
    """Every randomized policy's expected cost against its declared bound (default: every randomized RM policy
    declaring one -- Marking's ``2H_k - 1``, FKLMSY 1991 / Achlioptas, Chrobak & Noga 2000, the paper states
    ``2H_k``; OnlineMin's ``H_k``) on marking-phase sequences with 1 and k new items per phase, uniform k+1
    sequences, and the two-new-items-per-phase family on which Marking tends to ``2H_k - 1``
    (:func:`adversary.two_new_per_phase`, k >= 2); mean over seeds with a 95% interval."""
    table = Table("eq9-marking", "E[ALG] <= its declared randomized bound, e.g. (2H_k - 1) OPT for Marking (paper "
                  "Eq. 9 states 2H_k)")
    names = randomized_guarantee_policies() if names is None else list(names)
    confidence = familywise(len(ks) * 4 * len(names))   # every row below is judged at once (kvcore.measure)
    for k in ks:
        work = {"phases new=1": marking_phases(k, phases, 1, seed=k, n_items=k + 1),
                f"phases new={k}": marking_phases(k, phases, k, seed=k),
                "uniform k+1": uniform_k_plus_one(k, phases * k, seed=k),
                "two new per phase": two_new_per_phase(k, phases, seed=k)}
        for wname, tr in work.items():
            for name in names:
                bound = GUARANTEES[policies.get(name).guarantee].value(k)
                table.add(evaluate(table.result, policies.resolve(name), tr, k, workload=wname, seeds=range(seeds),
                                   bound=bound, confidence=confidence, params={"confidence": confidence}))
    return table


def uniform_limit_table(ks=(2, 3, 4, 8), T: int = 20000, seeds: int = 8) -> Table:
    """Yao's bound on i.i.d. uniform requests over k+1 items (SPEC section 5).

    A phase ends when the last of the k+1 items appears after the other k: ``E[phase length] = (k+1) H_k`` (coupon
    collection, then a geometric wait with success 1/(k+1)).  Belady faults once per phase; a full-cache policy
    misses exactly the one absent item, i.e. with probability 1/(k+1) per request.  So the ratio -> H_k.  FWF
    faults exactly k times in every phase (it flushes at each phase start) and Belady exactly ``k + (phases - 1)``,
    so FWF's ratio is ``k P / (k + P - 1) -> k``.  Both counts are checked exactly: FWF pays the number of distinct
    items of each phase (k, except in a last, unfinished phase) and Belady ``k + P - 1``.
    The full-cache rows check that the seed-mean ratio's interval, widened by the cold-start error ``(k+1)/OPT``
    (the first phase's k cold misses), contains H_k; the intervals are family-wise at 95% over all of the table's
    full-cache rows (:func:`kvcore.measure.familywise`), so a larger profile does not manufacture failures.
    """
    table = Table("eq9-uniform", "full-cache policies -> H_k and FWF -> k on uniform k+1 (Yao; SPEC section 5)")
    names = full_cache_policies()
    confidence = familywise(len(ks) * len(names))   # the intervals below are judged together
    for k in ks:
        traces = [uniform_k_plus_one(k, T, seed=100 + s) for s in range(seeds)]
        opts = [belady(tr, k).cost for tr in traces]
        for name in names:
            ratios = [measure(policies.resolve(name), tr, k, seeds=(s,), opt=o).ratio
                      for s, (tr, o) in enumerate(zip(traces, opts))]
            mean, lo, hi = mean_ci(ratios, confidence)
            slack = (k + 1) / min(opts) * harmonic(k)
            ok = lo - slack <= harmonic(k) <= hi + slack
            table.add(Row(table.result, name, "rm", "uniform k+1", k, k, mean, float(np.mean(opts)), mean,
                          harmonic(k), ok, seeds, lo, hi, params={"T": T, "cold_start_slack": slack}))
        for tr, o in zip(traces, opts):
            starts = phase_starts(tr, k) + [tr.T]
            distinct = [np.unique(tr.items[a:b]).size for a, b in zip(starts, starts[1:])]
            P = len(distinct)
            cost = measure(policies.resolve("FWF"), tr, k, opt=o).cost
            table.add(Row(table.result, "FWF", "rm", "uniform k+1", k, k, cost, o, ratio(cost, o), k * P / (k + P - 1),
                          cost == sum(distinct) and o == k + P - 1, params={"T": T, "phases": P}))
    return table


# ---------------------------------------------------------------------------------------------------------------------
# Section 2.2: LRU's phase argument, LFU's unbounded ratio
# ---------------------------------------------------------------------------------------------------------------------


def phase_argument_rows(policy: str | type, trace: PagingTrace, k: int, workload: str) -> Row:
    """LRU faults at most k times in every k-phase, and OPT_k pays at least one fault per phase boundary, i.e.
    ``OPT_k >= phases - 1`` (paper Section 2.2).  ``alg_cost`` is the largest per-phase fault count.
    ``policy`` is a registered name or a policy class."""
    pol = policies.make(policy) if isinstance(policy, str) else policy()
    name = pol.name
    starts = phase_starts(trace, k) + [trace.T]
    per_step = run(pol, trace, k, "rm", record=True).per_step
    worst = max(float(per_step[a:b].sum()) for a, b in zip(starts, starts[1:]))
    opt = belady(trace, k).cost
    phases = len(starts) - 1
    return Row("lru-phase-argument", name, "rm", workload, k, k, worst, opt, ratio(worst, 1.0), float(k),
               worst <= k and opt >= phases - 1, params={"phases": phases, "T": trace.T})


def lru_phase_table(ks=(2, 3, 4, 8), T: int = 2000, seeds: int = 4, name: str = "LRU") -> Table:
    table = Table("lru-phase-argument", "LRU faults <= k per phase; OPT >= 1 per phase boundary (Section 2.2)")
    for k in ks:
        for s in range(seeds):
            rng = np.random.default_rng(7 * k + s)
            for wname, seq in (("uniform 2k", rng.integers(0, 2 * k, size=T)),
                               ("zipf", rng.zipf(1.2, size=T) % (3 * k))):
                table.add(phase_argument_rows(name, PagingTrace.unit(seq), k, f"{wname} seed {s}"))
    return table


def lfu_table(ks=(2, 3, 4, 8), ms=(2, 4, 8, 16, 32)) -> Table:
    """LFU on ``p_1^m ... p_{k-1}^m (x y)^{m-1}`` pays exactly ``(k-1) + 2(m-1)`` and OPT exactly ``k+1`` (SPEC
    section 5), so LFU's ratio grows without bound in m (Borodin & El-Yaniv 1998; paper Section 2.2)."""
    table = Table("lfu-unbounded", "LFU pays (k-1)+2(m-1) vs OPT k+1 on the priming sequence")
    for k in ks:
        for m in ms:
            meas = measure(policies.resolve("LFU"), lfu_priming(k, m), k)
            want_alg, want_opt = (k - 1) + 2 * (m - 1), k + 1
            table.add(Row.of(table.result, meas, f"lfu priming m={m}", want_alg / want_opt,
                             meas.cost == want_alg and meas.opt_cost == want_opt, params={"m": m}))
    return table
