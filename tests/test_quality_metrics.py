"""Output-quality arithmetic (realtrace.quality.metrics) on hand-made logits: pure numpy, no torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import log_softmax

from kvcore.errors import ParameterError
from realtrace.quality.metrics import StepMetrics, answer_right, scope_mean, step_metrics


def logp(rows) -> np.ndarray:
    return log_softmax(np.asarray(rows, dtype=np.float64), axis=1)


def test_kl_of_identical_distributions_is_exactly_zero():
    rng = np.random.default_rng(0)
    lp = logp(rng.normal(size=(5, 11)))
    m = step_metrics(lp, lp, np.arange(5))
    assert m.kl.tolist() == [0.0] * 5
    assert m.dnll.tolist() == [0.0] * 5 and m.top1.all()


def test_kl_of_known_pairs_is_the_closed_form_and_is_directed():
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    m = step_metrics(np.log([p]), np.log([q]), np.array([0]))
    assert m.kl[0] == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1), rel=1e-12)
    back = step_metrics(np.log([q]), np.log([p]), np.array([0]))  # KL(q || p): the other direction differs
    assert back.kl[0] == pytest.approx(0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5), rel=1e-12)
    assert abs(back.kl[0] - m.kl[0]) > 0.1
    # logits shifted by a constant are the same distribution; a token the full model rules out costs nothing
    rng = np.random.default_rng(1)
    z = rng.normal(size=(3, 7))
    assert np.allclose(step_metrics(logp(z), logp(z + 4.0), np.zeros(3, int)).kl, 0.0, atol=1e-12)
    with np.errstate(divide="ignore"):
        full = np.log(np.array([[0.0, 0.25, 0.75]]))
    ev = np.log(np.array([[0.2, 0.2, 0.6]]))
    assert step_metrics(full, ev, np.array([2])).kl[0] == pytest.approx(0.25 * math.log(0.25 / 0.2)
                                                                        + 0.75 * math.log(0.75 / 0.6), rel=1e-12)


def test_kl_is_nonnegative_and_positive_when_distributions_differ():
    rng = np.random.default_rng(2)
    a, b = logp(rng.normal(size=(50, 30))), logp(rng.normal(size=(50, 30)))
    kl = step_metrics(a, b, np.zeros(50, int)).kl
    assert (kl > 0).all()
    # against an independent float64 computation of sum p log(p / q)
    assert np.allclose(kl, (np.exp(a) * (a - b)).sum(axis=1), rtol=1e-12)


def test_delta_nll_sign_and_top1():
    full = np.log(np.array([[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]]))
    ev = np.log(np.array([[0.3, 0.6, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]))
    m = step_metrics(full, ev, np.array([0, 1, 2]))
    # row 0: the reference token lost mass (0.6 -> 0.3), row 1 gained (0.7 -> 0.8), row 2 unchanged
    assert m.dnll[0] == pytest.approx(math.log(0.6 / 0.3)) and m.dnll[0] > 0
    assert m.dnll[1] == pytest.approx(math.log(0.7 / 0.8)) and m.dnll[1] < 0
    assert m.dnll[2] == 0.0
    assert m.top1.tolist() == [False, True, True] and m.argmax.tolist() == [1, 1, 2]
    both = StepMetrics.concat([m, m])
    assert both.kl.size == 6 and both.top1.tolist() == [False, True, True] * 2


def test_answer_right_is_exact_match_of_every_token():
    assert answer_right(np.array([216, 36, 39]), np.array([216, 36, 39]))
    assert not answer_right(np.array([216, 36, 40]), np.array([216, 36, 39]))
    with pytest.raises(ParameterError, match="2 predictions for 3 answer tokens"):
        answer_right(np.array([1, 2]), np.array([1, 2, 3]))


def test_scope_mean_and_shape_checks():
    assert scope_mean(np.array([0.0, 1.0, 2.0, 3.0]), 1, 3) == 1.5
    assert scope_mean(np.array([1.0]), 1, 1) is None
    with pytest.raises(ParameterError, match="do not match"):
        step_metrics(np.zeros((2, 3)), np.zeros((2, 4)), np.zeros(2, int))
