"""Every command a user types, through the real command line: each subcommand's --help, and the bad inputs of issue 14
-- each must give one line on stderr and exit 2 (or a correct result), never a traceback, and Ctrl-C must exit 130
and leave every output as it was."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kvcore.trace_files import save_trace
from kvcore.traces import AttentionTrace, PagingTrace
from paper_check.cli import COMMAND
from tests.command_line import ROOT, interruptible, is_one_line_error, run_module, wait_until_importing

SUBCOMMANDS = sorted(COMMAND.parser()._subparsers._group_actions[0].choices)   # noqa: SLF001 (argparse's own table)


def run_cli(*args, cwd=ROOT):
    return run_module("paper_check", *args, cwd=cwd)


@pytest.mark.parametrize("sub", [None] + SUBCOMMANDS)
def test_help_of_every_subcommand(sub):
    code, out, err = run_cli(*([sub] if sub else []), "--help")
    assert code == 0 and "usage:" in out and err == "", (sub, err[-500:])


@pytest.fixture
def unit_file(tmp_path):
    return save_trace(PagingTrace.unit([0, 1, 2, 0, 3, 0, 1]), tmp_path / "t.npy")


@pytest.mark.parametrize("content, needle", [
    ("0\n9223372036854775808\n", "int64"),
    ("0\n1_000\n", "line 2"),
    ("0\n+1\n", "line 2"),
    ("0\n\u0661\u0662\n", "line 2"),
    ("# nothing\n", "empty"),
])
def test_bad_txt_traces(tmp_path, content, needle):
    path = tmp_path / "t.txt"
    path.write_text(content, encoding="utf-8")
    code, _, err = run_cli("simulate", "--policy", "LRU", "-k", "2", path)
    assert is_one_line_error(code, err, needle), err


@pytest.mark.parametrize("args, needle", [
    (["--seed", "-1"], "--seed"),
    (["--capacity", "1_000"], "--capacity"),
    (["--param", "threshold=abc"], "threshold"),
    (["--param", "threshold=null"], "threshold"),
    (["--param", "threshold=[1]"], "threshold"),
    (["--param", "threshold=1e400"], "does not fit"),
    (["--param", "threshold=2"], "threshold"),
    (["--param", "nosuch=1"], "unknown parameter"),
    (["--opt-capacity", "5"], "exceeds"),
])
def test_bad_simulate_arguments(unit_file, args, needle):
    extra = [] if "--capacity" in args else ["--capacity", "2"]
    code, _, err = run_cli("simulate", "--policy", "LRU", *extra, *args, unit_file)
    assert is_one_line_error(code, err, needle), err


@pytest.mark.parametrize("module, args, needle", [
    ("paper_check", ["capture", "--tokens", "1_0", "--out", "x"], "--tokens: '1_0' is not an integer"),
    ("paper_check", ["capture", "--top", "+3", "--out", "x"], "--top: '+3' is not an integer"),
    ("paper_check", ["press", "TOVA", "--ratio", "nan"], "--ratio: 'nan' is not a decimal number"),
    ("paper_check", ["press", "TOVA", "--ratio", "1"], "--ratio: 1 is not in [0, 1)"),
    ("paper_check", ["press", "--all", "--ratios", "0.5,inf"], "--ratios: 'inf' is not a decimal number"),
    ("paper_check", ["press", "--all", "--decoding-budgets", "64,"], "--decoding-budgets: '64,' is not a comma"),
    ("realtrace", ["report", "--budget", "1"], "--budget: 1 is below 2"),
    ("realtrace", ["study", "--traces", "x", "--out", "y", "--windows", "3,٣"], "--windows: '٣' is not an integer"),
    ("bench", ["--seed", "-1"], "--seed: -1 is below 0"),
    ("bench", ["--opt-timeout", "1e400"], "--opt-timeout: 1e400 is not in (0, 1e+07]"),
])
def test_numbers_are_parsed_strictly_by_every_command(module, args, needle):
    """Python's int() and float() would take 1_0, +3, a non-ASCII digit, nan and 1e400; no command does."""
    code, _, err = run_module(module, *args, timeout=300)
    assert is_one_line_error(code, err, needle), err


def test_gda_attention_refresh_must_be_a_boolean(tmp_path):
    path = save_trace(AttentionTrace.from_rows([{0: 1.0}, {0: 0.5, 1: 0.5}]), tmp_path / "a.npz")
    code, _, err = run_cli("simulate", "--policy", "GD-A", "-k", "1", "--param", "rm_attention_refresh=abc", path)
    assert is_one_line_error(code, err, "rm_attention_refresh"), err


def test_simulate_a_user_policy_and_skip_the_optimum(unit_file, tmp_path):
    (tmp_path / "mine.py").write_text("from policies.lru import LRU\n\n\nclass Mine(LRU):\n    name = 'Mine'\n")
    code, out, err = run_cli("simulate", "--policy", "mine:Mine", "-k", "2", "--json", "--no-opt", unit_file,
                             cwd=tmp_path)
    rec = json.loads(out)
    assert code == 0 and rec["policy"] == "Mine" and "opt_cost" not in rec and "ratio" not in rec, err
    code, out, _ = run_cli("simulate", "--policy", "mine:Mine", "-k", "2", "--json", unit_file, cwd=tmp_path)
    rec = json.loads(out)
    assert code == 0 and rec["opt_certificate"]["solver"] and rec["ratio"] >= 1


def test_rm_on_attention_explains_free_arrivals(tmp_path):
    path = save_trace(AttentionTrace.from_rows([{0: 1.0}, {1: 1.0}, {0: 0.5, 2: 0.5}]), tmp_path / "a.npz")
    code, out, _ = run_cli("simulate", "--policy", "LRU", "-k", "2", "--json", path)
    assert code == 0 and "free" in json.loads(out)["note"]


def test_figure_and_claim_write_under_the_current_directory(tmp_path):
    code, out, err = run_cli("figure", "2", cwd=tmp_path)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "paper_check_out" / "figures").iterdir()) == \
        ["fig02_kv_bytes.png", "fig02_kv_bytes.svg"]
    code, out, err = run_cli("claim", "nm-belady-analog", cwd=tmp_path)
    assert code == 0, err
    assert (tmp_path / "paper_check_out" / "paper_check" / "counterexamples" / "nm_belady_future_mass.npz").is_file()
    assert not (ROOT / "paper_check" / "out").exists()


def _interrupt(args, after: float, cwd: Path):
    p = interruptible([sys.executable, "-m", "paper_check", *args], cwd=cwd)
    wait_until_importing(p)
    time.sleep(after)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    return p.returncode, err


@pytest.mark.parametrize("after", [0.3, 2.0, 6.0])
def test_ctrl_c_during_the_main_job_leaves_the_previous_outputs(tmp_path, after):
    """A previous run's files are in the output root; Ctrl-C at several moments must exit 130 (or finish 0/1 when
    the run beat the signal) and leave every file either as it was or as the finished run wrote it -- never a
    partial file, never a staging directory."""
    before = {}
    for rel in ("paper_check/report.md", "paper_check/report.json", "figures/fig02_kv_bytes.png"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
        before[rel] = (ROOT / rel).read_bytes()
    code, err = _interrupt(["--out", tmp_path], after, ROOT)
    assert code in (130, 0, 1) and "Traceback" not in err, (code, err[-2000:])
    if code == 130:
        assert all((tmp_path / rel).read_bytes() == data for rel, data in before.items())
    assert not list(tmp_path.glob(".paper_check-staging-*"))


def test_sigint_inside_the_final_renames_is_held_until_they_are_done(tmp_path, monkeypatch):
    from paper_check import report

    st = report.Staging(tmp_path)
    for i in range(5):
        st.path(f"figures/f{i}.png").write_bytes(b"x" * i)
    real_replace = os.replace
    calls = []

    def replace_and_interrupt(a, b):
        calls.append(b)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        real_replace(a, b)

    monkeypatch.setattr(report.os, "replace", replace_and_interrupt)
    with pytest.raises(KeyboardInterrupt):
        st.commit()
    assert len(calls) == 5 and sorted(p.name for p in (tmp_path / "figures").iterdir()) == \
        [f"f{i}.png" for i in range(5)]


def test_outputs_have_normal_permissions(tmp_path):
    code, _, err = run_cli("figure", "2", "--out", tmp_path)
    assert code == 0, err
    assert all((p.stat().st_mode & 0o777) == 0o644 for p in (tmp_path / "figures").iterdir())


def test_empty_trace_is_refused(tmp_path):
    np.save(tmp_path / "e.npy", np.array([], dtype=np.int64))
    code, _, err = run_cli("simulate", "--policy", "LRU", "-k", "2", tmp_path / "e.npy")
    assert is_one_line_error(code, err, "empty"), err


SWALLOWED_INTERRUPT = """
import weakref
from kvcore.command import entry

class Token:
    pass

def main():
    token = Token()
    def finalizer(_):
        raise KeyboardInterrupt  # as a Ctrl-C that arrives while Python runs a weakref callback
    ref = weakref.ref(token, finalizer)
    del token
    for _ in range(10 ** 7):
        pass
    print("finished")
    return 0

entry("probe", lambda: main)
"""


def test_a_ctrl_c_swallowed_by_a_finalizer_still_ends_the_command():
    """Python reports a KeyboardInterrupt raised in a finalizer as "Exception ignored ..." with a traceback and
    carries on (seen: the main job finished with exit 0 after a Ctrl-C); kvcore.command.entry delivers it again."""
    p = interruptible([sys.executable, "-c", SWALLOWED_INTERRUPT], cwd=ROOT)  # redelivery needs SIGINT handled
    out, err = p.communicate(timeout=60)
    assert (p.returncode, out, err) == (130, "", "probe: interrupted\n"), (p.returncode, err[-500:])


CONVERTED_INTERRUPT = """
import os, signal
from kvcore.command import Command, entry

def run(args):
    try:
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C landing inside a compiled module's initialization ...
        for _ in range(10 ** 7):
            pass
    except KeyboardInterrupt:
        raise ImportError("initialization failed")  # ... which reports it as a failed import (scipy, CI)
    print("finished")
    return 0

entry("probe", lambda: Command("probe", "", lambda p: None, run, internal_error=INTERNAL).main)
"""


@pytest.mark.parametrize("internal", [False, True])
def test_a_ctrl_c_turned_into_another_exception_still_ends_the_command(internal):
    """A library that catches the KeyboardInterrupt and raises something else in its place (scipy's extension
    modules raise "ImportError: initialization failed"; seen in CI when the Ctrl-C probe landed on ``from scipy
    import stats``) must not end the command with a traceback (or, for a command with its own failures, exit 3)."""
    src = CONVERTED_INTERRUPT.replace("INTERNAL", str(internal))
    p = interruptible([sys.executable, "-c", src], cwd=ROOT)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, out, err) == (130, "", "probe: interrupted\n"), (p.returncode, err[-500:])
