"""The three optima of the committed quality replay at equal total memory (``realtrace/data/quality_coupled``; paper
§8, §11), checked on the JSON alone (no torch): what holds by construction and fails on a broken solver.

Per prompt and budget ``K`` (total memory ``B = K x 30 layers x 3 KV heads``), with ``lower`` the optimum of the
rows the schedule was solved on (complete rows since issue 52, so ``lower`` is the certified exact optimum; top-32
entries per row before), summed over every layer, KV head and step:

* ``lower(OPT:static) <= lower(OPT)``: the uniform split ``K`` per trace is one static split of ``B``;
* ``lower(OPT:coupled) <= lower(OPT:static)``: a static split is one coupled schedule;
* every schedule's regret on complete rows is at least ``lower(OPT:coupled)``: each holds at most ``B`` in total,
  and truncating rows only lowers a schedule's cost;
* the residencies: ``OPT`` holds at most ``K`` per trace, every optimum at most ``B`` in total, and the two files'
  ``OPT`` rows are the same numbers on their common prompts (one deterministic reference pass each; the static file
  covers three of the coupled file's five prompts).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "realtrace" / "data" / "quality_coupled"
TRACES = 30 * 3
REL = 1e-9  # float sums of ~10^5 entries; the inequalities are exact in rationals


def load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def by_config(res: dict) -> dict:
    return {(r["config"], r["budget"]): r for r in res["runs"] if r["kind"] == "opt"}


@pytest.fixture(scope="module")
def runs():
    static, coupled = load("OPT_static"), load("OPT_coupled")
    assert set(static["settings"]["prompts"]) <= set(coupled["settings"]["prompts"])
    assert static["settings"]["budgets"] == coupled["settings"]["budgets"]
    assert static["settings"]["opt_top"] == coupled["settings"]["opt_top"]
    return static, coupled


def leq(a: float, b: float) -> bool:
    return a <= b + REL * max(1.0, abs(b))


def violations(static: dict, coupled: dict) -> list[tuple]:
    """Every (prompt, budget, what) at which an inequality of the module docstring fails."""
    s, c = by_config(static), by_config(coupled)
    out = []
    for k in static["settings"]["budgets"]:
        for p in static["settings"]["prompts"]:
            uni_s, uni_c = s[("OPT", k)]["prompts"][p], c[("OPT", k)]["prompts"][p]
            st, co = s[("OPT:static", k)]["prompts"][p], c[("OPT:coupled", k)]["prompts"][p]
            checks = {"the two files' OPT agree": all(math.isclose(uni_s[q], uni_c[q], rel_tol=REL)
                                                      for q in ("opt_lower", "regret_sum")),
                      "static <= uniform": leq(st["opt_lower"], uni_s["opt_lower"]),
                      "coupled <= static": leq(co["opt_lower"], st["opt_lower"]),
                      "every schedule >= coupled": all(leq(co["opt_lower"], r["regret_sum"]) for r in (uni_s, st, co))}
            out += [(p, k, what) for what, ok in checks.items() if not ok]
    for res in (static, coupled):
        for (name, k), run in by_config(res).items():
            if run["max_resident_total"] > k * TRACES or (name == "OPT" and run["max_resident"] > k):
                out.append((None, k, f"{name} over its memory"))
    return out


def test_the_optima_are_ordered_and_within_memory(runs):
    assert violations(*runs) == []


def test_a_broken_solver_would_be_seen(runs):
    """The check can fail: a static split worse than the uniform one on one prompt (as a solver that ignored the
    curves could give), or a coupled flow above the static optimum, is reported there."""
    static, coupled = copy.deepcopy(runs[0]), copy.deepcopy(runs[1])
    k, p = static["settings"]["budgets"][0], static["settings"]["prompts"][0]
    st = by_config(static)[("OPT:static", k)]["prompts"][p]
    st["opt_lower"] = by_config(static)[("OPT", k)]["prompts"][p]["opt_lower"] * 1.01
    assert (p, k, "static <= uniform") in violations(static, coupled)
    static, coupled = copy.deepcopy(runs[0]), copy.deepcopy(runs[1])
    co = by_config(coupled)[("OPT:coupled", k)]["prompts"][p]
    co["opt_lower"] = by_config(static)[("OPT:static", k)]["prompts"][p]["opt_lower"] * 1.01
    assert (p, k, "coupled <= static") in violations(static, coupled)
