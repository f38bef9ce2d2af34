"""Every command that writes files refuses an output path it cannot write, at parsing (issue 51): one line, exit
status 2, before any work -- through the real command line, one test per command.

The bad paths: for a file, an existing directory, a directory that does not exist, and a "directory" that is a regular
file; for a directory, an existing regular file and a path below a regular file.  A read-only directory cannot be
made unwritable for root (the tests may run as root), so the read-only case is checked through
:func:`kvcore.atomic.unwritable` with :func:`os.access` answering no, the way it answers for a user without the
permission."""

from __future__ import annotations

import os

import pytest

from kvcore.atomic import unwritable
from kvcore.command import Command, output_dir, output_file
from tests.command_line import is_one_line_error, run_module

# (command, module and the words before the output option, the option -- "" for a positional -- and what it names)
WRITERS = [
    ("paper_check run", ["paper_check"], "--out", "directory"),
    ("paper_check figure", ["paper_check", "figure", "fig1"], "--out", "directory"),
    ("paper_check claim", ["paper_check", "claim", "eq2"], "--out", "directory"),
    ("paper_check fuzz", ["paper_check", "fuzz", "LRU", "-k", "2"], "--out", "directory"),
    ("python -m verify", ["verify", "LRU", "-k", "2"], "--out", "directory"),
    ("paper_check allocate", ["paper_check", "allocate", "--total", "96"], "--lukv-curve", "file"),
    ("python -m realtrace allocate", ["realtrace", "allocate", "--total", "96"], "--lukv-curve", "file"),
    ("python -m realtrace report", ["realtrace", "report"], "--json", "file"),
    ("python -m realtrace study --timings", ["realtrace", "study", "--traces", "t"], "--timings", "file"),
    ("python -m realtrace study --out", ["realtrace", "study", "--traces", "t"], "--out", "directory"),
    ("python -m realtrace capture", ["realtrace", "capture", "--tokens", "8"], "--out", "directory"),
    ("python -m realtrace press", ["realtrace", "press", "--all"], "--out", "directory"),
    ("paper_check quality --out", ["paper_check", "quality", "--budget", "4", "--steps"], "--out", "directory"),
    ("paper_check quality-search --out", ["paper_check", "quality-search", "--budget", "4"], "--out", "directory"),
    ("python -m realtrace.quality --cache-dir", ["realtrace.quality", "--budget", "4"], "--cache-dir", "directory"),
    ("python -m figures", ["figures"], "", "directory"),
]


def bad_paths(tmp_path, want: str) -> list[tuple[str, str]]:
    """``(path, the reason the command must give)`` for every way ``want`` can be unwritable without permissions."""
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-dir").mkdir()
    if want == "file":
        return [("a-dir", "is a directory; a file is wanted"),
                ("missing/out.json", "its directory does not exist (missing)"),
                ("a-file/out.json", "a-file is not a directory")]
    return [("a-file", "exists and is not a directory"), ("a-file/sub", "a-file is not a directory")]


@pytest.mark.parametrize("name,argv,option,want", WRITERS, ids=[w[0] for w in WRITERS])
def test_a_bad_output_path_is_refused_in_one_line(tmp_path, name, argv, option, want):
    module, *words = argv
    for path, reason in bad_paths(tmp_path, want):
        code, out, err = run_module(module, *words, *([option, path] if option else [path]), cwd=tmp_path,
                                    timeout=60)
        assert is_one_line_error(code, err, reason), (name, path, code, err)
        assert (option or path) in err and out == "", (name, err)


def test_the_quality_default_report_folder_is_checked_too(tmp_path):
    """``--all`` without ``--out`` writes ./quality_report: a file of that name is refused before any run."""
    (tmp_path / "quality_report").write_text("x")
    code, out, err = run_module("realtrace.quality", "--all", cwd=tmp_path, timeout=60)
    assert is_one_line_error(code, err, "--out quality_report: exists and is not a directory"), err


@pytest.mark.parametrize("want", ["file", "directory"])
def test_a_directory_without_write_permission_is_refused(tmp_path, monkeypatch, want):
    """:func:`os.access` decides (module docstring): where it says no, the nearest existing directory is named."""
    target = str(tmp_path / ("out.json" if want == "file" else "new/sub"))
    assert unwritable(target, want) is None
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert unwritable(target, want) == f"{tmp_path} is not writable"


def test_good_paths_pass_and_are_returned_unchanged(tmp_path):
    """A new file in an existing directory, an existing file, a new directory (with missing parents) and an existing
    one are all accepted, as the text given."""
    (tmp_path / "old.json").write_text("{}")
    for text in (str(tmp_path / "new.json"), str(tmp_path / "old.json")):
        assert output_file(text) == text
    for text in (str(tmp_path / "new" / "deeper"), str(tmp_path)):
        assert output_dir(text) == text


def test_the_check_runs_at_parsing(tmp_path):
    """The refusal comes from the parser: the command's ``run`` is never called."""
    called = []
    command = Command("demo", "demo", lambda p: p.add_argument("--out", type=output_file),
                      lambda args: called.append(args) or 0)
    assert command.main(["--out", str(tmp_path)]) == 2
    assert called == []
    assert command.main(["--out", str(tmp_path / "x.json")]) == 0 and len(called) == 1
