"""Pinned attention sinks (paper Section 8) and working-set-adaptive budgets (paper Sections 8 and 11).

- The registered ``SinkPinned`` wrapper holds tokens ``0..n-1`` outside an importance rule: the engine's contract
  checks accept it, the sinks are never dropped, with ``n = 0`` it is the plain rule exactly, and a budget at or
  below ``n`` pins only ``k - 1`` sinks (one slot stays the rule's).
- Measured: pinning itself (each rule's capacity-sized parts held at the full budget,
  ``Policy.params_fixed_at``) changes nothing where the rule never drops a sink, and lowers the regret where it
  does; the rises of the registered wrapper come from handing the rule ``k - |sinks|`` slots (H2O's recent window,
  Scissorhands' importance share).
- ``proportional_budgets`` splits memory exactly; a heavy-set-sized split of the same total memory lowers the
  exact optimum's total regret on a broad/sharp mixed workload.
"""

from hypothesis import given, strategies as st

import policies
from adversary import broad_and_sharp, persistent_attention
from kvcore.engine import run
from theorems.results.practice import (adaptive_budget_table, importance_rules, proportional_budgets, sink_traces,
                                       sinks_pinning_table)


def test_pinned_sinks_are_never_dropped_and_zero_sinks_is_the_plain_rule():
    tr = persistent_attention(200, 0.5, 16, 0.05, sinks=4, sink_mass=0.3, seed=2)
    for rule in importance_rules():
        res = run(policies.make("SinkPinned", policy=rule, n_sinks=4), tr, 16, "nm", record=True)
        assert all(i >= 4 for _, i in res.evictions)
        assert run(policies.make("SinkPinned", policy=rule, n_sinks=0), tr, 16, "nm").cost == \
            run(policies.make(rule), tr, 16, "nm").cost


def test_pinning_the_measured_sinks_helps_only_where_they_are_dropped():
    """The measured facts the sinks-pinning verdict rests on.  Positive control (4 sinks paused 10 of every 50 rows,
    k = 16): pinning them lowers TOVA's regret, which drops an idle sink.  Two committed real traces (k = 32): H2O
    keeps each head's measured sinks anyway, so pinning them never lowers its regret there."""
    from theorems.results.practice import sinks_positive_control

    control = sinks_pinning_table(sinks_positive_control(300, seeds=1), 16, rules=("TOVA",))
    rows = {(r.policy, r.workload): r for r in control.rows}
    assert all(rows[("TOVA+sinks", w)].alg_cost < rows[("TOVA", w)].alg_cost for _, w in rows)
    real = sinks_pinning_table(sink_traces(200, seeds=0, real=2), 32, rules=("H2O",))
    assert real.rows and all(r.params["sinks"] for r in real.rows)
    for r in real.rows:
        if r.policy == "H2O+sinks":
            assert r.params["unpinned_sink_drops"] == 0 and r.alg_cost >= r.params["unpinned_regret"] - 1e-9


def test_pinning_itself_changes_nothing_unless_the_rule_drops_a_sink():
    """Every importance rule, held at k (H2O's recent window, Scissorhands' threshold): pinned and unpinned pay the
    same wherever the held rule drops no sink, on synthetic and real traces; H2O and Scissorhands as registered pay
    more pinned on some of them (the handed capacity), which the held run removes."""
    table = sinks_pinning_table(sink_traces(300, seeds=1, real=2), 32)
    rows = [r.params for r in table.rows if not r.policy.endswith("+sinks")]
    assert {p["rule"] for p in rows} == set(importance_rules()) and len(rows) >= 2 * len(importance_rules())
    for p in rows:
        if p["unpinned_held_sink_drops"] == 0:
            assert p["pinned_held_regret"] == p["unpinned_held_regret"], p
        else:
            assert p["pinned_held_regret"] <= p["unpinned_held_regret"] + 1e-9, p
    assert any(p["pinned_regret"] > p["pinned_held_regret"] + 1e-9 for p in rows if p["rule"] == "H2O")


def test_held_parameters_reproduce_the_rule_at_the_full_budget():
    """``params_fixed_at(k)`` makes a rule at capacity k behave exactly as its default (H2O: the recent window
    floor(k/2); Scissorhands: threshold 1/k), and a smaller capacity then keeps that part's size."""
    tr = persistent_attention(300, 0.5, 16, 0.05, sinks=4, sink_mass=0.3, seed=5)
    for rule in importance_rules():
        held = policies.make(rule).params_fixed_at(24)
        if rule == "H2O":
            assert held == {"recent_tokens": 12}
            assert run(policies.make(rule, **held), tr, 24, "nm").cost == run(policies.make(rule), tr, 24, "nm").cost
            h = policies.make(rule, **held)
            h.reset(20, None, "nm")
            assert h.recent == 12
        elif rule == "Scissorhands":
            assert held == {"threshold": 1 / 24}
        else:
            assert held == {}


@given(sizes=st.lists(st.integers(0, 60), min_size=1, max_size=8), extra=st.integers(0, 40))
def test_proportional_budgets_split_exactly(sizes, extra):
    total = 2 * len(sizes) + extra
    b = proportional_budgets(sizes, total)
    assert sum(b) == total and min(b) >= 2
    for i in range(len(sizes)):
        for j in range(len(sizes)):
            if sizes[i] > sizes[j]:
                assert b[i] >= b[j]


def test_heavy_set_sized_budgets_lower_the_optimum_on_a_mixed_workload():
    table = adaptive_budget_table(broad_and_sharp(2, 2, 300), 24, names=())
    opt = {r.params["allocation"]: r.alg_cost for r in table.rows}
    sizes = table.rows[0].params["heavy_sizes"]
    assert min(sizes[:2]) > max(sizes[2:]), sizes         # broad sequences measure larger heavy sets
    assert opt["adaptive"] < opt["fixed"], opt


def test_a_budget_at_the_sinks_pins_all_but_one_slot():
    tr = persistent_attention(20, 0.5, 4, 0.05, seed=0)
    res = run(policies.make("SinkPinned", policy="H2O", n_sinks=4), tr, 4, "nm", record=True)
    assert all(i >= 3 for _, i in res.evictions) and any(i >= 3 for _, i in res.evictions)
