"""The real-trace report: every measurement of :mod:`realtrace.analysis` and both experiments of
:mod:`realtrace.experiments` on one trace set, as a dict (for JSON and for ``paper_check``) and as plain text.

Its command line is :mod:`realtrace.report_cli` (``python -m realtrace report [DIR] [--budget K ...] [--json FILE]``).
"""

from __future__ import annotations

import numpy as np

from . import analysis as an
from .experiments import alpha_beta_sweep, section11, section11_windows
from .traceset import TraceSet

ALPHAS = (0.5, 0.3, 0.15, 0.05, 0.01, 0.003, 0.001)  # the figure page's alpha values
BETAS = (1e-4, 1e-3, 1e-2, 1e-1)


def real_trace_report(ts: TraceSet, source_note: str, budgets=(32, 64, 128), tau: float = 0.05, rho: float = 0.5,
                      W: int = 32, n_sink: int = 4, block_capacity: int = 10, theta: float = 0.05,
                      seeds: int = 5) -> dict:
    """All measurements on every trace of ``ts`` (parameters are stated in the returned dict)."""
    out = {"source": source_note, "traceset": ts.source, "T": ts.T, "segments": ts.segments,
           "params": {"budgets": list(budgets), "tau": tau, "rho": rho, "W": W, "n_sink": n_sink,
                      "block_capacity": block_capacity, "theta": theta, "seeds": seeds},
           "traces": {}}
    benign, suffix, sleeper = section11_windows(ts)
    sweeps = []
    for name in ts.names():
        tr = ts.traces[name]
        heavy = an.heavy_set_sizes(tr, tau)
        frac, n_heavy = an.persistence_fraction(tr, tau, rho, W)
        entry = {
            "layer": ts.layers[name], "head": ts.heads[name],
            "stored_mass": tr.total_mass(), "residual_mean": float(tr.residual.mean()),
            "sink_mass_mean": float(an.sink_mass(tr, n_sink).mean()),
            "heavy_size_mean": float(heavy.mean()), "heavy_size_max": int(heavy.max()),
            "persistent_fraction": frac, "heavy_entries": n_heavy,
            "W_for_q90": an.persistence_window(tr, tau, rho, 0.9),
            "W_for_q100": an.persistence_window(tr, tau, rho, 1.0),
            "rho_at_W_q90": an.persistence_rho(tr, tau, W, 0.9),
            "rho_at_W_q100": an.persistence_rho(tr, tau, W, 1.0),
            "budgets": {},
        }
        for k in budgets:
            rows, _, opt = an.replay_all(tr, k, seeds=seeds)
            thm = an.theorem4_check(tr, k, rho, W, opt)
            entry["budgets"][k] = {"opt_regret": opt, "theorem4": thm.as_dict(),
                                   "replay": [r.as_dict() for r in rows]}
        entry["section11"] = [r.as_dict() for r in section11(tr, budgets, benign, suffix, sleeper)]
        sweep = alpha_beta_sweep(tr, block_capacity, ALPHAS, BETAS, theta)
        entry["alpha_beta"] = sweep
        sweeps.append(sweep)
        out["traces"][name] = entry
    out["alpha_beta_mean"] = {"alphas": list(ALPHAS), "betas": list(BETAS),
                              "hit_rate": np.mean([s["hit_rate"] for s in sweeps], axis=0).tolist(),
                              "lru_hit_rate": float(np.mean([s["lru_hit_rate"] for s in sweeps])),
                              "opt_hit_rate": float(np.mean([s["opt_hit_rate"] for s in sweeps]))}
    return out


def _fmt(x) -> str:
    return "inf" if x == float("inf") else f"{x:.3g}"


def format_report(rep: dict) -> str:
    """Plain-text tables of :func:`real_trace_report`'s dict."""
    p = rep["params"]
    lines = [f"Real attention traces: {rep['source']}", f"trace set {rep['traceset']}, T = {rep['T']} steps, "
             f"segments {rep['segments']}",
             f"tau = {p['tau']}, rho = {p['rho']}, W = {p['W']}, sinks = first {p['n_sink']} tokens", "",
             "trace    sink  resid  |H|mean |H|max  persist(heavy)   W(q=.9) W(q=1)  rho(q=.9) rho(q=1)"]
    for name, e in rep["traces"].items():
        lines.append(f"{name:8s} {e['sink_mass_mean']:.3f} {e['residual_mean']:.3f}  {e['heavy_size_mean']:6.2f} "
                     f"{e['heavy_size_max']:6d}  {e['persistent_fraction']:.4f} ({e['heavy_entries']:5d})  "
                     f"{_fmt(e['W_for_q90']):>7s} {_fmt(e['W_for_q100']):>6s}  {_fmt(e['rho_at_W_q90']):>8s} "
                     f"{_fmt(e['rho_at_W_q100']):>8s}")
    lines += ["", "Theorem 4 (Section 7 recipe): tau*, union, tail mass (stored / +residual), R-LRU-H regret, "
              "premise, bound"]
    for name, e in rep["traces"].items():
        for k, b in e["budgets"].items():
            t = b["theorem4"]
            lines.append(f"{name:8s} k={k:<4} tau*={t['tau_star']:.4f} union={t['max_union']:4d} "
                         f"tail={t['tail_stored']:8.3f}/{t['tail_with_residual']:8.3f} "
                         f"R-LRU-H={t['rlruh_regret']:8.3f} OPT={t['opt_regret']:8.3f} "
                         f"premise={'yes' if t['premise_holds'] else 'no '} "
                         f"bound={'held' if t['bound_holds'] else 'FAILED'}")
    names = sorted({r["policy"] for e in rep["traces"].values() for b in e["budgets"].values() for r in b["replay"]})
    for k in p["budgets"]:
        lines += ["", f"NM tracking gap regret(ALG) - regret(OPT) at k = {k} (stored mass; rows = traces)",
                  "trace      OPT    " + " ".join(f"{n[:9]:>9s}" for n in names)]
        for name, e in rep["traces"].items():
            b = e["budgets"][k]
            gaps = {r["policy"]: r["tracking_gap"] for r in b["replay"]}
            lines.append(f"{name:8s} {b['opt_regret']:7.3f} " + " ".join(f"{gaps.get(n, float('nan')):9.3f}"
                                                                        for n in names))
    lines += ["", "Section 11: gap per step on the benign window vs the recall suffix (sleeper kept = share of the "
              "suffix's attention on the code tokens that was resident)"]
    for name, e in rep["traces"].items():
        for r in e["section11"]:
            if r["policy"] == "OPT":
                continue
            kept = ("" if r["sleeper_kept"] is None else
                    f" sleeper kept {r['sleeper_kept']:.3f} of {r['sleeper_mass_per_step']:.4f}/step")
            lines.append(f"{name:8s} k={r['k']:<4} {r['policy']:13s} {r['window']:6s} "
                         f"regret/step={r['regret_per_step']:.4f} gap/step={r['gap_per_step']:.4f}{kept}")
    ab = rep["alpha_beta_mean"]
    lines += ["", f"alpha x beta sweep (blocks of 16, capacity {p['block_capacity']} blocks, theta {p['theta']}): "
              f"read hit rate, mean over traces; LRU {ab['lru_hit_rate']:.4f}, OPT {ab['opt_hit_rate']:.4f}",
              "alpha\\beta " + " ".join(f"{b:>8g}" for b in ab["betas"])]
    for a, row in zip(ab["alphas"], ab["hit_rate"]):
        lines.append(f"{a:<10g} " + " ".join(f"{h:8.4f}" for h in row))
    return "\n".join(lines)
