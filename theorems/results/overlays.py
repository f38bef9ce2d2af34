"""Measured overlays of the figures: figure id -> the data its builder draws over the formula.

Formats are documented per figure in ``figures.FIGURES[id].data_doc``.  A figure that illustrates a claim reads the
claim's own memoized tables (:func:`theorems.tables.cached`) at the claim's sizes (:data:`CLAIM_SIZES`), so the figure
and the report show one computation; the others declare their sizes here (:data:`SIZES`, quick value and full value)
and compute through the tables below, memoized the same way.  Every overlay function takes its sizes explicitly
(``sizes``), so a test can rerun it small and compare the plotted series with the table it came from.
"""

from __future__ import annotations

import numpy as np

import policies
from adversary import (decoy_and_sleeper, decoy_and_sleeper_roles, persistent_attention, stationary_zipf_trace,
                       zipf_weights)
from adversary.persistence import observed_union_max, persistence_violations, tail_mass_per_step
from kvcore.engine import run_nm
from kvcore.measure import schedule_regret
from kvcore.optima import nm_opt

from ..profile import Profile
from ..tables import Row, Table, cached
from .allocation import allocation_study
from .blocks import PAGE_READING, run_block_study
from .classic import cyclic_table, eq6_table, eq8_table, marking_table
from .quality_overlays import QUALITY_OVERLAYS
from . import workingset as W

# Figure 13's context length n (its caption, figures.analytic.FIG13_N).
FIG13_TOKENS = 4096
FIG13_EXPONENTS = (0.8, 1.2, 1.6)
# Figure 11's measured trace: (rho, W)-persistent Zipf-focus attention at R-LRU-H's registered defaults.
FIG11_TRACE = {"rho": 0.5, "W": 32, "tau": 0.05, "focus": 16, "sinks": 1, "seed": 0}
FIG11_FAMILIES = ("recency", "importance", "hybrid")

# Own sizes (quick value, full value) of the overlays that illustrate no single claim table.
SIZES = {
    "9": {"k": (4, 4), "suffix": (18, 40)},
    "11": {"T": (500, 2000), "k": (24, 64)},
    "13": {"budgets": ((64,), (64, 256)), "extra": (50, 200)},
}
# Overlays drawn from a claim's tables, at that claim's sizes: figure id -> {name: claim id}.
CLAIM_SIZES = {
    "7": {"eq8": "eq8-landlord"},
    "8": {"eq6": "eq6-det-lower-bound", "eq9": "eq9-randomized"},
    "alloc": {"alloc": "static-vs-coupled", "curve": "regret-curve-convex"},
    "surrogate": {"surrogate": "regret-surrogate"},
    "heads": {"heads": "displaced-mass-output-error"},
}


def overlay_sizes(fig_id: str, profile: Profile) -> dict:
    """The sizes figure ``fig_id``'s overlay runs at under ``profile`` (claim sizes nested under their name)."""
    fid = str(fig_id)
    if fid in CLAIM_SIZES:
        from ..claims import CLAIMS

        return {name: CLAIMS[cid].sizes_at(profile) for name, cid in CLAIM_SIZES[fid].items()}
    if fid == "seed002":
        return {"study": "full" if profile.name == "full" else "quick"}
    return {name: pair[1 if profile.name == "full" else 0] for name, pair in SIZES.get(fid, {}).items()}


# ---------------------------------------------------------------------------------------------------------------------
# Figure 7 (claim eq8-landlord): the cyclic worst case and Landlord on seeded sequences
# ---------------------------------------------------------------------------------------------------------------------


def fig7_overlay(sizes: dict) -> dict:
    """Per k and h: the cyclic k+1 rows of :func:`cyclic_table` (one series per distinct ratio sequence; policies
    with identical ratios share it) and Landlord's largest ratio over the seeded sequences of :func:`eq8_table`."""
    z = sizes["eq8"]
    cyc = cached(cyclic_table, ks=z["ks"], T_cycles=z["T_cycles"])
    eq8 = cached(eq8_table, ks=z["ks"], T=z["T"], seeds=z["seeds"])
    by_policy: dict[str, list[Row]] = {}
    for r in cyc.rows:
        by_policy.setdefault(r.policy, []).append(r)
    points = []
    for names, rows in _merge_identical(by_policy, key=lambda r: (r.k, r.h, r.ratio)).items():
        label = f"{' = '.join(names)} on cyclic k+1, T = {z['T_cycles']}(k+1)"
        points += [{"k": r.k, "h": r.h, "ratio": r.ratio, "label": label} for r in rows]
    worst: dict[tuple[int, int], float] = {}
    runs: dict[tuple[int, int], int] = {}
    for r in eq8.rows:
        if r.policy == "Landlord":
            worst[(r.k, r.h)] = max(worst.get((r.k, r.h), 0.0), r.ratio)
            runs[(r.k, r.h)] = runs.get((r.k, r.h), 0) + 1
    n = max(runs.values(), default=0)
    label = f"Landlord, largest of {n} seeded sequences, T = {z['T']}"
    points += [{"k": k, "h": h, "ratio": v, "label": label} for (k, h), v in sorted(worst.items())]
    return {"points": points}


def _merge_identical(series: dict[str, list], key) -> dict[tuple[str, ...], list]:
    """Group named series whose rows agree under ``key``: ``{(name, name, ...): rows}`` in first-seen order."""
    out: dict[tuple[str, ...], list] = {}
    seen: dict[tuple, tuple[str, ...]] = {}
    for name, rows in series.items():
        sig = tuple(key(r) for r in rows)
        if sig in seen:
            names = seen[sig]
            out[names + (name,)] = out.pop(names)
            seen[sig] = names + (name,)
        else:
            seen[sig] = (name,)
            out[(name,)] = rows
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Figure 8 (claims eq6-det-lower-bound, eq9-randomized)
# ---------------------------------------------------------------------------------------------------------------------


def ratio_interval(row: Row) -> tuple[float | None, float | None]:
    """The 95% interval of the mean *ratio* of a row made by :meth:`Row.of`, which stores the interval of the mean
    cost: the optimum is one number, so dividing by it gives the ratio's interval (none when the optimum is 0)."""
    lo, hi = row.ci_low, row.ci_high
    if lo is None or hi is None or row.opt_cost <= 0:
        return None, None
    return max(lo / row.opt_cost, 0.0), hi / row.opt_cost   # a cost is never negative: a wide interval is cut at 0


def fig8_overlay(sizes: dict) -> dict:
    """Deterministic: per k, the smallest ratio over every policy of :func:`eq6_table` on the adaptive adversary,
    with the row's lower bound.  Randomized: every row of :func:`marking_table` (each randomized policy that
    declares a guarantee, on each construction), with its ratio interval and the policy's declared guarantee."""
    z6, z9 = sizes["eq6"], sizes["eq9"]
    det = cached(eq6_table, ks=z6["ks"], T_per_k2=z6["T_per_k2"])
    rnd = cached(marking_table, ks=z9["ks"], phases=z9["phases"], seeds=z9["marking_seeds"])
    names = sorted({r.policy for r in det.rows})
    best: dict[int, Row] = {}
    for r in det.rows:
        if r.k not in best or r.ratio < best[r.k].ratio:
            best[r.k] = r
    label = f"smallest of {len(names)} deterministic RM policies, adaptive adversary, T = {z6['T_per_k2']}k²"
    deterministic = [{"k": k, "ratio": r.ratio, "bound": r.bound, "label": label} for k, r in sorted(best.items())]
    randomized = []
    for r in rnd.rows:
        lo, hi = ratio_interval(r)
        # a workload named after its k ("phases new=4" at k = 4) is one family across k
        workload = r.workload.replace(f"={r.k}", "=k") if r.workload.endswith(f"={r.k}") else r.workload
        point = {"k": r.k, "ratio": r.ratio, "policy": r.policy, "guarantee": policies.get(r.policy).guarantee,
                 "workload": workload}
        if lo is not None:
            point.update(ci_low=lo, ci_high=hi)
        randomized.append(point)
    runs = (f"{z9['phases']} phases per construction (uniform k+1: {z9['phases']}k requests), mean of "
            f"{z9['marking_seeds']} seeds")
    return {"deterministic": deterministic, "randomized": randomized, "runs": runs}


# ---------------------------------------------------------------------------------------------------------------------
# Figure 9: the decoy-and-sleeper construction as the generator builds it
# ---------------------------------------------------------------------------------------------------------------------


def fig9_overlay(sizes: dict) -> dict:
    """The generator's decoy-and-sleeper trace (filler first), the arrival steps of filler and sleeper, and the
    step at which ACC drops the sleeper (measured by running it)."""
    k = sizes["k"]
    tr = decoy_and_sleeper(k, 0.05, sizes["suffix"])
    roles = decoy_and_sleeper_roles(k)
    res = run_nm(policies.make("ACC"), tr, k, record=True)
    step = next(t for t, i in res.evictions if i == roles.sleeper)
    # token t arrives at step t (SPEC section 2)
    return {"attention": tr.to_dense().tolist(),
            "tokens": {"decoy (each)": list(roles.decoys), "sleeper": roles.sleeper, "filler": roles.filler},
            "arrivals": {"filler": roles.filler, "sleeper": roles.sleeper},
            "evict_step": int(step), "evicted": "sleeper", "evicted_by": "ACC", "gamma": 0.8, "k": k}


# ---------------------------------------------------------------------------------------------------------------------
# Figure 11: typical-case regret of every deterministic NM policy, grouped by its declared signal
# ---------------------------------------------------------------------------------------------------------------------


def fig11_policies() -> dict[str, str]:
    """Every deterministic NM policy of the registry whose declared signal is one of :data:`FIG11_FAMILIES`,
    name -> signal (registry defaults)."""
    return {i.name: i.signal for i in policies.all_policies("nm", deterministic=True) if i.signal in FIG11_FAMILIES}


def typical_regret_table(T: int, k: int) -> dict:
    """Cumulative NM regret per step of every policy of :func:`fig11_policies` on the (rho, W)-persistent
    Zipf-focus trace of :data:`FIG11_TRACE`, with the exact NM optimum's (min-cost flow) and Theorem 4's bound
    ``sum_{s<=t} M_s(tau)`` on the same trace, and whether the bound's corrected premise holds there (the union of
    the heavy sets of the last W rows at most k - 1, and chain persistence; ``theorems.results.persistence.thm4_row``).
    JSON-able: ``{"regret": {name: [...]}, "signal": {...}, "optimum": [...], "bound": [...], "trace": str,
    "tau": float, "union": int, "chain_violations": int}``."""
    p = FIG11_TRACE
    tr = persistent_attention(T, p["rho"], p["W"], p["tau"], focus=p["focus"], sinks=p["sinks"], seed=p["seed"])
    signal = fig11_policies()
    regret = {name: np.cumsum(run_nm(policies.make(name), tr, k, record=True).per_step).tolist() for name in signal}
    opt = nm_opt(tr, k, record=True)
    return {"regret": regret, "signal": signal,
            "optimum": np.cumsum(schedule_regret(tr, opt.evictions)).tolist(),
            "bound": np.cumsum(tail_mass_per_step(tr, p["tau"])).tolist(),
            "trace": (f"({p['rho']:g}, {p['W']})-persistent Zipf-focus trace, focus {p['focus']}, {p['sinks']} sink, "
                      f"seed {p['seed']}, T = {T}"), "tau": p["tau"],
            "union": observed_union_max(tr, p["rho"], p["W"], p["tau"]),
            "chain_violations": len(persistence_violations(tr, p["rho"], p["W"], p["tau"], chain=True))}


def fig11_overlay(sizes: dict) -> dict:
    t = cached(typical_regret_table, T=sizes["T"], k=sizes["k"])
    k = sizes["k"]
    holds = t["union"] <= k - 1 and not t["chain_violations"]
    premise = (f"Theorem 4's corrected premise {'holds' if holds else 'fails'} on this trace: the heavy sets of the "
               f"last W rows cover {t['union']} tokens (at most k - 1 = {k - 1} needed) and chain persistence has "
               f"{t['chain_violations']} violations.")
    return {"regret": t["regret"], "signal": t["signal"],
            "reference": {"exact NM optimum (min-cost flow)": t["optimum"],
                          f"Theorem 4 bound for R-LRU-H, sum of M_t(tau = {t['tau']:g})": t["bound"]},
            "k": k, "trace": t["trace"], "notes": [premise]}


# ---------------------------------------------------------------------------------------------------------------------
# Figure 13: R-LRU-H on stationary Zipf rows, against the tail mass; LRU and ACC on the same rows
# ---------------------------------------------------------------------------------------------------------------------


def tail_regret_table(budgets: tuple[int, ...], extra: int, exponents: tuple[float, ...] = FIG13_EXPONENTS) -> Table:
    """Mean per-step NM regret on stationary Zipf(s) rows over n = FIG13_TOKENS tokens, measured over the ``extra``
    rows after the n-th, with the unstored tail (ranks > 2k) counted as lost.  R-LRU-H runs at the tau whose heavy
    set is the top k ranks (the union then fills the budget, and arrivals, which carry no mass, are dropped); LRU and
    ACC (the attention-count LFU) at their defaults.  Each row's bound is ``M_tail(s, k)``, the best any k tokens can
    do on these rows."""
    table = Table("fig13-tail-regret", "per-step regret of R-LRU-H <= M_tail(s, k) on stationary Zipf rows")
    for k in budgets:
        for s in exponents:
            tr = stationary_zipf_trace(FIG13_TOKENS, s, extra, 2 * k)
            w = zipf_weights(FIG13_TOKENS, s)
            bound = float(w[k:].sum())
            tau = float(w[k - 1]) / 0.5 * (1 - 1e-9)   # rho tau = weight of rank k: the k heaviest tokens
            for name, params in (("R-LRU-H", {"rho": 0.5, "tau": min(tau, 1.0), "W": 4}), ("LRU", {}), ("ACC", {})):
                res = run_nm(policies.make(name, **params), tr, k, record=True)
                lost = float((res.per_step[FIG13_TOKENS:] + tr.residual[FIG13_TOKENS:]).mean())
                table.add(Row(table.result, name, "nm", f"stationary zipf s={s:g}", k, k, lost, bound, lost / bound,
                              bound, lost <= bound * (1 + 1e-9) if name == "R-LRU-H" else None,
                              params={"s": s, "n": FIG13_TOKENS, "extra": extra}))
    return table


def fig13_overlay(sizes: dict) -> dict:
    table = cached(tail_regret_table, budgets=sizes["budgets"], extra=sizes["extra"])
    return {"points": [{"s": r.params["s"], "k": r.k, "regret_per_step": r.alg_cost, "policy": r.policy,
                        "label": f"measured {r.policy}" + ("" if r.policy == "R-LRU-H" else " (reference)")}
                       for r in table.rows]}


# ---------------------------------------------------------------------------------------------------------------------
# Seed 002 (claims blk-*): the block study
# ---------------------------------------------------------------------------------------------------------------------


def seed002_overlay(sizes: dict) -> dict:
    """Every experiment workload of :func:`run_block_study` (not the positive controls) under the page's reading of
    an unattended step (:data:`theorems.results.blocks.PAGE_READING`): its alpha sweep with LRU, LFU and Belady's
    upper bound from the same run, and its persistence ablation; the other reading's spread as a sentence.
    ``sizes["study"]`` is a study profile or its name (the name gives the memoized run the blk-* claims read,
    :func:`theorems.results.blocks.block_study`); ``sizes["workloads"]``, if given, the study's workloads."""
    extra = {"workloads": sizes["workloads"]} if "workloads" in sizes else {}
    s = cached(run_block_study, profile=sizes["study"], **extra)
    reading = PAGE_READING
    sweeps, persistence, notes = {}, {}, []
    for name, w in s["workloads"].items():
        if w["role"] != "experiment":
            continue
        label = f"{name} workload, {w['capacity_blocks']} blocks, '{reading}' reading"
        if reading in w["alpha_sweep"]:
            rows = w["alpha_sweep"][reading]["rows"]
            refs = w["references"]
            sweeps[label] = {"alpha_sweep": {str(r["params"]["alpha"]): 100 * r["hit_rate"] for r in rows
                                             if "alpha" in r["params"]},
                             "reference": {"LRU": 100 * refs["LRU"]["hit_rate"], "LFU": 100 * refs["LFU"]["hit_rate"]},
                             "bound": 100 * refs["Belady"]["hit_rate"]}
        if reading in w["persistence"]:
            persistence[name] = {_short_policy(r["policy"]): {"reset": 100 * r["plain_hit_rate"],
                                                               "persistent": 100 * r["persistent_hit_rate"]}
                                 for r in w["persistence"][reading]["rows"]}
        for other, sweep in w["alpha_sweep"].items():
            if other != reading:
                rates = [100 * r["hit_rate"] for r in sweep["rows"] if "alpha" in r["params"]]
                notes.append(f"Under the '{other}' reading the {name} workload's alpha sweep spans "
                             f"{max(rates) - min(rates):.2f} points.")
    return {"sweeps": sweeps, "persistence": persistence, "notes": notes}


def _short_policy(label: str) -> str:
    """"EMA-Block(alpha=0.01, beta=0.001, ...)" -> "EMA alpha=0.01"; other labels unchanged."""
    return label if "alpha=" not in label else "EMA alpha=" + label.split("alpha=")[1].split(",")[0].rstrip(")")


# ---------------------------------------------------------------------------------------------------------------------
# Budgets across heads (claim static-vs-coupled): regret against total budget per allocation
# ---------------------------------------------------------------------------------------------------------------------


def alloc_overlay(sizes: dict) -> dict:
    """The claim's rows of :func:`allocation_study` on complete rows (its own reading): uniform, static-optimal and
    dynamic-coupled regret per budget."""
    z = sizes["alloc"]
    s = cached(allocation_study, per_head_ks=tuple(z["per_head_ks"]), dp_per_head=z["dp_per_head"],
               curve_steps=sizes["curve"]["curve_steps"], rows="complete")
    return {"budgets": [r["B"] for r in s["rows"]], "uniform": [r["uniform"] for r in s["rows"]],
            "static": [r["static"] for r in s["rows"]], "dynamic": [r["dynamic"] for r in s["rows"]],
            "heads": s["heads"], "trace": f"{s['traces']}: {s['heads']} KV heads, T = {s['T']}, "
                                          f"exact certified flows, complete rows"}


# Quality floors against working sets (claims quality-floor-working-set, adaptive-budget-quality, long-range-floor):
# the committed sweep, read without torch

def workingset_overlay(sizes: dict) -> dict | None:
    """The committed table of :mod:`theorems.results.workingset`: each counted prompt's working set, each policy's
    floors, and the heterogeneous mix's passing prompts fixed against adaptive; None without the committed data."""
    t = cached(W.committed_table)
    if t is None:
        return None
    opt = [W.floor_number(t["floors"]["OPT"][q]) for q in t["counted"]]
    rho = W.spearman([t["prompts"][q]["ws"] for q in t["counted"]], opt)
    return {"grid": t["grid"], "prompts": [{"name": q, "group": t["prompts"][q]["group"], "ws": t["prompts"][q]["ws"]}
                                          for q in t["counted"]],
            "floors": t["floors"], "adaptive": W.hetero_passing(t), "fixed": "/".join(map(str, W.FIXED)),
            "notes": [f"{len(t['counted'])} prompts the full cache answers; Spearman's rho of the optimum's floor "
                      f"against the working set: {'n/a' if rho is None else f'{rho:.3g}'}."]}


def fig14m_overlay(sizes: dict) -> dict:
    """Figure 14 measured: the committed sweep's points (:func:`theorems.results.benchmark.fig14_points`)."""
    from .benchmark import fig14_points

    return fig14_points()


def bench_overlay(sizes: dict) -> dict:
    """The tracking benchmark and the optimum's blind spot: from the tables of claims ``tracking-benchmark`` and
    ``opt-blind-spot`` (the committed sweep)."""
    from ..claims.benchmark import tracking_table
    from ..claims.blind_spot import blind_spot_table

    t, b = cached(tracking_table), cached(blind_spot_table)
    rules = [{"rule": r, "budget": int(k.split("=")[1]), "easy_gap": s["easy"]["rules"][r]["gap_answer"],
              "hard_dnll": s["hard"]["rules"][r]["dnll_answer"]}
             for k, s in t["sets"].items() for r in s["easy"]["rules"] if r in s["hard"]["rules"]]
    cases = [{"case": f"{c['prompt']} K={c['budget']}", "opt_dnll": c["opt"]["dnll_answer"],
              "best_dnll": min(m["dnll_answer"] for m in c["rules"].values())} for c in b["cases"]]
    return {"rules": rules, "cases": cases}


OVERLAYS = {"7": fig7_overlay, "8": fig8_overlay, "9": fig9_overlay, "11": fig11_overlay, "13": fig13_overlay,
            "seed002": seed002_overlay, "alloc": alloc_overlay, "workingset": workingset_overlay, "14m": fig14m_overlay,
            "bench": bench_overlay, **QUALITY_OVERLAYS}


def figure_data(fig_id: str, profile: Profile, sizes: dict | None = None) -> dict | None:
    """The measured overlay of figure ``fig_id`` at ``profile``'s sizes (or at ``sizes``), or None when it is
    formula-only."""
    make = OVERLAYS.get(str(fig_id))
    return None if make is None else make(overlay_sizes(fig_id, profile) if sizes is None else sizes)

