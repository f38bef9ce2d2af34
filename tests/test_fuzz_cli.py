"""The fuzz command line as a user types it (``python -m verify ...``; ``paper_check fuzz`` mounts the same
:data:`verify.cli.COMMAND`): exit statuses, one-line errors, what is written where, the budget, Ctrl-C.

Argument errors are checked in-process through :func:`verify.cli.main` (the same parser and ``run``); the rest
through a subprocess."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import policies
from adversary import constructions
from kvcore.measure import measure
from kvcore.trace_files import load_trace
from tests.command_line import interruptible, is_one_line_error, run_module
from verify.cli import main
from verify.supervisor import GRACE


def fuzz_cli(*args, cwd, timeout=120):
    return run_module("verify", *args, cwd=cwd, timeout=timeout)


def test_help_lists_every_option(tmp_path):
    code, out, err = fuzz_cli("--help", cwd=tmp_path)
    assert code == 0 and not err
    for opt in ("--capacity", "--model", "--against", "--examples", "--seconds", "--call-timeout", "--seed", "--rho",
                "--W", "--tau", "--out", "--json"):
        assert opt in out, opt


@pytest.mark.parametrize("argv, needle", [
    (["LRU", "-k", "1_000"], "not an integer"),
    (["LRU", "-k", "+3"], "not an integer"),
    (["LRU", "-k", "0"], "below 1"),
    (["LRU", "-k", "3", "--seconds", "nan"], "not a decimal number"),
    (["LRU", "-k", "3", "--seconds", "0"], "not in (0"),
    (["LRU", "-k", "3", "--seed", "-1"], "below 0"),
    (["LRU", "-k", "3", "--examples", "0"], "below 1"),
    (["LRU", "-k", "3", "--model", "xm"], "invalid choice"),
    (["LRU", "-k", "3", "--tau", "0.3"], "apply to --model nm"),
    (["LRU", "-k", "3", "--model", "nm", "--tau", "1.5"], "not in (0, 1]"),
    (["LRU", "-k", "1", "--model", "nm"], "needs k >= 2"),
    (["LFU", "-k", "3", "--model", "nm"], "declares models"),
    (["NoSuchPolicy", "-k", "3"], "unknown policy"),
    (["nosuchmodule:X", "-k", "3"], "cannot import"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    assert is_one_line_error(code, err, needle), err
    assert list(tmp_path.iterdir()) == []


def test_user_modules_that_cannot_be_policies_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "raises_at_import.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / "notapolicy.py").write_text("class Thing:\n    pass\n")
    for target, needle in (("exits_at_import:X", "called sys.exit(0)"), ("raises_at_import:X", "RuntimeError: boom"),
                           ("notapolicy:Missing", "no attribute"), ("notapolicy:Thing", "does not follow")):
        code = main([target, "-k", "2"])
        out, err = capsys.readouterr()
        assert is_one_line_error(code, err, needle) and not out, (target, err)
    code, out, err = fuzz_cli("exits_at_import:X", "-k", "2", cwd=tmp_path)   # the same through a real process
    assert code == 2 and not out and err.strip() == ("python -m verify: error: policy 'exits_at_import:X': importing "
                                                    "'exits_at_import' called sys.exit(0) (a target is a registered "
                                                    "name, module:Class or path/to/file.py:Class)")


MINE = """\
from dataclasses import dataclass

from helper_of_mine import oldest
from policies.base import Policy


@dataclass
class MyPolicy(Policy):
    name = "Mine"

    def on_reset(self):
        self._order = {}

    def on_admit(self, t, item, cost):
        self._order[item] = None

    def on_evict(self, t, item):
        self._order.pop(item, None)

    def victim(self, t, protected):
        return oldest(self._order, protected)
"""


def test_a_file_path_target_is_fuzzed_like_a_module(tmp_path):
    """Issue 54 item 3: ``path/to/mine.py:MyPolicy`` is a target, run from a folder where ``mine`` is not
    importable as a module; the file's own folder is on its path (it imports a neighbour).  The policy is FIFO, so
    every construction's value is the registered FIFO's on the same trace, measured here in this process."""
    folder = tmp_path / "path" / "to"
    folder.mkdir(parents=True)
    (folder / "mine.py").write_text(MINE)
    (folder / "helper_of_mine.py").write_text("def oldest(order, protected):\n"
                                              "    return next(i for i in order if i not in protected)\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    code, out, err = fuzz_cli("../path/to/mine.py:MyPolicy", "--capacity", "3", "--seconds", "4", "--json",
                              cwd=work)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["policy"] == "Mine" and rep["verdict"] == "no violation found"
    fifo = policies.resolve("FIFO")
    for name in ("cyclic k+1", "adaptive k+1"):
        trace = next(c for c in constructions("rm") if c.name == name).built(3, fifo)
        assert rep["constructions"][name] == pytest.approx(measure(fifo, trace, 3).ratio, rel=1e-9), name


@pytest.mark.parametrize("target, needle", [
    ("no/such/file.py:MyPolicy", "cannot import 'no/such/file.py': FileNotFoundError"),
    ("nosuchmodule:X", "cannot import 'nosuchmodule': ModuleNotFoundError"),
    ("mine.py", "unknown policy 'mine.py'"),
    ("notes.txt:X", "cannot import 'notes.txt': ModuleNotFoundError"),
])
def test_a_target_that_cannot_be_imported_names_the_accepted_forms(target, needle, tmp_path):
    (tmp_path / "notes.txt").write_text("not python\n")
    code, out, err = fuzz_cli(target, "--capacity", "3", cwd=tmp_path)
    assert is_one_line_error(code, err, needle) and not out, err
    assert "a target is a registered name, module:Class or path/to/file.py:Class" in err, err


def test_out_is_checked_before_the_search(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    t0 = time.monotonic()
    assert main(["LRU", "-k", "3", "--seconds", "600", "--out", "afile"]) == 2
    assert time.monotonic() - t0 < 5 and "not a directory" in capsys.readouterr().err


def test_a_violation_writes_a_named_folder_with_normal_files_that_replay(tmp_path):
    code, out, err = fuzz_cli("LFU", "-k", "3", "--examples", "60", "--seconds", "60", "--json", cwd=tmp_path)
    rep = json.loads(out)
    assert code == 1 and rep["verdict"] == "violates" and rep["exit_code"] == 1, err
    folder = tmp_path / "fuzz-counterexamples"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fuzz-counterexamples"]   # no .hypothesis, no loose file
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["LFU-k3-rm-seed0-report.json", "LFU-k3-rm-seed0-shrunk.npy", "LFU-k3-rm-seed0-worst.npy"]
    umask = os.umask(0)
    os.umask(umask)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask for p in folder.iterdir())
    # the worst found and the shrunk example are reported apart, and each file replays to its value
    assert rep["shrunk"] <= rep["worst"] and rep["shrunk"] > 3
    for label, value in (("worst", rep["worst"]), ("shrunk", rep["shrunk"])):
        trace = load_trace(folder / f"LFU-k3-rm-seed0-{label}.npy")
        assert measure(policies.resolve("LFU"), trace, 3).ratio == pytest.approx(value)
    assert json.loads((folder / "LFU-k3-rm-seed0-report.json").read_text())["verdict"] == "violates"


def test_no_violation_writes_nothing_and_the_budget_bounds_the_search(tmp_path):
    # 4 s: the budget of a command line counts from its process's start, imports included (issue 50 item 5)
    code, out, err = fuzz_cli("FIFO", "-k", "2", "--seconds", "4", "--examples", "20000", cwd=tmp_path)
    assert code == 0 and "verdict:       no violation found" in out and not err
    assert list(tmp_path.iterdir()) == []   # no folder, no .hypothesis directory
    seconds = float(out.split(" traces measured in ")[1].split(" s")[0])
    examples = int(out.split("search:")[1].split()[0])
    assert seconds <= 4 + GRACE + 0.5 and examples < 20000


def test_explicit_out_is_created_before_the_search_and_stays_empty(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["FIFO", "-k", "2", "--examples", "5", "--seconds", "3", "--out", "a/b/c"]) == 0
    assert (tmp_path / "a/b/c").is_dir() and list((tmp_path / "a/b/c").iterdir()) == []


def test_internal_errors_exit_3(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["LRU", "-k", "1000000000000", "--seconds", "2", "--json"]) == 3
    rep = json.loads(capsys.readouterr().out)
    assert rep["verdict"] == "internal error" and "MemoryError" in rep["message"]
    assert rep["constructions"]["adaptive k+1"].startswith("failed: internal error: MemoryError")
    assert list(tmp_path.iterdir()) == []


FRAGILE = """
from dataclasses import dataclass
from policies.lru import LRU

@dataclass
class Fragile(LRU):
    name = "Fragile"

    def on_admit(self, t, item, cost):
        if item == self.k + 1 and t <= self.k:
            raise ZeroDivisionError("item k+1 came too early")
        super().on_admit(t, item, cost)
"""


def test_a_policy_raising_only_in_the_search_is_one_line_no_traceback(tmp_path, capfd, monkeypatch):
    (tmp_path / "fragile.py").write_text(FRAGILE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    fragile = policies.resolve("fragile:Fragile")
    for c in constructions("rm"):   # every construction runs it without a failure: only the search can find one
        measure(fragile, c.built(3, fragile), 3)
    code = main(["fragile:Fragile", "-k", "3", "--examples", "60", "--seconds", "60"])
    out, err = capfd.readouterr()   # file descriptors: the worker's and the policy's output included
    assert code == 1 and "Traceback" not in out + err and "verdict:       policy error" in out, out + err
    assert "ZeroDivisionError: item k+1 came too early (in admit at step" in out
    assert (tmp_path / "fuzz-counterexamples" / "fragile_Fragile-k3-rm-seed0-failing.npy").exists()


def _processes_mentioning(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
def test_ctrl_c_exits_130_without_a_traceback_and_leaves_no_process(tmp_path):
    marker = f"slowpolicy_{os.getpid()}"
    (tmp_path / f"{marker}.py").write_text(textwrap.dedent("""
        import time
        from dataclasses import dataclass
        from policies.lru import LRU

        @dataclass
        class Slow(LRU):
            name = "Slow"

            def victim(self, t, protected):
                time.sleep(0.05)
                return super().victim(t, protected)
    """))
    p = interruptible([sys.executable, "-m", "verify", f"{marker}:Slow", "-k", "3", "--seconds", "120"], cwd=tmp_path)
    deadline = time.monotonic() + 60
    while len(_processes_mentioning(marker)) < 3 and time.monotonic() < deadline:  # supervisor, worker, host
        time.sleep(0.2)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130 and err.strip() == "python -m verify: interrupted" and "Traceback" not in out + err, err
    time.sleep(0.5)
    assert _processes_mentioning(marker) == []
    assert sorted(x.name for x in tmp_path.iterdir()) == [f"{marker}.py"]
