"""Does a lower regret go with a better output?  Pairs of schedules at equal memory, counted (issue 52, item 4).

Paper §9 uses the attention-mass regret (Eq. 4) as the target an eviction schedule is optimized for, and the exact
optimum of it as the quality ceiling.  If the surrogate ranks schedules the way the output does, of two schedules
at the same memory the one with the lower complete-row regret should not give the worse output.  Here pairs of
schedules that differ only in how exactly or what they optimize -- never in the memory they hold -- are compared on
the same prompt and budget:

* ``exact vs truncated``: each optimum (``OPT``, ``OPT:coupled``, ``OPT:static``) solved on complete rows against the
  same optimum solved on each row's top 32 entries (``--opt-top 32``);
* ``uniform vs static vs coupled``: the three exact optima (the same total memory, split three ways);
* ``mass vs value``: the exact optimum of the attention mass against that of the value-aware cost (``OPT:value``).

Each pair is oriented so that ``a`` has the lower complete-row regret (``regret_stream``: the attention mass lost
per layer x KV head and step, charged on the full-cache rows whatever rows it was solved on; one denominator per
prompt and budget, so it orders a pair as the summed regret does, and every committed replay has it); a pair with
equal regret is not counted.
Its output is *worse* (answer KL) when ``a``'s answer KL exceeds ``b``'s by more than the declared quality margin
(``theorems/claims/significance.py``: ``max(0.10 x b's, ln 1.01)``), *better* when ``b``'s exceeds ``a``'s by more
than ``a``'s margin; under the accuracy reading worse means ``a`` answers wrong where ``b`` answers right.

Points come from the committed ``--json`` documents of ``python -m paper_check quality``: the set
``realtrace/data/surrogate_paradox`` (this study's runs: ``OPT`` exact and truncated at K = 32, 64, 128, 256 on the
five short prompts, ``OPT:coupled`` truncated at the same, ``OPT:static`` truncated at K = 64, 128 on three), the
exact coupled and static optima of ``realtrace/data/quality_coupled`` (K = 64, 128) and the value optimum of
``realtrace/data/quality_value`` (K = 128, two prompts); only prompts the full cache answers right are compared.
"""

from __future__ import annotations

import json
from itertools import combinations

from realtrace import input_dir

PARADOX_SET = "surrogate_paradox"
# (set, file) of each study, and the optimum runs it contributes: config -> opt_top of the rows it was solved on
SHORT5 = ("needle-400-d10", "needle-400-d50", "kv-24-12", "needle-600-d90", "kv-40-1")
SOURCES = tuple((PARADOX_SET, f"OPT_exact_{p}.json") for p in SHORT5) + (
    (PARADOX_SET, "OPT_top32.json"), (PARADOX_SET, "OPT_coupled_top32.json"), (PARADOX_SET, "OPT_static_top32.json"),
    ("quality_coupled", "OPT_coupled.json"), ("quality_coupled", "OPT_static.json"),
    ("quality_value", "OPT_value_K128_kv-24-12.json"), ("quality_value", "OPT_value_K128_needle-1200-d50.json"),
)
FAMILIES = {
    "exact vs truncated": [((c, None), (c, 32)) for c in ("OPT", "OPT:coupled", "OPT:static")],
    "uniform vs static vs coupled": list(combinations([("OPT", None), ("OPT:static", None), ("OPT:coupled", None)],
                                                      2)),
    "mass vs value": [(("OPT", None), ("OPT:value", None))],
}
READINGS = ("answer_kl", "accuracy")
CONTROL_SCALE = 10.0  # nats per unit of regret per head-step in the control's "absent" outputs (a KL of the size seen)


def load_runs(sources=SOURCES) -> tuple[dict, list[str]]:
    """``{(config, opt_top, budget, prompt): {"regret", "kl", "right"}}`` over the optimum runs of ``sources`` on
    the prompts the full cache answers right (the first document that has a key gives it), and the files read."""
    runs, read = {}, []
    for name, file in sources:
        path = input_dir(name) / file
        if not path.is_file():
            continue
        doc = json.loads(path.read_text())
        read.append(f"realtrace/data/{name}/{file}")
        right = {p["name"] for p in doc["prompts"] if p["full_cache_right"]}
        for run in doc["runs"]:
            if run["kind"] != "opt":
                continue
            for prompt, m in run["prompts"].items():
                key = (run["config"], doc["settings"].get("opt_top"), run["budget"], prompt)
                if prompt in right and key not in runs:
                    runs[key] = {"regret": m["regret_stream"], "kl": m["kl_answer"], "right": int(m["right"])}
    return runs, read


def pairs(runs: dict) -> list[dict]:
    """Every pair of :data:`FAMILIES` present in ``runs`` on one budget and prompt, ``a`` the lower-regret side."""
    out = []
    budgets_prompts = sorted({(k[2], k[3]) for k in runs})
    for family, members in FAMILIES.items():
        for x, y in members:
            for budget, prompt in budgets_prompts:
                rx, ry = runs.get((*x, budget, prompt)), runs.get((*y, budget, prompt))
                if rx is None or ry is None or rx["regret"] == ry["regret"]:
                    continue
                (na, a), (nb, b) = sorted([(x, rx), (y, ry)], key=lambda s: s[1]["regret"])
                out.append({"family": family, "a": _label(na), "b": _label(nb), "budget": budget, "prompt": prompt,
                            "regret_a": a["regret"], "regret_b": b["regret"], "kl_a": a["kl"], "kl_b": b["kl"],
                            "right_a": a["right"], "right_b": b["right"]})
    return out


def _label(member) -> str:
    config, top = member
    return config if top is None else f"{config} --opt-top {top}"


def outcome(p: dict, reading: str) -> str:
    """``worse``, ``better`` or ``same`` output of the lower-regret side ``a`` under ``reading`` (module docstring)."""
    from theorems.claims.significance import quality_margin  # the declared margin (imported late: the claims import us)

    if reading == "accuracy":
        return "worse" if p["right_a"] < p["right_b"] else ("better" if p["right_a"] > p["right_b"] else "same")
    if p["kl_a"] - p["kl_b"] > quality_margin(p["kl_b"]):
        return "worse"
    return "better" if p["kl_b"] - p["kl_a"] > quality_margin(p["kl_a"]) else "same"


def count(ps: list[dict], reading: str) -> dict:
    """How many pairs, and in how many the lower-regret schedule's output is worse / better / the same."""
    seen = [outcome(p, reading) for p in ps]
    return {"pairs": len(ps), **{o: seen.count(o) for o in ("worse", "better", "same")}}


def counts(ps: list[dict]) -> dict:
    """:func:`count` per reading, over all pairs and per family and budget."""
    out = {}
    for reading in READINGS:
        out[reading] = {"all": count(ps, reading),
                        "family": {f: count([p for p in ps if p["family"] == f], reading) for f in FAMILIES},
                        "budget": {str(k): count([p for p in ps if p["budget"] == k], reading)
                                   for k in sorted({p["budget"] for p in ps})}}
    return out


def control(ps: list[dict]) -> dict:
    """The positive control: the same pairs with outputs constructed from their regrets, so that the effect is known.
    ``present``: the lower-regret side's answer KL set to twice the other's plus the floor (and its answer wrong where
    the other's is right) -- lower regret goes with worse output in every pair; ``absent``: each side's answer KL
    set to ``CONTROL_SCALE`` times its regret per head-step, and the answers kept equal -- the output follows the
    regret.  The count
    must see the effect in the first and not in the second."""
    from theorems.claims.significance import quality_margin

    present = [dict(p, kl_a=2 * p["kl_b"] + 2 * quality_margin(0.0), right_a=0, right_b=1) for p in ps]
    absent = [dict(p, kl_a=CONTROL_SCALE * p["regret_a"], kl_b=CONTROL_SCALE * p["regret_b"], right_a=1, right_b=1)
              for p in ps]
    return {"present": {r: count(present, r) for r in READINGS}, "absent": {r: count(absent, r) for r in READINGS}}


def paradox_table() -> dict:
    """The pairs, their counts per reading, the positive control, the declared quality margin and the files read."""
    from theorems.claims.significance import declared_quality

    runs, read = load_runs()
    ps = pairs(runs)
    return {"sources": read, "pairs": ps, "counts": counts(ps), "control": control(ps),
            "margin": declared_quality()}
