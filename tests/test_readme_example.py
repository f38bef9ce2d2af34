"""The README's examples and the fuzzing page's (``docs/own-policy.md``) run as pasted: the policy files, the
hypothesis test, and every command of the README's code blocks, through the real command line, in a fresh directory
as a user would (commands of :data:`tests.test_documented_commands.EXEMPT` are left to what the list names)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.command_line import ROOT
from tests.test_documented_commands import code_block_commands, exemption

README = ROOT / "README.md"
FUZZING_PAGE = ROOT / "docs" / "own-policy.md"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def run_pasted(command: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """A documented ``python -m ...`` line as typed, its comment dropped, under this interpreter."""
    words = shlex.split(command.split("#", 1)[0])
    assert words[:2] == ["python", "-m"], command
    return subprocess.run([sys.executable, *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_every_readme_command_runs_as_pasted(tmp_path):
    """The policy file saved as the README says, then each command of its code blocks, in one working directory."""
    policy_src, = python_blocks(README)
    assert "class MarkingFIFO(Policy)" in policy_src
    (tmp_path / "my_policy.py").write_text(policy_src)
    commands = [c for c in code_block_commands(README.read_text()) if not exemption(c)]
    assert len(commands) == 3, commands   # the three uses: the suite, a claim, the fuzzer
    report = {c["id"]: c for c in json.loads((ROOT / "paper_check" / "report.json").read_text())["claims"]}
    for command in commands:
        # the suite's module path is relative to the repository, where a user runs it; the others run anywhere
        cwd = ROOT if " pytest " in command else tmp_path
        p = run_pasted(command, cwd)
        assert p.returncode == 0, f"{command}\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
        if " fuzz " in command:
            assert "no violation found" in p.stdout, p.stdout
        elif " claim " in command:
            cid = command.split(" claim ", 1)[1].split()[0]
            assert f"verdict: {report[cid]['verdict']} " in p.stdout, p.stdout
        else:
            assert re.search(r"\b[1-9]\d* passed\b", p.stdout) and "failed" not in p.stdout, p.stdout


def test_the_fuzzing_pages_examples_run(tmp_path):
    """``docs/own-policy.md``: the deterministic policy and its five-line hypothesis test, and the randomized policy
    through the fuzz command the page shows for it."""
    blocks = python_blocks(FUZZING_PAGE)
    policy_src, test_src, random_src = blocks[0], blocks[1], blocks[2]
    assert "class MarkingFIFO(Policy)" in policy_src and "assert_competitive" in test_src
    assert "deterministic = False" in random_src and "self.rng" in random_src
    (tmp_path / "my_policy.py").write_text(policy_src)
    (tmp_path / "test_clock.py").write_text(test_src)
    (tmp_path / "my_random.py").write_text(random_src)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_clock.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    fuzz = [c for c in code_block_commands(FUZZING_PAGE.read_text()) if "my_random:RandomMarking" in c]
    assert len(fuzz) == 1 and "--seconds" in fuzz[0], fuzz
    p = run_pasted(fuzz[0] + f" --out {tmp_path / 'found'}", tmp_path)
    assert p.returncode == 0 and "no violation found" in p.stdout, p.stdout + p.stderr
    assert "2H_k-1" in p.stdout, p.stdout   # the declared guarantee is the question asked
