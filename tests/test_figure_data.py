"""What each figure plots is what the claims computed: every measured series read back from the drawn artists
(``figure.plotted``) equals the rows of the table it came from (the same memoized tables the claims read,
:mod:`theorems.results`), and every formula curve a measured series is compared with is drawn for the same
parameters.  The overlays run here at small sizes through the same functions ``python -m paper_check`` calls.

A figure that plots the wrong series -- another policy's rows, the bound instead of the measurement, a column
shifted by one -- fails one of these tests (see the report of issue 17 for the mutation seen failing).
"""

import numpy as np
import pytest

import policies
from adversary import decoy_and_sleeper, decoy_and_sleeper_roles, persistent_attention
from figures import render
from kvcore.engine import run_nm
from kvcore.formulas import GUARANTEES, landlord_bound, zipf_tail_mass
from theorems.results.allocation import allocation_study
from theorems.results.blocks import PAGE_READING, WORKLOADS, StudyProfile, run_block_study
from theorems.results.classic import cyclic_table, eq6_table, eq8_table, marking_table
from theorems.results.overlays import (FIG11_TRACE, FIG13_TOKENS, alloc_overlay, fig7_overlay, fig8_overlay, fig9_overlay,
                                       fig11_overlay, fig11_policies, fig13_overlay, ratio_interval, seed002_overlay,
                                       tail_regret_table, typical_regret_table)
from theorems.tables import cached


def _series(plotted: dict, prefix: str) -> dict:
    return {key: value for key, value in plotted.items() if key.startswith(prefix)}


# -- Figure 7: claim eq8-landlord's tables ---------------------------------------------------------------------------

EQ8 = {"ks": (2, 3, 5), "T": 60, "seeds": 1, "T_cycles": 12}


def test_fig7_plots_the_cyclic_rows_and_landlords_worst_seeded_ratio():
    plotted = render("7", fig7_overlay({"eq8": EQ8})).plotted
    cyc = cached(cyclic_table, ks=EQ8["ks"], T_cycles=EQ8["T_cycles"])
    eq8 = cached(eq8_table, ks=EQ8["ks"], T=EQ8["T"], seeds=EQ8["seeds"])
    cyclic = _series(plotted, "measured/LRU = FIFO on cyclic")
    assert len(cyclic) == len(EQ8["ks"])   # LRU and FIFO fault on every request: one shared series per k
    landlord = _series(plotted, "measured/Landlord")
    for k in EQ8["ks"]:
        (series,) = [v for key, v in cyclic.items() if key.endswith(f"/k={k}")]
        for policy in ("LRU", "FIFO"):
            rows = sorted((r for r in cyc.rows if r.k == k and r.policy == policy), key=lambda r: r.h)
            assert series["y"] == pytest.approx([r.ratio for r in rows], rel=1e-12)
            assert series["x"] == pytest.approx([r.h / k for r in rows])
        (worst,) = [v for key, v in landlord.items() if key.endswith(f"/k={k}")]
        want = [max(r.ratio for r in eq8.rows if r.policy == "Landlord" and r.k == k and r.h == h)
                for h in range(1, k + 1)]
        assert worst["y"] == pytest.approx(want, rel=1e-12)
        # the curve every measured point of this k is read against, at every integer h
        assert plotted[f"bound/k={k}"]["y"] == pytest.approx([landlord_bound(k, h) for h in range(1, k + 1)])
        assert plotted[f"bound/k={k}"]["x"] == pytest.approx([h / k for h in range(1, k + 1)])


# -- Figure 8: claims eq6-det-lower-bound and eq9-randomized ---------------------------------------------------------

EQ6 = {"ks": (2, 3), "T_per_k2": 6}
EQ9 = {"ks": (2, 3), "phases": 6, "marking_seeds": 3, "uniform_T": 100, "uniform_seeds": 2}


def test_fig8_plots_the_best_deterministic_ratio_and_every_randomized_row():
    plotted = render("8", fig8_overlay({"eq6": EQ6, "eq9": EQ9})).plotted
    det = cached(eq6_table, ks=EQ6["ks"], T_per_k2=EQ6["T_per_k2"])
    (best,) = _series(plotted, "measured/smallest of").values()
    assert best["x"] == list(EQ6["ks"])
    assert best["y"] == pytest.approx([min(r.ratio for r in det.rows if r.k == k) for k in EQ6["ks"]], rel=1e-12)
    rnd = cached(marking_table, ks=EQ9["ks"], phases=EQ9["phases"], seeds=EQ9["marking_seeds"])
    declared = {i.name for i in policies.all_policies("rm", deterministic=False)
                if i.guarantee is not None and GUARANTEES[i.guarantee].expectation}
    assert {r.policy for r in rnd.rows} == declared          # selected by metadata: OnlineMin among them
    assert "OnlineMin" in declared
    drawn = 0
    for r in rnd.rows:
        workload = r.workload.replace(f"={r.k}", "=k") if r.workload.endswith(f"={r.k}") else r.workload
        series = plotted[f"measured/{r.policy}/{workload}"]
        i = series["k"].index(r.k)
        lo, hi = ratio_interval(r)
        assert series["y"][i] == pytest.approx(r.ratio, rel=1e-12)
        assert (series["low"][i], series["high"][i]) == pytest.approx((lo, hi), rel=1e-12)
        assert lo <= r.ratio <= hi
        drawn += 1
    assert drawn == sum(len(v["y"]) for v in _series(plotted, "measured/").values()) - len(best["y"])
    span = range(min(EQ9["ks"]), max(EQ9["ks"]) + 1)
    for name in {policies.get(p).guarantee for p in declared} | {"H_k"}:
        assert plotted[f"guarantee/{name}"]["y"] == pytest.approx([GUARANTEES[name].value(k) for k in span])


# -- Figure 9: the generator's construction and ACC's measured eviction ------------------------------------------------


def test_fig9_plots_the_generated_rows_and_the_measured_eviction():
    k, suffix = 3, 6
    plotted = render("9", fig9_overlay({"k": k, "suffix": suffix})).plotted
    trace = decoy_and_sleeper(k, 0.05, suffix).to_dense()
    roles = decoy_and_sleeper_roles(k)
    assert plotted["mass/sleeper"]["y"] == pytest.approx(trace[:, roles.sleeper].tolist())
    assert plotted["mass/filler"]["y"] == pytest.approx(trace[:, roles.filler].tolist())
    assert plotted["mass/decoy (each)"]["y"] == pytest.approx(trace[:, list(roles.decoys)].mean(axis=1).tolist())
    assert plotted["arrival/filler"]["x"] == [roles.filler] * 2
    assert plotted["arrival/sleeper"]["x"] == [roles.sleeper] * 2
    res = run_nm(policies.make("ACC"), decoy_and_sleeper(k, 0.05, suffix), k, record=True)
    evict = min(t for t, i in res.evictions if i == roles.sleeper)
    assert plotted["unobserved/sleeper"]["x"][0] == evict
    # the observed undecayed score of the sleeper freezes at its priming mass from the eviction on
    assert plotted["score/sleeper/gamma=1"]["y"][evict:] == pytest.approx([0.05] * (len(trace) - evict))


# -- Figure 11: every deterministic NM policy by its declared signal, with the exact optimum ---------------------------

FIG11 = {"T": 90, "k": 10}


def test_fig11_plots_every_policy_once_in_its_signal_panel():
    plotted = render("11", fig11_overlay(FIG11)).plotted
    table = cached(typical_regret_table, T=FIG11["T"], k=FIG11["k"])
    signal = fig11_policies()
    assert set(signal) == {i.name for i in policies.all_policies("nm", deterministic=True)
                           if i.signal in ("recency", "importance", "hybrid")}
    measured = _series(plotted, "measured/")
    for name, family in signal.items():
        owners = [key for key in measured if name in key.split("/")[2].split(" = ")]
        assert owners and all(key.startswith(f"measured/{family}/") for key in owners), name
        (key,) = owners
        assert measured[key]["y"] == pytest.approx(table["regret"][name], rel=1e-12)
    # an independent run of one policy on the same trace gives the same curve
    p = FIG11_TRACE
    trace = persistent_attention(FIG11["T"], p["rho"], p["W"], p["tau"], focus=p["focus"], sinks=p["sinks"],
                                 seed=p["seed"])
    lru = np.cumsum(run_nm(policies.make("LRU"), trace, FIG11["k"], record=True).per_step)
    (lru_key,) = [key for key in measured if "LRU" in key.split("/")[2].split(" = ")]
    assert measured[lru_key]["y"] == pytest.approx(lru.tolist(), rel=1e-12)
    optimum = plotted["reference/recency/exact NM optimum (min-cost flow)"]["y"]
    assert optimum == pytest.approx(table["optimum"])
    assert all(optimum[-1] <= v[-1] + 1e-9 for v in table["regret"].values())   # nobody beats the optimum
    # the stylized panel is drawn at its own parameters, which the caption states
    assert plotted["model/recency"]["y"][-1] == pytest.approx(500 * (1 - 128 / 1024))


# -- Figure 13: R-LRU-H against the tail mass, with the references -----------------------------------------------------


def test_fig13_plots_the_table_rows_against_the_bound_for_their_k():
    sizes = {"budgets": (16,), "extra": 8}
    table = cached(tail_regret_table, budgets=sizes["budgets"], extra=sizes["extra"])
    plotted = render("13", fig13_overlay(sizes)).plotted
    for name in ("R-LRU-H", "LRU", "ACC"):
        rows = sorted((r for r in table.rows if r.policy == name), key=lambda r: r.params["s"])
        series = plotted[f"measured/{name}/k=16"]
        assert series["x"] == [r.params["s"] for r in rows]
        assert series["y"] == pytest.approx([r.alg_cost for r in rows], rel=1e-12)
    for r in table.rows:
        assert r.bound == pytest.approx(zipf_tail_mass(r.params["s"], FIG13_TOKENS, r.k), rel=1e-12)
        assert r.alg_cost >= r.bound * (1 - 1e-9)          # no k tokens lose less than the tail
    assert all(r.holds for r in table.rows if r.policy == "R-LRU-H")
    assert "bound/k=16" in plotted


# -- Seed 002: the block study the blk-* claims read ------------------------------------------------------------


def test_seed002_plots_the_block_study_with_its_references():
    tiny = StudyProfile("tiny", serving_steps=600, anchored_steps=600, seeds=(0,))
    experiments = tuple(w for w in WORKLOADS if w.role == "experiment")
    study = cached(run_block_study, profile=tiny, workloads=experiments)
    plotted = render("seed002", seed002_overlay({"study": tiny, "workloads": experiments})).plotted
    assert len(_series(plotted, "sweep/")) == 1 + len(experiments)       # the page's bars and one per workload
    for w in experiments:
        table = study["workloads"][w.name]
        label = f"{w.name} workload, {w.capacity_blocks} blocks, '{PAGE_READING}' reading"
        rows = table["alpha_sweep"][PAGE_READING]["rows"]
        by_alpha = {r["params"]["alpha"]: 100 * r["hit_rate"] for r in rows if "alpha" in r["params"]}
        assert plotted[f"sweep/{label}"]["y"] == pytest.approx([by_alpha[a] for a in sorted(by_alpha)], rel=1e-12)
        refs = table["references"]
        want = [100 * refs["LFU"]["hit_rate"], 100 * refs["LRU"]["hit_rate"], 100 * refs["Belady"]["hit_rate"]]
        assert plotted[f"reference/{label}"]["y"] == pytest.approx(want, rel=1e-12)   # LFU, LRU, Belady bound
        assert want[2] >= max(plotted[f"sweep/{label}"]["y"] + want[:2]) - 1e-9     # no policy beats the bound
    pers = [r for w in experiments for r in study["workloads"][w.name]["persistence"][PAGE_READING]["rows"]]
    assert plotted["persistence/persistent"]["y"][-len(pers):] == pytest.approx(
        [100 * r["persistent_hit_rate"] for r in pers], rel=1e-12)
    assert plotted["persistence/reset"]["y"][-len(pers):] == pytest.approx(
        [100 * r["plain_hit_rate"] for r in pers], rel=1e-12)


# -- Budgets across heads: claim static-vs-coupled's study -----------------------------------------------------------


def test_alloc_plots_each_allocation_from_the_study():
    sizes = {"per_head_ks": (1, 2), "dp_per_head": 1}
    study = cached(allocation_study, **sizes, curve_steps=4, rows="complete")
    plotted = render("alloc", alloc_overlay({"alloc": sizes, "curve": {"curve_steps": 4}})).plotted
    for name in ("uniform", "static", "dynamic"):
        assert plotted[name]["x"] == [12.0, 24.0]
        assert plotted[name]["y"] == pytest.approx([r[name] for r in study["rows"]], rel=1e-12)
    # what the three lines must satisfy, independently of the study: the coupled optimum is below every static split
    assert all(d <= s <= u for d, s, u in zip(*(plotted[n]["y"] for n in ("dynamic", "static", "uniform"))))


# -- published numbers and tables ---------------------------------------------------------------------------------


def test_fig3_and_fig14_plot_the_published_numbers():
    from figures.published import budget_statements, operating_points
    from figures.published_data import points

    plotted = render("3").plotted
    gains = {(p["system"], p["value"]) for p in points("throughput_gain") + points("speedup")}
    drawn = {(p["system"], p["gain"]) for p in operating_points() if p["gain"] is not None}
    assert drawn == gains
    for p in operating_points():
        y = plotted[f"published/{p['n']}"]["y"][0]
        if p["gain"] is not None and p["memory"] is not None:
            assert (plotted[f"published/{p['n']}"]["x"][0], y) == (p["memory"], p["gain"])
    budgets = {p["value"] for p in points("budget_fraction")}
    fig14 = render("14").plotted
    shown = {v["x"][0] for key, v in fig14.items() if key.startswith("budget/")}
    assert budgets <= shown
    assert {v["x"][0] for key, v in fig14.items() if key.startswith("published/")} == shown
    assert len([key for key in fig14 if key.startswith("budget/")]) == sum(len(r["points"]) for r in
                                                                          budget_statements())
