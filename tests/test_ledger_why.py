"""The ledger says why a claim moved when the reason is a policy registered since it was written (issue 22).

A claim that runs every registered policy changes its values when a policy is added; the line naming the change
must then name the new policy, and only where the claim's values name it.
"""

from __future__ import annotations

import json

from paper_check import report
from theorems.claims import ClaimResult
from theorems.profile import QUICK


def test_write_ledger_records_the_registry(tmp_path):
    path = tmp_path / "ledger.json"
    report.write_ledger({}, QUICK, path)
    assert json.loads(path.read_text())["policies"] == report.registered_policies()
    assert report.ledger_policies(path) == report.registered_policies()
    assert report.ledger_policies(tmp_path / "absent.json") is None


def test_a_changed_claim_names_the_policy_added_since_the_ledger_and_only_where_its_values_name_it():
    known = [p for p in report.registered_policies() if p != "LRU"]  # as if LRU had been added since
    locked = {"rows": [{"policy": "FIFO", "ratio": 1.5}]}
    moved_by_lru = {"rows": [{"policy": "FIFO", "ratio": 1.5}, {"policy": "LRU (k = 4)", "ratio": 2.0}]}
    moved_alone = {"rows": [{"policy": "FIFO", "ratio": 1.75}]}
    ledger = {"a": {"verdict": "holds", "values": locked}, "b": {"verdict": "holds", "values": locked}}
    results = {"a": ClaimResult("holds", "s", moved_by_lru, {}), "b": ClaimResult("holds", "s", moved_alone, {})}
    changes = report.ledger_changes(results, QUICK, ledger=ledger, known_policies=known)
    assert len(changes) == 2
    assert changes[0].startswith("a: 1 values changed") and changes[0].endswith(
        "(values name LRU, registered since the ledger was written)"), changes
    assert changes[1].startswith("b: 1 values changed") and "registered since" not in changes[1], changes
    # with the full registry known nothing is attributed; a ledger without a list attributes nothing either
    for k in (report.registered_policies(), None):
        assert all("registered since" not in c for c in
                   report.ledger_changes(results, QUICK, ledger=ledger, known_policies=k))


def test_names_policy_matches_whole_names_only():
    assert report.names_policy({"LRU": 1}, "LRU") and report.names_policy(["x", "LRU (k = 3)"], "LRU")
    assert not report.names_policy({"R-LRU-H": 1, "note": "LRU-like"}, "LRU")
