"""The quality command line as a user types it (issue 20): ``--help`` from both entry points, and every bad input a
one-line error with exit status 2 -- checked on a machine without the ``[real]`` extra, so that no bad argument
waits for the model to load (torch and transformers made unimportable in the child)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.command_line import ROOT, is_one_line_error, run_module


def run_without_real(*args, timeout: float = 120) -> tuple[int, str, str]:
    """``python -m paper_check quality ARGS`` with torch, transformers and kvpress unimportable."""
    code = ("import sys; sys.modules['torch'] = sys.modules['transformers'] = sys.modules['kvpress'] = None; "
            "from paper_check.cli import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-c", code, "quality", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("module, args", [("realtrace.quality", ()), ("paper_check", ("quality",))])
def test_help_lists_every_option(module, args):
    code, out, err = run_module(module, *args, "--help")
    assert code == 0, err
    for opt in ("--all", "--budget", "--budgets", "--prompts", "--mode", "--policies", "--presses", "--seed", "--top",
                "--threads", "--workers", "--scheduler", "--steps", "--out", "--json", "press:NAME", "OPT"):
        assert opt in out, opt


@pytest.mark.parametrize("args, needle", [
    (("TOVA",), "give --budget K"),
    (("TOVA", "--budget", "0"), "--budget: 0 is below 1"),
    (("TOVA", "--budget", "8.5"), "--budget"),
    (("TOVA", "--budget", "8", "--budgets", "8,16"), "not both"),
    (("NoSuch", "--budget", "8"), "unknown policy 'NoSuch'"),
    (("TOVA", "--budget", "8", "--prompts", "nope"), "prompt 'nope'"),
    (("TOVA", "--budget", "8", "--workers", "2", "--scheduler", "tcp://h:1"), "not both"),
    (("press:NoSuch", "--budget", "8"), "press NoSuch: unknown"),
    (("press:KVzip", "--budget", "8"), "not bridged"),
    (("file:/nonexistent/s.npz", "--budget", "8"), "no such file"),
    (("TOVA", "--budget", "8", "--mode", "sideways"), "--mode"),
])
def test_bad_input_is_one_line_before_anything_loads(args, needle):
    code, out, err = run_without_real(*args)
    assert is_one_line_error(code, err, needle), (code, err)
    assert out == ""


def test_a_good_request_without_the_extra_names_it_in_one_line():
    code, out, err = run_without_real("TOVA", "--budget", "8", "--prompts", "kv-24-12", "--workers", "0")
    assert is_one_line_error(code, err, "[real]"), (code, err)
    assert out == ""
