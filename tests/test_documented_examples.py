"""Every command the README and the documentation pages show in a code block runs as pasted, through the real
command line, or is named in the one list of exemptions (:data:`tests.test_documented_commands.EXEMPT`) with the
reason.  Each document's commands run in order in one fresh working directory, after the Python files the document
tells the reader to save (``Save this as `my_policy.py```) are saved there; a command's expected exit status is the
``exit N`` its comment states (0 otherwise), and a stated ``no violation found`` or ``violates`` must be printed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.command_line import ROOT
from tests.test_documented_commands import DOCUMENTS, code_block_commands, exemption

REPORT = {c["id"]: c for c in json.loads((ROOT / "paper_check" / "report.json").read_text())["claims"]}


def saved_files(text: str) -> dict[str, str]:
    """The ``python`` blocks a document asks the reader to save: the file name is the last ``name.py`` in backticks
    in the 300 characters before the block."""
    out = {}
    for m in re.finditer(r"```python\n(.*?)```", text, re.S):
        names = re.findall(r"`(\w+\.py)`", text[max(0, m.start() - 300):m.start()])
        if names:
            out[names[-1]] = m.group(1)
    return out


def runnable(doc: Path) -> list[str]:
    return [c for c in code_block_commands(doc.read_text()) if not exemption(c.split("#", 1)[0])]


def expected_exit(command: str) -> int:
    m = re.search(r"#.*\bexit (\d+)", command)
    return int(m.group(1)) if m else 0


def run_pasted(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A documented ``python -m ...`` line as typed, its comment dropped, under this interpreter.  The suite's own
    modules (``pytest theorems/...``) are named relative to the repository, where a user runs them."""
    words = shlex.split(command.split("#", 1)[0])
    assert words[:2] == ["python", "-m"], command
    if words[2] == "pytest" and not any((cwd / w).exists() for w in words[3:] if not w.startswith("-")):
        cwd = ROOT
    return subprocess.run([sys.executable, *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=600)


DOCS_WITH_COMMANDS = [d for d in DOCUMENTS if runnable(d)]


def test_the_runnable_commands_are_the_expected_ones():
    """The exemptions leave the quickstart's three uses and the fuzzing page's examples to run (a pattern of EXEMPT
    that swallowed everything would make the next test vacuous)."""
    readme = runnable(ROOT / "README.md")
    assert [c.split()[2] for c in readme] == ["pytest", "paper_check", "paper_check"], readme
    fuzzing = runnable(ROOT / "docs" / "own-policy.md")
    assert sum(" fuzz " in c for c in fuzzing) >= 5 and any(" pytest " in c for c in fuzzing), fuzzing


@pytest.mark.parametrize("doc", DOCS_WITH_COMMANDS, ids=[d.name for d in DOCS_WITH_COMMANDS])
def test_every_shown_command_runs_as_pasted(doc, tmp_path):
    text = doc.read_text()
    for name, source in saved_files(text).items():
        (tmp_path / name).write_text(source)
    for command in runnable(doc):
        p = run_pasted(command, tmp_path)
        shown = f"{doc.name}: {command}\nexit {p.returncode}\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
        assert p.returncode == expected_exit(command), shown
        comment = command.split("#", 1)[1] if "#" in command else ""
        for outcome in ("no violation found", "violates"):
            if outcome in comment:
                assert outcome in p.stdout, shown
        if " claim " in command:  # the claim's verdict is the committed report's
            cid = command.split(" claim ", 1)[1].split()[0]
            assert f"verdict: {REPORT[cid]['verdict']} " in p.stdout, shown
        if command.split()[2] == "pytest":
            assert re.search(r"\b[1-9]\d* passed\b", p.stdout) and "failed" not in p.stdout, shown


def test_the_fuzzing_pages_randomized_policy_is_asked_for_its_declared_guarantee(tmp_path):
    """``my_random.py`` declares ``deterministic = False`` and ``guarantee = "2H_k-1"``: the fuzzer asks for that
    bound, on the expectation."""
    files = saved_files((ROOT / "docs" / "own-policy.md").read_text())
    assert {"my_policy.py", "my_random.py", "test_marking.py"} <= set(files)
    assert "deterministic = False" in files["my_random.py"] and "self.rng" in files["my_random.py"]
    (tmp_path / "my_random.py").write_text(files["my_random.py"])
    p = run_pasted("python -m paper_check fuzz my_random:RandomMarking --capacity 3 --seconds 5", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^question: .*2H_k-1", p.stdout, re.M), p.stdout
