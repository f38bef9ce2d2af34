"""The marking argument of the paper's Section 4, decided exactly (claim ``marking-hk-sum``).

On a phase with one new token among k+1, the i-th stale token re-attended is absent with probability 1/(k-i+1)
and the phase costs H_k in expectation, where LRU on its adaptive sequence pays k per phase; as a competitive
ratio the factor is not H_k: with two new tokens per phase the excess of E[Marking] over H_k OPT grows.  All
expectations are exact (:func:`kvcore.exact_expectation.expected_cost` over every draw of the registered Marking).
"""

from fractions import Fraction

from tests.broken_policies import MarkingLowestUnmarked
from theorems.results.randomized import harmonic_exact, marking_phase_sum_table


def test_phase_probabilities_are_exactly_one_over_k_minus_i_plus_one():
    table = marking_phase_sum_table(ks=(2, 3, 4), phases=5, ratio_phases=(6, 12))
    for r in table.rows:
        if r.workload == "phase sum":
            probs = [Fraction(p) for p in r.params["per_request_probability"]]
            assert probs == [1] + [Fraction(1, r.k - i + 1) for i in range(1, r.k)], (r.k, probs)
            assert sum(probs) == harmonic_exact(r.k) and r.params["phase_sums_equal_H_k"]
        elif r.workload == "deterministic":
            assert r.alg_cost == r.k and r.params["marking_within_H_k"]
        else:   # two new per phase: E[Marking] - H_k OPT grows, so H_k is not Marking's ratio
            a, b = r.params["excess_over_H_k_opt"]
            assert b > max(a, 0) and r.ratio <= r.params["ratio_2H_k_minus_1"]
    assert table.holds, table.explain()


def test_a_deterministic_choice_among_unmarked_tokens_loses_the_harmonic_sum():
    table = marking_phase_sum_table(ks=(3,), phases=5, ratio_phases=(6, 12), marking=MarkingLowestUnmarked)
    phase = next(r for r in table.rows if r.workload == "phase sum")
    assert not phase.holds and phase.params["per_request_probability"] != phase.params["predicted"]
