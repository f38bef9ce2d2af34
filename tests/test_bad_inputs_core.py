"""Every bad-input probe of issue 14 that reaches the core (trace files, the engine's Python API, the policy base).

Each probe must give one line naming the file, step, argument or policy, and an exception of the documented type:
TraceError for a trace file or array, TypeError for a value of the wrong type, ValueError (ParameterError) for a
value out of range, ContractViolation for a policy's bad choice.  Nothing may be coerced into something else.
(The command-line probes -- exit status 2, no traceback -- are in the command-line tests.)
"""

from __future__ import annotations

import numpy as np
import pytest

import policies
from kvcore.engine import NMSimulator, RMSimulator, run, run_nm, run_rm
from kvcore.errors import ContractViolation, TraceError
from kvcore.optima import belady
from kvcore.trace_files import load_trace
from kvcore.traces import AttentionTrace, PagingTrace
from policies.base import Policy


def one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert msg and "\n" not in msg
    return msg


def load_error(path, *parts) -> str:
    with pytest.raises(TraceError) as e:
        load_trace(path)
    msg = one_line(e)
    for part in (str(path), *parts):
        assert part in msg, (part, msg)
    return msg


# -- .txt ids: plain ASCII decimal digits that fit in int64, nothing else --------------------------------------------


@pytest.mark.parametrize("text,shown", [
    ("1_000", "'1_000'"),          # int() accepts digit separators
    ("+1", "'+1'"),                # and a sign
    ("\u0661\u0662", "'\u0661\u0662'"),  # and Arabic-Indic digits (int('١٢') == 12)
    ("\uff11", "'\uff11'"),          # and full-width digits
    ("1e3", "'1e3'"),
    ("0x10", "'0x10'"),
    ("7 8", "'7 8'"),
])
def test_txt_id_that_is_not_plain_digits(tmp_path, text, shown):
    p = tmp_path / "ids.txt"
    p.write_text(f"4\n{text}\n5\n", encoding="utf-8")
    load_error(p, "step 1", "line 2", shown, "is not an integer id")


@pytest.mark.parametrize("value", [2**63, 2**64 + 5, 10**30])
def test_txt_id_beyond_int64(tmp_path, value):
    p = tmp_path / "big.txt"
    p.write_text(f"# header\n1\n{value}\n")
    load_error(p, "step 1", "line 3", str(value), "does not fit in int64")


def test_txt_largest_int64_id_is_read_exactly(tmp_path):
    p = tmp_path / "max.txt"
    p.write_text(f"{2**63 - 1}\n007\n")
    assert load_trace(p).items.tolist() == [2**63 - 1, 7]


def test_npy_uint64_id_beyond_int64(tmp_path):
    p = tmp_path / "big.npy"
    np.save(p, np.array([3, 2**63 + 1], dtype=np.uint64))
    load_error(p, "items[1]", str(2**63 + 1), "does not fit in int64")


def test_npy_float_and_object_arrays(tmp_path):
    np.save(tmp_path / "f.npy", np.array([1.0, 2.0]))
    load_error(tmp_path / "f.npy", "must hold integers", "float64")
    np.save(tmp_path / "o.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    load_error(tmp_path / "o.npy", "must hold integers", "object")


# -- empty traces: an error, not a ratio of 1.0 -----------------------------------------------------------------------


def test_empty_traces_are_rejected(tmp_path):
    (tmp_path / "e.txt").write_text("# only a comment\n\n")
    np.save(tmp_path / "e.npy", np.zeros(0, dtype=np.int64))
    np.savez(tmp_path / "p.npz", kind="paging", items=np.zeros(0, dtype=np.int64))
    np.savez(tmp_path / "a.npz", kind="attention", indptr=np.zeros(1, dtype=np.int64),
             indices=np.zeros(0, dtype=np.int64), weights=np.zeros(0))
    for name in ("e.txt", "e.npy", "p.npz", "a.npz"):
        load_error(tmp_path / name, "empty trace")


# -- fault costs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad,problem", [(np.nan, "fault cost is nan"), (np.inf, "fault cost is inf"),
                                         (-2.0, "negative fault cost -2.0")])
def test_cost_must_be_finite_and_non_negative(tmp_path, bad, problem):
    p = tmp_path / "w.npz"
    np.savez(p, kind="paging", items=np.array([0, 1, 2]), costs=np.array([1.0, 2.0, bad]))
    load_error(p, "step 2", problem)


def test_total_cost_must_be_finite(tmp_path):
    p = tmp_path / "w.npz"
    np.savez(p, kind="paging", items=np.array([0, 1]), costs=np.array([1e308, 1e308]))
    load_error(p, "sum to more than the largest float")


def test_huge_finite_costs_are_charged_exactly():
    # Costs of 1e20 (issue 14) are valid input: the engine sums them in float64 like any other cost.  LRU at k = 1
    # on 0 1 0 faults three times.
    trace = PagingTrace(np.array([0, 1, 0]), np.array([1e20, 3e20, 1e20]))
    assert run(policies.make("LRU"), trace, 1).cost == 1e20 + 3e20 + 1e20


# -- in-memory traces -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ids,problem", [([0, 1.7], "item id 1.7 is not an integer"),
                                         ([0, True], "item id True is not an integer"),
                                         ([0, "3"], "item id '3' is not an integer"),
                                         ([2**63], "does not fit in int64")])
def test_paging_trace_from_a_list_coerces_nothing(ids, problem):
    with pytest.raises(TraceError) as e:
        PagingTrace.unit(ids)
    assert problem in one_line(e)


# -- the step-wise Python API ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("items,costs,exc,problem", [
    ([1.7], None, TypeError, "step 0: item 1.7 is not an integer item id"),   # was silently item 1
    ([np.float64(2.0)], None, TypeError, "is not an integer item id"),
    ([True], None, TypeError, "item True is not an integer item id"),
    (["3"], None, TypeError, "item '3' is not an integer item id"),
    ([-1], None, ValueError, "step 0: item id -1 is negative"),
    (5, None, TypeError, "items must be a sequence"),
    ("12", None, TypeError, "items must be a sequence"),
    ([1], [float("nan")], ValueError, "step 0: cost nan must be finite and >= 0"),
    ([1], [-1.0], ValueError, "cost -1.0 must be finite and >= 0"),
    ([1], ["1"], TypeError, "cost '1' is not a number"),
    ([1], [None], TypeError, "cost None is not a number"),
])
def test_rm_step_rejects(items, costs, exc, problem):
    sim = RMSimulator(policies.make("LRU"), 2)
    with pytest.raises(exc) as e:
        sim.step(items, costs)
    assert problem in one_line(e)
    assert sim.t == 0 and sim.resident == frozenset()  # nothing was served


def test_rm_step_accepts_numpy_integers():
    sim = RMSimulator(policies.make("LRU"), 2)
    assert sim.step(np.array([3, 4]), np.array([2.0, 0.5])) == 2.5
    assert sim.resident == frozenset({3, 4})


@pytest.mark.parametrize("idx,w,residual,exc,problem", [
    ([-1], [1.0], 0.0, ValueError, "row tokens must be strictly increasing integers in 0..0"),   # was accepted
    ([1], [1.0], 0.0, ValueError, "in 0..0, got [1]"),  # a future token
    ([0.0], [1.0], 0.0, TypeError, "tokens must be integers, got dtype float64"),
    ([0], [float("nan")], 0.0, ValueError, "weights must be finite and >= 0"),
    ([0], [-0.5], 0.0, ValueError, "weights must be finite and >= 0"),
    ([0], ["a"], 0.0, TypeError, "weights must be real numbers"),
    ([0], [0.5, 0.5], 0.0, ValueError, "equal length"),
    ([0], [1.0], -0.1, ValueError, "residual -0.1 must be finite and >= 0"),
    ([0], [1.0], "0", TypeError, "residual '0' is not a number"),
])
def test_nm_step_rejects(idx, w, residual, exc, problem):
    sim = NMSimulator(policies.make("LRU"), 2)
    with pytest.raises(exc) as e:
        sim.step(idx, w, residual)
    assert problem in one_line(e)
    assert sim.t == 0


def test_nm_step_rejects_unsorted_row():
    sim = NMSimulator(policies.make("LRU"), 3)
    sim.step([0], [1.0])
    sim.step([0, 1], [0.5, 0.5])
    with pytest.raises(ValueError) as e:
        sim.step([2, 0], [0.5, 0.5])
    assert "step 2" in one_line(e) and "strictly increasing" in str(e.value)


@pytest.mark.parametrize("seed,exc,problem", [(-1, ValueError, "seed = -1: must be an integer >= 0"),
                                               (1.5, TypeError, "seed = 1.5: must be an integer >= 0"),
                                               (True, TypeError, "seed = True"), ("7", TypeError, "seed = '7'")])
def test_seed_must_be_a_non_negative_integer(seed, exc, problem):
    with pytest.raises(exc) as e:
        run(policies.make("Random"), PagingTrace.unit([0, 1, 2]), 2, seed=seed)
    assert problem in one_line(e)


# -- a list or an array where a trace belongs --------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda x: run(policies.make("LRU"), x, 2),
    lambda x: run_rm(policies.make("LRU"), x, 2),
    lambda x: run_nm(policies.make("LRU"), x, 2),
    lambda x: belady(x, 2),
])
@pytest.mark.parametrize("not_a_trace", [[0, 1, 2], np.array([0, 1, 2]), "trace.npy"])
def test_a_non_trace_argument_is_a_type_error_naming_it(call, not_a_trace):
    with pytest.raises(TypeError) as e:
        call(not_a_trace)
    msg = one_line(e)
    assert msg.startswith("trace: expected a ") and type(not_a_trace).__name__ in msg


def test_observe_must_be_an_attention_trace():
    with pytest.raises(TypeError) as e:
        run_rm(policies.make("LRU"), PagingTrace.unit([0, 1]), 2, observe=[[0], [1]])
    assert one_line(e).startswith("observe: expected a AttentionTrace, got list")


# -- the policy base checks a victim before the policy's own hooks see it ----------------------------------------------


class EvictsTheRequestedItem(Policy):
    """A user's policy with a strict on_evict (it deletes its own record of the item) and a bad victim rule."""

    name = "EvictsTheRequestedItem"

    def on_reset(self):
        self.since = {}

    def on_admit(self, t, item, cost):
        self.since[item] = t

    def on_evict(self, t, item):
        del self.since[item]  # a KeyError here used to be what the user saw

    def victim(self, t, protected):
        return min(protected)


class EvictsAStranger(EvictsTheRequestedItem):
    name = "EvictsAStranger"

    def victim(self, t, protected):
        return 99


class EvictsAFloat(EvictsTheRequestedItem):
    name = "EvictsAFloat"

    def victim(self, t, protected):
        return float(min(self.since))


class FlushesTwice(EvictsTheRequestedItem):
    """Overrides victims() and drops the same item twice (the second drop must not reach on_evict)."""

    name = "FlushesTwice"

    def victims(self, t, need, protected):
        v = max(self.since)
        self.drop(t, v)
        self.drop(t, v)
        return [v]


@pytest.mark.parametrize("cls,item,problem", [
    (EvictsTheRequestedItem, 0, "evicts an item requested at this step"),
    (EvictsAStranger, 99, "evicts an item that is not resident"),
    (FlushesTwice, 1, "evicts the same item twice"),
])
def test_victim_is_checked_before_on_evict(cls, item, problem):
    # k = 2, steps [0], [1], [0, 2]: the first eviction is needed at step 2, where 0 and 2 are requested.
    with pytest.raises(ContractViolation) as e:
        run_rm(cls(), PagingTrace.from_steps([[0], [1], [0, 2]]), 2)
    msg = one_line(e)
    assert f"policy {cls.name!r}, step 2, item {item}" in msg and problem in msg


def test_a_float_victim_is_not_an_item_id():
    with pytest.raises(ContractViolation) as e:
        run_rm(EvictsAFloat(), PagingTrace.from_steps([[0], [1], [0, 2]]), 2)
    assert "policy 'EvictsAFloat', step 2: victim 0.0 is not an item id" in one_line(e)


# -- attributes that must exist before a run ---------------------------------------------------------------------------


def test_gda_ops_before_a_run():
    assert policies.make("GD-A").ops == {"evictions": 0, "rent": 0, "heap_pops": 0, "updates": 0, "admissions": 0}


def test_attention_trace_with_a_float_token_is_rejected():
    with pytest.raises(TraceError) as e:
        AttentionTrace(np.array([0, 1]), np.array([0.0]), np.array([1.0]))
    assert "indices must hold integers" in one_line(e)
