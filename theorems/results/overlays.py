"""Measured overlays of the figures: figure id -> the data its builder draws over the formula.

Formats are documented per figure in ``figures.FIGURES[id].data_doc``.  Every overlay is computed from the same
memoized tables the claims read where there is one (:func:`theorems.tables.cached`), and each declares its sizes per
run profile in :data:`SIZES` (quick value, full value).
"""

from __future__ import annotations

import numpy as np

import policies
from adversary import (cyclic_k_plus_one, decoy_and_sleeper, decoy_and_sleeper_roles, persistent_attention,
                       stationary_zipf_trace, zipf_weights)
from kvcore.engine import run_nm
from kvcore.measure import measure, ratio
from kvcore.optima import belady

from ..profile import Profile
from ..tables import cached
from .blocks import block_study
from .classic import eq6_table, uniform_limit_table

# Figure 13's context length n (its caption, figures.analytic.FIG13_N).
FIG13_TOKENS = 4096

SIZES = {
    "7": {"k": (16, 16), "cycles": (200, 1000)},
    "8": {"ks": ((2, 4, 8, 16), (2, 4, 8, 16, 32, 64)), "T_per_k2": (20, 20), "uniform_T": (8000, 40000),
          "uniform_seeds": (6, 16)},
    "9": {"k": (4, 4), "suffix": (18, 40)},
    "11": {"T": (500, 2000), "k": (24, 64)},
    "13": {"budgets": ((64,), (64, 256)), "extra": (50, 200)},
}


def _sizes(fig_id: str, profile: Profile) -> dict:
    return {name: pair[1 if profile.name == "full" else 0] for name, pair in SIZES.get(fig_id, {}).items()}


def _fig7(z: dict, profile: Profile) -> dict:
    """Landlord's measured ratio against OPT_h on the cyclic k+1 sequence (its worst case), every h."""
    k = z["k"]
    trace = cyclic_k_plus_one(k, z["cycles"] * (k + 1))
    cost = measure(policies.resolve("Landlord"), trace, k, with_opt=False).cost
    return {"points": [{"k": k, "h": h, "ratio": ratio(cost, belady(trace, h).cost), "label": "Landlord, measured"}
                       for h in range(1, k + 1)]}


def _fig8(z: dict, profile: Profile) -> dict:
    """Measured ratios vs k: LRU on the adaptive adversary (deterministic) and Marking on uniform k+1 (randomized)."""
    det = cached(eq6_table, ks=z["ks"], T_per_k2=z["T_per_k2"], names=("LRU",))
    rnd = cached(uniform_limit_table, ks=z["ks"], T=z["uniform_T"], seeds=z["uniform_seeds"])
    pts = [{"k": r.k, "ratio": r.ratio, "label": "LRU on the adaptive adversary"} for r in det.rows]
    pts += [{"k": r.k, "ratio": r.ratio, "ci_low": r.ci_low, "ci_high": r.ci_high,
             "label": "Marking on uniform k+1 (mean, 95% CI)"} for r in rnd.rows if r.policy == "Marking"]
    return {"points": pts}


def _fig9(z: dict, profile: Profile) -> dict:
    """The generator's decoy-and-sleeper trace (filler-first) and the step at which ACC drops the sleeper."""
    k = z["k"]
    tr = decoy_and_sleeper(k, 0.05, z["suffix"])
    roles = decoy_and_sleeper_roles(k)
    res = run_nm(policies.make("ACC"), tr, k, record=True)
    step = next(t for t, i in res.evictions if i == roles.sleeper)
    return {"attention": tr.to_dense().tolist(),
            "tokens": {"decoy (each)": list(roles.decoys), "sleeper": roles.sleeper, "filler": roles.filler},
            "evict_step": int(step), "evicted": "sleeper", "gamma": 0.8}


def _fig11(z: dict, profile: Profile) -> dict:
    """Cumulative NM regret of the policy families on a (rho, W)-persistent Zipf-focus trace."""
    tr = persistent_attention(z["T"], 0.5, 16, 0.05, focus=16, sinks=1, seed=0)
    out = {}
    for label, name, params in (("LRU (recency)", "LRU", {}), ("ACC (undecayed heavy hitters)", "ACC", {}),
                                ("DecayedACC gamma=0.9", "DecayedACC", {"gamma": 0.9}), ("GD-A", "GD-A", {}),
                                ("R-LRU-H", "R-LRU-H", {"rho": 0.5, "tau": 0.05, "W": 16})):
        ps = run_nm(policies.make(name, **params), tr, z["k"], record=True).per_step
        out[label] = np.cumsum(ps).tolist()
    return {"regret": out}


def _fig13(z: dict, profile: Profile) -> dict:
    """R-LRU-H per-step regret on stationary Zipf(s) rows over n = 4096 tokens, at the tau whose heavy set is the
    top k ranks (the union then fills the budget, and arrivals, which carry no mass, are dropped); measured over
    the ``extra`` rows after the n-th, with the unstored tail (ranks > 2k) counted as lost."""
    pts = []
    for k in z["budgets"]:
        for s in (0.8, 1.2, 1.6):
            tr = stationary_zipf_trace(FIG13_TOKENS, s, z["extra"], 2 * k)
            w = zipf_weights(FIG13_TOKENS, s)
            tau = float(w[k - 1]) / 0.5 * (1 - 1e-9)   # rho tau = weight of rank k: the k heaviest tokens
            res = run_nm(policies.make("R-LRU-H", rho=0.5, tau=min(tau, 1.0), W=4), tr, k, record=True)
            tail = res.per_step[FIG13_TOKENS:] + tr.residual[FIG13_TOKENS:]
            pts.append({"s": s, "k": k, "regret_per_step": float(tail.mean()),
                        "label": "measured R-LRU-H (unstored tail counted lost)"})
    return {"points": pts}


def _seed002(z: dict, profile: Profile) -> dict:
    """The alpha sweep and persistence ablation measured on the toolkit's block workload (LRFU reading)."""
    s = block_study(profile.name)
    sweep = s["alpha_sweep"]["decay"]["rows"]
    pers = s["persistence"]["decay"]["rows"]

    def short(label: str) -> str:  # "EMA-Block(alpha=0.01, beta=0.001, ...)" -> "EMA alpha=0.01"
        return label if "alpha=" not in label else "EMA alpha=" + label.split("alpha=")[1].split(",")[0].rstrip(")")

    return {"alpha_sweep": {str(r["params"]["alpha"]): 100 * r["hit_rate"] for r in sweep if "alpha" in r["params"]},
            "persistence": {short(r["policy"]): {"reset": 100 * r["plain_hit_rate"],
                                                 "persistent": 100 * r["persistent_hit_rate"]} for r in pers},
            "label": f"toolkit block workload, {s['capacity_blocks']} blocks (32 GiB), {s['profile']['name']}"}


OVERLAYS = {"7": _fig7, "8": _fig8, "9": _fig9, "11": _fig11, "13": _fig13, "seed002": _seed002}


def figure_data(fig_id: str, profile: Profile) -> dict | None:
    """The measured overlay of figure ``fig_id`` at ``profile``'s sizes, or None when it is formula-only."""
    make = OVERLAYS.get(str(fig_id))
    return None if make is None else make(_sizes(str(fig_id), profile), profile)
