"""The README's "Check your own policy" example runs as written: the policy file, the five-line hypothesis test,
and the fuzz command on it."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_policy_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    policy_src, test_src = blocks[0], blocks[1]
    assert "class MarkingFIFO(Policy)" in policy_src and "assert_competitive" in test_src
    (tmp_path / "my_policy.py").write_text(policy_src)
    (tmp_path / "test_clock.py").write_text(test_src)
    env_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_clock.py"]
    p = subprocess.run(env_cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    # --seconds 15 rather than the default 60: a sound policy spends the whole budget (the fuzzer goes deeper until
    # it ends), and CI need not wait a minute for it
    p = subprocess.run([sys.executable, "-m", "paper_check", "fuzz", "my_policy:MarkingFIFO", "--capacity", "3",
                        "--examples", "100", "--seconds", "15", "--out", str(tmp_path)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "no violation found" in p.stdout, p.stdout + p.stderr
