"""kvcore.numbers: one rule for numbers everywhere -- a numpy integer is an integer, a bool and a float are not -- and
every place of the toolkit that takes a count or a bounded real applies it the same way (six hand-written
validators used to disagree on numpy integers and bools)."""

import numpy as np
import pytest

import policies
from adversary import cyclic_k_plus_one, decoy_and_sleeper
from adversary.block_workload import BlockWorkloadParams
from kvcore.errors import ParameterError
from kvcore.numbers import integer, is_integer, is_real, real
from kvcore.tasks import TaskPool
from realtrace.study import StudyParams
from verify.config import FuzzConfig, Premise


@pytest.mark.parametrize("value,expected", [(3, True), (np.int64(3), True), (np.uint8(3), True), (True, False),
                                            (np.bool_(True), False), (3.0, False), ("3", False), (None, False)])
def test_what_counts_as_an_integer(value, expected):
    assert is_integer(value) is expected


@pytest.mark.parametrize("value,expected", [(0.5, True), (np.float32(0.5), True), (2, True), (np.int16(2), True),
                                            (False, False), ("0.5", False), (None, False)])
def test_what_counts_as_a_real(value, expected):
    assert is_real(value) is expected


def test_integer_range_and_message():
    assert integer(np.int64(4), "k", 1) == 4 and type(integer(np.int64(4), "k", 1)) is int
    with pytest.raises(ParameterError, match=r"^k = 0: must be an integer >= 1$"):
        integer(0, "k", 1)
    with pytest.raises(ParameterError, match=r"^k = 9: must be an integer in \[1, 8\]$"):
        integer(9, "k", 1, 8)
    with pytest.raises(ParameterError, match=r"^k = True: must be an integer >= 1$"):
        integer(True, "k", 1)


def test_real_ends_open_or_closed_and_never_nan():
    assert real(1, "tau", 0.0, 1.0, open_low=True) == 1.0
    with pytest.raises(ParameterError, match=r"tau = 0.0: must be a finite number in \(0, 1\]"):
        real(0.0, "tau", 0.0, 1.0, open_low=True)
    with pytest.raises(ParameterError, match="nan"):
        real(float("nan"), "x", finite=False)
    assert real(float("inf"), "threshold", 0.0, finite=False) == float("inf")
    with pytest.raises(ParameterError, match="must be a finite number"):
        real(float("inf"), "threshold", 0.0)


# One call per validator that used to be written by hand: a numpy integer where a count belongs works everywhere,
# a bool is refused everywhere, with a one-line ParameterError naming the parameter.
CALLS = {
    "adversary generator": lambda v: cyclic_k_plus_one(v, 6),
    "NM adversary": lambda v: decoy_and_sleeper(v, 0.01, 3),
    "policy parameter": lambda v: policies.make("StreamingLLM", n_sinks=v),
    "block workload": lambda v: BlockWorkloadParams(steps=v * 1000, local_blocks=v),
    "task pool": lambda v: TaskPool(workers=0, retries=v),
    "study parameters": lambda v: StudyParams(budgets=(v,), seeds=v),
    "fuzz configuration": lambda v: FuzzConfig("LRU", v).checked(),
    "fuzz premise": lambda v: Premise(W=v).checked(),
}


@pytest.mark.parametrize("where", sorted(CALLS))
def test_every_validator_takes_numpy_integers_and_refuses_bools(where):
    CALLS[where](np.int64(3))
    with pytest.raises(ParameterError, match="True"):
        CALLS[where](True)


def test_command_line_types_accept_plain_text_and_refuse_the_rest():
    """The argparse types of kvcore.numbers on their own (survivors of `python -m bench.mutation --module
    kvcore/numbers.py --tests tests/test_numbers.py`: a negated range test, a negated empty-entry test)."""
    import argparse

    from kvcore.numbers import comma_list, decimal, whole_number

    half = decimal(0.0, 1.0, open_low=True)
    assert half("0.5") == 0.5 and half("1") == 1.0 and half(".25") == 0.25
    for bad in ("0", "1.5", "nan", "1e400", "-0.1", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            half(bad)
    budgets = comma_list(whole_number(1))
    assert budgets("128,256, 512") == (128, 256, 512) and budgets("7") == (7,)
    for bad in ("128,,256", ",128", "128,", "0,1"):
        with pytest.raises(argparse.ArgumentTypeError):
            budgets(bad)
    assert comma_list(whole_number(1), none=True)("none") == ()
