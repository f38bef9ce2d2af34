"""The main job end to end: ``python -m paper_check --out DIR`` builds every figure, gives every catalogue claim a
verdict backed by this run, matches the committed ledger (verdicts and values), and writes exactly the committed
report, figures and counterexamples -- so the main job on a fresh clone leaves ``git status`` clean."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from paper_check import report
from theorems.claims import CLAIMS, SPEC_IDS, VERDICTS, ClaimResult
from theorems.profile import QUICK

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT.parent / "shared" / "SPEC.md"


def test_every_spec_claim_id_is_registered():
    assert set(SPEC_IDS) <= set(CLAIMS)
    if SPEC.exists():  # the catalogue table of SPEC section 6: | `id` or id | source | claim |
        section = SPEC.read_text().split("## 6.")[1].split("## 7.")[0]
        ids = set(re.findall(r"^\| ([a-z0-9][a-z0-9-]+) \|", section, re.M)) - {"id"}
        assert ids and ids <= set(SPEC_IDS), ids - set(SPEC_IDS)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    p = subprocess.run([sys.executable, "-m", "paper_check", "--out", str(out)], capture_output=True, text=True,
                       timeout=1200, cwd=ROOT)
    return p, out


def test_quick_run_matches_the_ledger_and_reports_every_claim(quick_run):
    p, out = quick_run
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads((out / "paper_check" / "report.json").read_text())
    assert [c["id"] for c in rep["claims"]] == list(CLAIMS)
    for c in rep["claims"]:
        assert c["verdict"] in VERDICTS and c["values"] and c["expected"] and c["summary"], c["id"]
        if c["verdict"] == "not-checkable":
            assert "missing" in c["summary"].lower() or "control" in c["summary"].lower(), c["id"]
        # every claim names the test module(s) that check it, and they exist
        tests = [t.strip().split(" ")[0].split("::")[0] for t in str(c["evidence"].get("test", "")).split(",")
                 if t.strip()]
        assert tests and all((ROOT / t).is_file() for t in tests), (c["id"], c["evidence"].get("test"))
    assert rep["ledger_changes"] == []
    md = (out / "paper_check" / "report.md").read_text()
    assert all(f"| [{cid}](#{cid}) |" in md for cid in CLAIMS)
    assert "Real attention traces" in md and "committed trace set" in md


def test_the_quick_run_names_the_committed_quality_sets_in_one_fallback_line(quick_run):
    """The quick profile decides every quality claim from the committed input sets (issue 29): exactly one stderr
    line starts ``FALLBACK:``, naming each declared set of each model it is committed for (issue 49) and the reason;
    each claim that reads a set says so in its evidence, for every model the claim is read on and no other."""
    from theorems.quality_inputs import QUALITY_INPUTS, claim_models

    p, out = quick_run
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("FALLBACK:")]
    dirs = ", ".join(s.directory_for(m) for s in QUALITY_INPUTS for m in s.models)
    assert lines == [f"FALLBACK: committed quality results used: {dirs} (quick profile; --full recomputes them from "
                     "the model)"], p.stderr[-3000:]
    rep = {c["id"]: c for c in json.loads((out / "paper_check" / "report.json").read_text())["claims"]}
    for s in QUALITY_INPUTS:
        for cid in s.claims:
            for m in s.models:
                named = f"{s.directory_for(m)} (committed)" in rep[cid]["evidence"]["inputs"]
                assert named == (m in claim_models(cid)), (cid, m)
    for cid, stem in (("regret-surrogate", "quality_regret_surrogate"), ("gda-validation", "quality_gda_shift"),
                      ("surrogate-failure-directions", "quality_value_directions"),
                      ("displaced-mass-output-error", "quality_heads_displaced_error")):
        assert f"figures/{stem}.png" in rep[cid]["evidence"]["figure"], cid


def test_the_run_reproduces_the_committed_outputs_byte_for_byte(quick_run):
    """What the main job writes into the repository is what is committed: report, figures, counterexamples."""
    p, out = quick_run
    assert p.returncode == 0, p.stderr[-3000:]
    written = sorted(f.relative_to(out) for f in out.rglob("*") if f.is_file())
    assert written, "the run wrote nothing"
    for rel in written:
        assert (ROOT / rel).is_file(), f"{rel} is written by the main job but not committed"
        same = (out / rel).read_bytes() == (ROOT / rel).read_bytes()  # a bool: pytest would diff megabytes
        assert same, f"{rel} differs from the committed file"
    committed = {f.relative_to(ROOT) for f in (ROOT / "paper_check" / "counterexamples").glob("*")}
    assert committed <= set(written), f"stale committed counterexamples: {sorted(committed - set(written))}"
    assert not list(out.glob(".paper_check-staging-*")), "the staging directory was left behind"


def test_the_committed_report_names_no_machine_path():
    """Nothing in the committed report depends on where the checkout lives (a fresh clone elsewhere rewrites
    these files byte for byte): no absolute path of this checkout, of the install or of a temporary folder."""
    for name in ("report.md", "report.json"):
        text = (ROOT / "paper_check" / name).read_text()
        for marker in (str(ROOT), "site-packages", "/tmp/", "/home/", ".paper_check-staging-"):
            assert marker not in text, f"paper_check/{name} names {marker!r}"


def test_a_changed_verdict_or_value_and_a_missing_claim_are_named():
    ledger = {"eq6-det-lower-bound": {"verdict": "holds", "values": {"x": 1.0, "rows": [1, 2]}},
              "lfu-unbounded": {"verdict": "holds", "values": {"x": 1.0}},
              "gone": {"verdict": "holds", "values": {}}}
    results = {"eq6-det-lower-bound": ClaimResult("refuted", "s", {"x": 1.0, "rows": [1, 2]}, {"y": 2}),
               "lfu-unbounded": ClaimResult("holds", "s", {"x": 1.0 + 1e-3}, {"y": 2}),
               "new-claim": ClaimResult("holds", "s", {}, {})}
    changes = report.ledger_changes(results, QUICK, ledger=ledger)
    assert "eq6-det-lower-bound: verdict changed from 'holds' to 'refuted'" in changes
    assert any(c.startswith("lfu-unbounded: 1 values changed, first: /x: 1.0 -> 1.001") for c in changes)
    assert "new-claim: verdict 'holds' has no ledger entry (verdict)" in changes
    assert "gone: in the ledger but did not run" in changes
    # within the stated tolerance nothing changes
    results["lfu-unbounded"] = ClaimResult("holds", "s", {"x": 1.0 + 1e-9}, {"y": 2})
    assert not [c for c in report.ledger_changes(results, QUICK, ledger=ledger) if c.startswith("lfu")]


def test_a_hard_wired_claim_fails_the_values_lock():
    """The audit's hard-wired claim: lfu-unbounded's computation replaced by literal rows.  The committed values
    (computed) differ from the literals, so the run reports it and exits 1."""
    ledger = report.load_ledger()
    literal = {"runs": [{"k": 2, "m": 2, "lfu": 3.0, "opt": 3.0, "ratio": 1.0, "exact_as_derived": True}]}
    res = ClaimResult(ledger["lfu-unbounded"]["verdict"], "LFU is unbounded.", literal, ledger["lfu-unbounded"]["expected"])
    changes = report.ledger_changes({"lfu-unbounded": res}, QUICK, complete=False)
    assert changes and "values changed" in changes[0]


def test_the_full_captures_model_copy_is_none_where_the_quality_cache_is_unusable(tmp_path, monkeypatch):
    """The capture of ``--full`` falls back to the GGUF file (``None``) when the quality cache cannot be used."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("KV_QUALITY_CACHE", str(tmp_path / "file" / "cache"))
    assert report._model_copy() is None
