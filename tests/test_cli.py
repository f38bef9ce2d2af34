"""The command line: ``python -m paper_check`` subcommands, their JSON, and one-line errors with exit status 2."""

import json
import textwrap

import numpy as np
import pytest

from kvcore.optima import belady
from kvcore.trace_files import save_trace
from kvcore.traces import AttentionTrace, PagingTrace
from paper_check.cli import main
from tests.command_line import ROOT, is_one_line_error, run_module


def run_cli(*args, cwd=ROOT):
    return run_module("paper_check", *args, cwd=cwd)


@pytest.fixture
def paging_file(tmp_path):
    seq = [0, 1, 2, 0, 3, 0, 1, 4, 0, 1, 2, 3, 4]
    return save_trace(PagingTrace.unit(seq), tmp_path / "seq.npy"), seq


def test_simulate_json_fields_and_values(paging_file, capsys):
    path, seq = paging_file
    assert main(["simulate", "--policy", "lru", "--capacity", "3", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("policy", "capacity", "model", "requests", "cost", "misses", "opt_cost", "ratio"):
        assert key in out
    opt = belady(PagingTrace.unit(seq), 3).cost
    assert out["policy"] == "LRU" and out["requests"] == len(seq) and out["opt_cost"] == opt
    assert out["ratio"] == pytest.approx(out["cost"] / opt)


def test_simulate_opt_alias_prints_the_optimum(paging_file, capsys):
    path, seq = paging_file
    assert main(["simulate", "--policy", "Belady", "-k", "3", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "OPT" and out["cost"] == out["opt_cost"] == belady(PagingTrace.unit(seq), 3).cost


def test_simulate_nm_reports_tracking_gap(tmp_path, capsys):
    a = np.array([[1, 0, 0], [.5, .5, 0], [.6, .1, .3]])
    path = save_trace(AttentionTrace.from_dense(a), tmp_path / "att.npz")
    assert main(["simulate", "--policy", "FIFO", "-k", "2", "--model", "nm", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "nm" and out["tracking_gap"] == pytest.approx(out["cost"] - out["opt_cost"])
    assert out["cost"] == pytest.approx(0.6)  # FIFO drops token 0 at step 2 and loses its 0.6


@pytest.mark.parametrize("make_bad, needle", [
    (lambda d: d / "missing.npy", "no such file"),
    (lambda d: (np.save(d / "f.npy", np.array([0.5, 1.5])), d / "f.npy")[1], "integers"),
    (lambda d: (np.save(d / "neg.npy", np.array([1, -2, 3])), d / "neg.npy")[1], "negative"),
    (lambda d: (np.savez(d / "rows.npz", kind="attention", indptr=[0, 1, 3], indices=[0, 0, 1],
                         weights=[1.0, 0.5, 0.4]), d / "rows.npz")[1], "sums to"),
])
def test_bad_trace_files_give_one_line_and_exit_2(tmp_path, make_bad, needle):
    path = make_bad(tmp_path)
    model = "nm" if str(path).endswith(".npz") else "rm"
    code, out, err = run_cli("simulate", "--policy", "LRU", "-k", "2", "--model", model, path)
    assert is_one_line_error(code, err, needle) and out == "", err


@pytest.mark.parametrize("args, needle", [
    (["--capacity", "0"], "capacity"),
    (["--capacity", "2", "--no-such-flag"], "unrecognized"),
    (["--capacity", "2", "--model", "xm"], "invalid choice"),
])
def test_bad_arguments_exit_2(paging_file, args, needle):
    path, _ = paging_file
    code, _, err = run_cli("simulate", "--policy", "LRU", *args, path)
    assert is_one_line_error(code, err, needle), err


def test_unknown_policy_figure_claim_and_unwritable_dir(paging_file, tmp_path):
    path, _ = paging_file
    for args, needle in ((["simulate", "--policy", "NoSuch", "-k", "2", path], "unknown policy"),
                         (["figure", "99"], "unknown figure"),
                         (["claim", "no-such-claim"], "unknown claim"),
                         (["--out", "/proc/forbidden"], "not writable")):
        code, _, err = run_cli(*args)
        assert is_one_line_error(code, err, needle), (args, err)


def test_policies_json_lists_the_registry(capsys):
    import policies

    assert main(["policies", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in listed} == {i.name for i in policies.all_policies()}
    assert all(p["citation"] and p["models"] for p in listed)


def test_list_names_every_claim_and_figure(capsys):
    import figures
    from theorems.claims import CLAIMS

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(cid in out for cid in CLAIMS) and all(f"  {fid} " in out for fid in figures.FIGURES)


def test_fuzz_target_errors_exit_2(tmp_path):
    (tmp_path / "notapolicy.py").write_text("class Thing:\n    pass\n")
    (tmp_path / "broken_import.py").write_text("raise RuntimeError('boom')\n")
    for target, needle in (("nosuchmodule:X", "cannot import"), ("broken_import:X", "cannot import"),
                           ("notapolicy:Missing", "no attribute"), ("notapolicy:Thing", "does not follow")):
        code, _, err = run_cli("fuzz", target, "-k", "2", cwd=tmp_path)
        assert is_one_line_error(code, err, needle), (target, err)


def test_fuzz_reports_a_contract_violation_not_a_ratio(tmp_path):
    (tmp_path / "cheater.py").write_text(textwrap.dedent("""
        from dataclasses import dataclass
        from policies.lru import LRU

        @dataclass
        class EvictsGhosts(LRU):
            name = "EvictsGhosts"

            def victim(self, t, protected):
                return 10**6  # never resident
    """))
    code, out, _ = run_cli("fuzz", "cheater:EvictsGhosts", "-k", "2", "--examples", "20", "--out", tmp_path,
                           cwd=tmp_path)
    assert code == 1 and "contract violation" in out and "not resident" in out


def test_fuzz_finds_lifo_and_the_trace_replays(tmp_path):
    code, out, _ = run_cli("fuzz", "LIFO", "-k", "3", "--examples", "150", "--json", "--out", tmp_path)
    rep = json.loads(out)
    assert code == 1 and rep["verdict"] == "violates" and rep["worst"] > 3
    code, out, _ = run_cli("simulate", "--policy", "LIFO", "-k", "3", "--json", rep["trace_file"])
    assert code == 0 and json.loads(out)["ratio"] == pytest.approx(rep["worst"])
