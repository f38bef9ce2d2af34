"""The figure page's two simulated findings (seed 002), re-decided on block workloads where the effect can and cannot
appear, under both readings of an unattended step, with positive controls (:mod:`theorems.results.blocks`).

The page's traces are not available, so both are empirical, existential claims about data we do not have
(VERDICTS.md): a shape our best-faith experiment shows *holds*; one it does not show is *not-reproduced* when a
positive control -- a workload on which the same experiment, with the same statistic and thresholds, does detect
the effect -- passes, and *not-checkable* when none does.  Neither is refuted by a workload on which the effect
happens not to appear.  Readings (:data:`theorems.results.blocks.READINGS`): ``"decay"`` (LRFU: a score shrinks
every step its block is not read) and ``"hold"`` (the score is held until the block is read again); the claim's own
verdict is the one under ``"hold"``, the reading of the page's worked examples.  The decisions recompute the shape
statistics from the hit rates in the values (:func:`~theorems.results.blocks.sweep_shape`,
:func:`~theorems.results.blocks.persistence_effect`), so an edit of a hit rate moves the verdict.
"""

from __future__ import annotations

from figures.published_data import load_published
from theorems.results.blocks import (ALPHAS, READINGS, STUDY_SIZES, block_study,
                                     persistence_effect, sweep_shape)

from .registry import Computed, Context, Decision, claim, decides, edit, fmt

EVIDENCE = {"module": "theorems/results/blocks.py", "workloads": "adversary/block_workload.py"}


def page_numbers() -> dict:
    return load_published()["seed002_block_study"]


def _workload_header(w: dict) -> dict:
    return {"role": w["role"], "generator": w["generator"], "why": w["why"], "params": w["params"],
            "seeds": w["seeds"], "capacity_blocks": w["capacity_blocks"], "budget_gib": w["budget_gib"],
            "footprint_blocks_per_seed": [x["footprint_blocks"] for x in w["per_seed"]]}


def _pts(row: dict) -> float:
    return 100 * row["hit_rate"]


def _roles(v: dict, role: str) -> list[str]:
    return [name for name, w in v["workloads"].items() if w["role"] == role]


def _by_reading(v: dict, shown: dict[str, dict[str, bool]]) -> dict[str, str]:
    """Verdict per reading from which workloads show the effect (``shown[reading][workload]``): holds when an
    experiment shows it, not-reproduced when none does but a control does, not-checkable when no control does."""
    out = {}
    for r in v["readings"]:
        if any(shown[r][name] for name in _roles(v, "experiment")):
            out[r] = "holds"
        elif any(shown[r][name] for name in _roles(v, "control")):
            out[r] = "not-reproduced"
        else:
            out[r] = "not-checkable"
    return out


# --------------------------------------------------------------------------------------------------------------------
# blk-alpha-interior-optimum
# --------------------------------------------------------------------------------------------------------------------


@claim("blk-alpha-interior-optimum", "seed 002", "The block hit rate is non-monotone in alpha with an interior "
       "optimum near 0.05 (55.96% at 32 GiB, against 37.20% at 0.5 and 24.44% at 0.001), and does not converge onto "
       "LFU as alpha goes to 0.", sizes=STUDY_SIZES)
def alpha_optimum(ctx: Context) -> Computed:
    s = block_study(ctx.profile.name, ctx.sizes)
    workloads = {}
    for name, w in s["workloads"].items():
        if not w["alpha_sweep"]:
            continue
        workloads[name] = {**_workload_header(w), "belady_pts": _pts(w["references"]["Belady"]), "readings": {
            r: {"hit_rate_pts": {str(row["params"]["alpha"]): _pts(row) for row in sw["rows"]
                                 if "alpha" in row["params"]},
                "lru_pts": _pts(w["references"]["LRU"]), "lfu_pts": _pts(w["references"]["LFU"])}
            for r, sw in w["alpha_sweep"].items()}}
    return Computed(
        {"alphas": [str(a) for a in ALPHAS], "flat_pts": s["flat_pts"], "readings": list(READINGS),
         "page_reading": s["page_reading"], "beta": s["beta"], "profile": s["profile"], "workloads": workloads},
        {"hit_rate_percent": page_numbers()["alpha_sweep_hit_rate_percent"], "interior_optimum_near": 0.05,
         "converges_to_lfu": False},
        {"test": "tests/test_block_study.py", **EVIDENCE, "figure": ctx.figure_files("seed002")})


def _shape(v: dict, name: str, reading: str) -> dict:
    x = v["workloads"][name]["readings"][reading]
    return sweep_shape([x["hit_rate_pts"][a] for a in v["alphas"]], x["lru_pts"], x["lfu_pts"], v["flat_pts"],
                       tuple(v["alphas"]))


def _curve(v: dict, name: str, reading: str) -> str:
    x = v["workloads"][name]["readings"][reading]
    return ", ".join(f"{a}: {x['hit_rate_pts'][a]:.2f}" for a in v["alphas"]) + \
        f" (LRU {x['lru_pts']:.2f}, LFU {x['lfu_pts']:.2f}, Belady bound {v['workloads'][name]['belady_pts']:.2f})"


@decides("blk-alpha-interior-optimum", flips={
    "the anchored hold curve flat at LRU": (
        lambda v: edit(v, "workloads/anchored/readings/hold/hit_rate_pts",
                       lambda h: {a: v["workloads"]["anchored"]["readings"]["hold"]["lru_pts"] for a in h}),
        "not-reproduced"),
    "every hold curve flat at LRU, controls included": (
        lambda v: edit(v, "workloads", lambda ws: {n: {**w, "readings": {**w["readings"], "hold": {
            **w["readings"]["hold"], "hit_rate_pts": {a: w["readings"]["hold"]["lru_pts"]
                                                      for a in w["readings"]["hold"]["hit_rate_pts"]}}}}
            for n, w in ws.items()}), "not-checkable"),
    "the smallest alpha lands on LFU where the optimum shows": (
        lambda v: edit(v, "workloads/anchored/readings/hold/lfu_pts",
                       v["workloads"]["anchored"]["readings"]["hold"]["hit_rate_pts"][v["alphas"][-1]]),
        "holds-with-correction")})
def alpha_optimum_decide(v: dict, e: dict) -> Decision:
    """Per reading: an interior optimum shows on a workload when the best alpha of the grid is neither end and beats
    both ends by more than ``flat_pts`` points (:func:`~theorems.results.blocks.sweep_shape` on the hit rates).
    ``holds`` when an experiment workload shows it and, on every experiment that shows it, the smallest alpha's hit
    rate is nearer LRU's than LFU's (the page: no convergence onto LFU); ``holds-with-correction`` when it shows but
    the smallest alpha lands nearer LFU; ``not-reproduced`` when no experiment shows it but a control does;
    ``not-checkable`` when no control does either.  The claim's verdict is the one under ``page_reading``.  Flips:
    an experiment's margin over both ends crossing ``flat_pts``, a control's doing so, the smallest alpha's distance
    to LFU crossing its distance to LRU."""
    shapes = {r: {name: _shape(v, name, r) for name in v["workloads"]} for r in v["readings"]}
    shown = {r: {name: s["interior_optimum"] for name, s in shapes[r].items()} for r in v["readings"]}
    verdicts = _by_reading(v, shown)
    readings, corrections = {}, {}
    for r in v["readings"]:
        hits = [n for n in _roles(v, "experiment") if shown[r][n]]
        onto_lfu = [n for n in hits if shapes[r][n]["smallest_alpha_closer_to"] == "LFU"]
        if onto_lfu:
            verdicts[r] = "holds-with-correction"
            corrections[r] = "; ".join(
                f"on {n} the smallest alpha ({v['alphas'][-1]}) is "
                f"{abs(shapes[r][n]['smallest_alpha_minus_lfu_pts']):.2f} points from LFU and "
                f"{abs(shapes[r][n]['smallest_alpha_minus_lru_pts']):.2f} from LRU: it does converge toward LFU"
                for n in onto_lfu)
        parts = []
        for n in v["workloads"]:
            s = shapes[r][n]
            where = (f"interior optimum at alpha = {fmt(s['best_alpha'])} ({s['best_hit_rate_pts']:.2f}%, "
                     f"{s['interior_margin_pts']:.2f} points over the better end, {s['best_minus_lru_pts']:+.2f} "
                     f"over LRU)" if s["interior_optimum"] else
                     f"no interior optimum (best alpha {fmt(s['best_alpha'])}, margin "
                     f"{s['interior_margin_pts']:.2f} points, spread {s['spread_pts']:.2f})")
            parts.append(f"{n} ({v['workloads'][n]['role']}): {where}; smallest alpha "
                         f"{s['smallest_alpha_minus_lru_pts']:+.2f} from LRU, {s['smallest_alpha_minus_lfu_pts']:+.2f} "
                         f"from LFU [{_curve(v, n, r)}]")
        readings[r] = {"verdict": verdicts[r], "finding": "; ".join(parts)}
    own = v["page_reading"]
    best = max((n for n in _roles(v, "experiment") if shown[own][n]),
               key=lambda n: shapes[own][n]["interior_margin_pts"], default=None)
    head = (f"Under the '{own}' reading (the page's worked examples hold a block's score while it is not read), "
            f"the verdict is {verdicts[own]}: ")
    if best is not None:
        s = shapes[own][best]
        head += (f"on the {best} workload the hit rate peaks at alpha = {fmt(s['best_alpha'])} "
                 f"({s['best_hit_rate_pts']:.2f}%, the page's optimum is at {fmt(e['interior_optimum_near'])}), "
                 f"{s['interior_margin_pts']:.2f} points above the better end of the grid, and the smallest alpha "
                 f"is {abs(s['smallest_alpha_minus_lru_pts']):.2f} points from LRU and "
                 f"{abs(s['smallest_alpha_minus_lfu_pts']):.2f} from LFU.")
    else:
        controls = [n for n in _roles(v, "control") if shown[own][n]]
        head += ("no experiment workload shows an interior optimum" +
                 (f"; the positive control{'s' if len(controls) > 1 else ''} {', '.join(controls)} "
                  f"{'do' if len(controls) > 1 else 'does'}." if controls else ", and no positive control does."))
    others = []
    for r in (r for r in v["readings"] if r != own):
        where = [n for n in v["workloads"] if shown[r][n]]
        others.append(f"Under '{r}': {verdicts[r]} (interior optimum on " + (", ".join(
            f"{n} at alpha = {fmt(shapes[r][n]['best_alpha'])}, {shapes[r][n]['interior_margin_pts']:.2f} points over "
            f"the better end" for n in where) if where else "no workload") + ")")
    return Decision(
        verdicts[own], f"{head}  {'; '.join(others)}.  Hit rates in % are means over seeds {v['profile']['seeds']}; "
        "every workload and reading is in the readings.",
        correction=corrections.get(own), readings=readings)


# --------------------------------------------------------------------------------------------------------------------
# blk-persistent-state
# --------------------------------------------------------------------------------------------------------------------


@claim("blk-persistent-state", "seed 002", "Keeping identity-keyed policy state across eviction helps LFU (+34.15 "
       "points) and small alpha (+24.85 at 0.01) far more than alpha = 0.15 (-0.21), by more than the spread "
       "between policies.", sizes=STUDY_SIZES)
def persistent_state(ctx: Context) -> Computed:
    s = block_study(ctx.profile.name, ctx.sizes)
    workloads = {}
    for name, w in s["workloads"].items():
        if not w["persistence"]:
            continue
        workloads[name] = {**_workload_header(w), "readings": {
            r: {"plain_pts": {row["key"]: 100 * row["plain_hit_rate"] for row in p["rows"]},
                "persistent_pts": {row["key"]: 100 * row["persistent_hit_rate"] for row in p["rows"]},
                "gain_pts_per_seed": {row["key"]: row["gain_pts_per_seed"] for row in p["rows"]}}
            for r, p in w["persistence"].items()}}
    page = page_numbers()["persistence_hit_rate_percent"]
    return Computed(
        {"margin_pts": s["margin_pts"], "readings": list(READINGS), "page_reading": s["page_reading"],
         "profile": s["profile"], "workloads": workloads},
        {"persistence_hit_rate_percent": page,
         "plain_pts": {"LFU": page["LFU"]["reset"], "0.01": page["EMA alpha=0.01"]["reset"],
                       "0.15": page_numbers()["alpha_sweep_hit_rate_percent"]["0.15"]},
         "gain_pts": {"LFU": 34.15, "0.01": 24.85, "0.15": page["EMA alpha=0.15"]["delta_points"]}},
        {"test": "tests/test_persistent_state.py, tests/test_block_study.py", **EVIDENCE,
         "figure": ctx.figure_files("seed002")})


def _effect(v: dict, name: str, reading: str) -> dict:
    x = v["workloads"][name]["readings"][reading]
    return persistence_effect(x["plain_pts"], x["persistent_pts"], v["margin_pts"])


@decides("blk-persistent-state", flips={
    "the anchored hold run gains like the page": (
        lambda v: edit(v, "workloads/anchored/readings/hold/persistent_pts",
                       lambda p: {"LFU": p["LFU"] + 40.0, "0.01": p["0.01"] + 40.0, "0.15": p["0.15"]}), "holds"),
    "persistence changes nothing anywhere under hold": (
        lambda v: edit(v, "workloads", lambda ws: {n: {**w, "readings": {**w["readings"], "hold": {
            **w["readings"]["hold"], "persistent_pts": dict(w["readings"]["hold"]["plain_pts"])}}}
            for n, w in ws.items()}), "not-checkable")})
def persistent_state_decide(v: dict, e: dict) -> Decision:
    """Per reading: a workload shows the effect when the largest persistence gain (points) exceeds the spread of the
    three plain policies and both LFU's and alpha = 0.01's gains exceed alpha = 0.15's by more than ``margin_pts``
    (:func:`~theorems.results.blocks.persistence_effect` on the hit rates; the page's own numbers pass it, as the
    summary shows).  ``holds`` when an experiment workload shows it, ``not-reproduced`` when none does but a control
    does, ``not-checkable`` when no control does.  The claim's verdict is the one under ``page_reading``.  Flips: an
    experiment's largest gain crossing the plain spread (with the margin met), a control's effect vanishing."""
    effects = {r: {name: _effect(v, name, r) for name in v["workloads"]} for r in v["readings"]}
    verdicts = _by_reading(v, {r: {n: x["effect"] for n, x in effects[r].items()} for r in v["readings"]})
    page_plain = e["plain_pts"]
    page = persistence_effect(page_plain, {k: page_plain[k] + e["gain_pts"][k] for k in page_plain}, v["margin_pts"])
    readings = {}
    for r in v["readings"]:
        parts = []
        for n, x in effects[r].items():
            g = x["gain_pts"]
            parts.append(f"{n} ({v['workloads'][n]['role']}): gains LFU {g['LFU']:+.2f}, alpha 0.01 {g['0.01']:+.2f}, "
                         f"alpha 0.15 {g['0.15']:+.2f} points; plain spread {x['plain_spread_pts']:.2f}; "
                         + ("effect shown" if x["effect"] else
                            f"no effect (largest gain {'exceeds' if x['largest_gain_exceeds_spread'] else 'within'} "
                            f"the spread, LFU and 0.01 over 0.15 by {x['lfu_and_0.01_over_0.15_pts']:+.2f})"))
        readings[r] = {"verdict": verdicts[r], "finding": "; ".join(parts)}
    own = v["page_reading"]
    shown_exp = [n for n in _roles(v, "experiment") if effects[own][n]["effect"]]
    shown_ctl = [n for n in _roles(v, "control") if effects[own][n]["effect"]]
    if shown_exp:
        what = "shown on " + ", ".join(shown_exp)
    else:
        what = ("shown on no experiment workload; " +
                (f"the positive control {', '.join(shown_ctl)} shows it" if shown_ctl else "no positive control shows it"))
    decay_like = [r for r in v["readings"] if r != own]
    ema_gains = {r: max(abs(effects[r][n]["gain_pts"][k]) for n in v["workloads"] for k in ("0.01", "0.15"))
                 for r in decay_like}
    return Decision(
        verdicts[own],
        f"Under the '{own}' reading (the page's worked examples) the verdict is {verdicts[own]}: the effect is {what}.  "
        f"Statistic: largest gain above the spread of the three plain policies and LFU's and alpha 0.01's gains "
        f"{fmt(v['margin_pts'])} point(s) above alpha 0.15's; on the page's own numbers it gives gains "
        f"{page['gain_pts']['LFU']:+.2f}, {page['gain_pts']['0.01']:+.2f}, {page['gain_pts']['0.15']:+.2f} against a "
        f"plain spread of {page['plain_spread_pts']:.2f} ({'effect' if page['effect'] else 'no effect'}).  "
        + "; ".join(f"Under '{r}': {verdicts[r]} (largest EMA gain on any workload {ema_gains[r]:.2f} points: a "
                    f"restored score has decayed by (1 - alpha)^gap)" for r in decay_like) + ".",
        readings=readings)
