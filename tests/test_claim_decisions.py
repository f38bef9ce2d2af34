"""Every claim's verdict is computed from its values and reacts to them (``VERDICTS.md``, rules 1 and 2).

For each claim: its ``decide`` reproduces the committed verdict from the committed values (``paper_check/ledger.json``;
for a claim read on several models, each model's reading combined by VERDICTS.md's rule), and each registered flip --
an edit of those values on the other side of the line the decision's docstring names -- changes the verdict to the
stated one (the default model's reading; every other model's reading reacts to a flip too).  A claim whose decision
is replaced by a literal verdict fails here, and one whose computation is replaced by literals changes the locked
values (``tests/test_paper_check_run.py``).  Fast: no experiment runs, only the decisions.
"""

from __future__ import annotations

import copy

import pytest

from paper_check.report import load_ledger
from theorems.claims import CLAIMS, VERDICTS, Decision
from theorems.claims.registry import decide_models
from theorems.quality_inputs import claim_models

LEDGER = load_ledger()
FLIPS = [(cid, name) for cid, c in CLAIMS.items() for name in c.flips]
SEVERAL = [(cid, m) for cid in CLAIMS for m in claim_models(cid)[1:]]


def _own(values: dict) -> dict:
    """The default model's values of a claim (those outside the other models' ``per_model``)."""
    return {k: v for k, v in copy.deepcopy(values).items() if k != "per_model"}


def test_every_claim_has_a_decision_with_a_docstring_and_a_flip():
    for cid, c in CLAIMS.items():
        assert c.decide is not None, f"{cid}: no decide function"
        assert (c.decide.__doc__ or "").strip(), f"{cid}: decide must say what flips it"
        assert c.flips, f"{cid}: no flip registered"


def test_every_claim_is_in_the_ledger_with_values():
    assert set(LEDGER) == set(CLAIMS)
    for cid, entry in LEDGER.items():
        assert entry["verdict"] in VERDICTS and "values" in entry and "expected" in entry, cid
        assert entry.get("full_verdict") in VERDICTS, f"{cid}: the full profile's verdict is not in the ledger"


def test_quick_and_full_verdicts_agree():
    """VERDICTS.md rule 5: the full profile (larger k and longer sequences) must not change a verdict; a claim whose
    effect depends on size must show it at the quick sizes too (default-policy's counterexample is in both)."""
    differ = {cid: (e["verdict"], e["full_verdict"]) for cid, e in LEDGER.items() if e["verdict"] != e["full_verdict"]}
    assert not differ, differ


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_decision_reproduces_the_committed_verdict(cid):
    entry = LEDGER[cid]
    first = (claim_models(cid) or (None,))[0]
    d, _ = decide_models(CLAIMS[cid], copy.deepcopy(entry["values"]), entry["expected"], first)
    assert isinstance(d, Decision) and d.verdict == entry["verdict"], (cid, d.verdict, entry["verdict"])
    assert d.summary and (d.correction is not None or d.verdict != "holds-with-correction"), cid


@pytest.mark.parametrize("cid,flip", FLIPS, ids=[f"{c}: {f}" for c, f in FLIPS])
def test_a_flip_changes_the_verdict(cid, flip):
    entry = LEDGER[cid]
    edit, want = CLAIMS[cid].flips[flip]
    own = CLAIMS[cid].decide(_own(entry["values"]), entry["expected"]).verdict
    assert want != own, f"{cid}: the flip {flip!r} must lead to another verdict"
    got = CLAIMS[cid].decide(edit(_own(entry["values"])), entry["expected"]).verdict
    assert got == want, f"{cid}: flip {flip!r} gave {got!r}, expected {want!r}"


@pytest.mark.parametrize("cid,model", SEVERAL, ids=[f"{c} on {m}" for c, m in SEVERAL])
def test_every_model_reading_reacts_to_a_flip(cid, model):
    """A claim read on another model decides that model's values with the same ``decide``: at least one of its
    flips, applied to that model's values, changes that model's reading (its decision is not a constant there)."""
    entry, c = LEDGER[cid], CLAIMS[cid]
    assert model in entry["values"]["per_model"], f"{cid}: no reading on {model} in the ledger"
    theirs = copy.deepcopy(entry["values"]["per_model"][model])
    before = c.decide(copy.deepcopy(theirs), entry["expected"]).verdict
    moved = []
    for edit, _ in c.flips.values():
        try:
            moved.append(c.decide(edit(copy.deepcopy(theirs)), entry["expected"]).verdict != before)
        except (KeyError, IndexError):  # a flip written for the default model's prompts
            moved.append(False)
    assert any(moved), f"{cid}: no flip changes its reading on {model} ({before})"


def test_a_hard_wired_decision_is_caught():
    """Replace one decision by a literal verdict (the audit's hard-wired claim): its flips no longer flip."""
    cid = "lfu-unbounded"
    entry, c = LEDGER[cid], CLAIMS[cid]
    hard_wired = lambda values, expected: Decision(entry["verdict"], "LFU is unbounded.")  # noqa: E731
    flipped = [hard_wired(edit(copy.deepcopy(entry["values"])), entry["expected"]).verdict == want
               for edit, want in c.flips.values()]
    assert not any(flipped)
