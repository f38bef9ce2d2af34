"""Every registered claim computes its values from its inputs (issue 23): a claim that returned today's numbers as
constants would pass the ledger's values lock forever.

Each claim with declared sizes is rerun at a second input -- one size changed by the rule :func:`second_sizes`
states -- and its values must differ from the ledger's quick values (:func:`paper_check.report.value_differences`,
the lock's own comparison) while its verdict stays the ledger's.  Claims with no sizes are closed-form numbers or
fixed constructions; they are listed in :data:`NO_INPUT` with the test that pins their computation instead.
``test_a_hard_wired_claim_is_caught`` replaces ``lemma1-decay``'s computation by its ledger values and sees the check
fail (the audit's original mutant was on ``eq8-landlord``); edited in the source, ``thm4-threshold`` returning its
ledger values failed ``test_values_move_with_the_inputs_and_the_verdict_stays[thm4-threshold]``.  Written against
this test: ``gda-unification``'s values did not say how much was compared (now ``evictions_compared``) and the two
block-study claims ignored their declared sizes (now read through ``block_study(profile, sizes)``).
"""

from __future__ import annotations

from typing import Any

import pytest

from paper_check import report
from theorems.claims import CLAIMS, Computed, Context
from theorems.profile import QUICK


def _more_seeds(v):
    return v + 1 if isinstance(v, int) else (*v, max(v) + 1)


def _longer(v):
    return v + max(1, v // 4) if isinstance(v, int) else v


def _fewer(v):
    return v[:-1] if isinstance(v, tuple) and len(v) > 1 else v


# (does a size name match, how the second input changes it), first match wins: exactly one size changes, to a value
# every construction accepts -- one more seed, sequence, trace or bootstrap resample draws new random inputs, a quarter
# more steps lengthens every trace, one k (or one suffix, one m) fewer drops a row
RULES = (
    (lambda n: n.endswith("seeds"), _more_seeds),
    (lambda n: n in ("sequences", "sequences_of_each_kind", "traces", "k_other_graphs", "resamples"), lambda v: v + 1),
    (lambda n: n == "T" or n.endswith("_T") or n.endswith("_steps") or n == "T_per_k2", _longer),
    (lambda n: n.endswith("ks") or n.endswith("suffixes") or n == "ms", _fewer),
    (lambda n: n.endswith("suffix"), _longer),
)

# claims without sizes: closed-form numbers of the paper and the figure page, evaluated on their constants.  This
# test cannot vary them; the formula each one evaluates is checked against an independent derivation in the module
# named, but a claim returning its number as a literal would still pass there (issue 23 note)
NO_INPUT = {
    "eq2-kv-bytes": "tests/test_formulas.py",
    "eq3-throughput": "tests/test_formulas.py",
    **{cid: "tests/test_figure_page_numbers.py" for cid in (
        "blk-bytes", "blk-ema-table", "blk-half-life", "blk-recency-decay", "blk-priority-examples",
        "blk-decision-matrix")},
    # issue 29's claims read one committed quality sweep: the tests recount them from its raw documents
    "tracking-benchmark": "theorems/test_tracking_benchmark.py",
    "fig14-measured": "theorems/test_figure14_measured.py",
    "opt-blind-spot": "theorems/test_blind_spot.py",
    "surrogate-exactness": "theorems/test_surrogate_paradox.py",
}


def second_sizes(sizes: dict[str, Any]) -> dict[str, Any] | None:
    """``sizes`` with the first size :data:`RULES` knows changed; ``None`` when no rule applies (or nothing moves)."""
    for matches, change in RULES:
        for name, value in sizes.items():
            if matches(name) and change(value) != value:
                return {**sizes, name: change(value)}
    return None


def moved_at_second_input(cid: str, compute=None) -> tuple[list[str], str, str]:
    """(value differences from the ledger, ledger verdict, fresh verdict) of claim ``cid`` at its second input."""
    claim = CLAIMS[cid]
    if compute is not None:
        claim = type(claim)(**{**claim.__dict__, "compute": compute})
    entry = report.load_ledger()[cid]
    res = claim.run(Context(QUICK, out_dir=_scratch()), second_sizes(claim.sizes_at(QUICK)))
    return report.value_differences(report.to_jsonable(res.values), entry["values"]), entry["verdict"], res.verdict


def _scratch():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="claim-inputs-"))


SIZED = sorted(cid for cid, c in CLAIMS.items() if second_sizes(c.sizes_at(QUICK)) is not None)


def test_every_claim_has_a_second_input_or_a_stated_reason():
    unsized = sorted(cid for cid in CLAIMS if cid not in SIZED)
    assert unsized == sorted(NO_INPUT), "a claim with no second input must say in NO_INPUT what pins it"


@pytest.mark.parametrize("cid", SIZED)
def test_values_move_with_the_inputs_and_the_verdict_stays(cid):
    diffs, locked, fresh = moved_at_second_input(cid)
    assert diffs, f"{cid}: the same values at {second_sizes(CLAIMS[cid].sizes_at(QUICK))}: hard-wired?"
    assert fresh == locked, f"{cid}: verdict {locked!r} -> {fresh!r} at the second input"


def test_a_hard_wired_claim_is_caught():
    entry = report.load_ledger()["lemma1-decay"]
    constant = lambda ctx: Computed(entry["values"], entry["expected"])  # noqa: E731  (the mutant)
    diffs, _, _ = moved_at_second_input("lemma1-decay", constant)
    assert diffs == []  # so test_values_move_with_the_inputs_and_the_verdict_stays fails on it
