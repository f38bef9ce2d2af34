"""Every command the README documents exists as written: for each ``python -m MODULE [SUBCOMMAND] ...`` line of the
README, the real command line's ``--help`` (run in a subprocess, as a user types it) exits 0 and lists every
``--option`` the README uses with it.  The commands themselves are run by the tests of their features
(``test_cli.py``, ``test_cli_probes.py``, ``test_fuzz_cli.py``, ``test_study.py``, ``test_press_bridge.py``,
``test_realtrace_capture.py``, ``test_readme_example.py``)."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

import pytest

from tests.command_line import ROOT, run_module

README = ROOT / "README.md"
# modules whose command lines the README documents, and their subcommands
SUBCOMMANDS = {
    "paper_check": {"list", "figure", "claim", "simulate", "fuzz", "capture", "press", "quality", "policies",
                    "allocate"},
    "realtrace": {"capture", "report", "press", "study", "allocate"},
    "verify": set(),
    "figures": set(),
    "bench": set(),
    "bench.fuzz_power": set(),
    "bench.quality_cache": set(),
    "bench.rm_optimum": set(),
    "tests.test_figure_layout": set(),
    "realtrace.quality": set(),
    "realtrace.quality.bench": set(),
    "realtrace.quality.bench_coupled": set(),
}
SKIPPED = {"pip", "pytest"}


def readme_commands(text: str) -> list[tuple[str, str | None, list[str]]]:
    """(module, subcommand or None, options used) of every ``python -m`` command in the README."""
    out = []
    for line in text.splitlines():
        for cmd in re.findall(r"python -m ([^`#&]+)", line):
            words = shlex.split(cmd.replace("[", " ").replace("]", " ").replace("|", " "))
            module, rest = words[0], words[1:]
            if module in SKIPPED:
                continue
            assert module in SUBCOMMANDS, f"README documents 'python -m {module}', unknown to this test: {line!r}"
            sub = rest[0] if rest and rest[0] in SUBCOMMANDS[module] else None
            options = sorted({w.split("=")[0] for w in rest if w.startswith("--")})
            out.append((module, sub, options))
    return out


COMMANDS = readme_commands(README.read_text())


@lru_cache(maxsize=None)
def help_text(module: str, sub: str | None) -> str:
    code, out, err = run_module(module, *([sub] if sub else []), "--help", timeout=300)
    assert code == 0, f"python -m {module} {sub or ''} --help: exit {code}\n{err[-2000:]}"
    return out


def test_the_readme_documents_the_commands():
    modules = {m for m, _, _ in COMMANDS}
    subs = {(m, s) for m, s, _ in COMMANDS}
    assert {"paper_check", "realtrace", "figures", "bench"} <= modules
    assert {("paper_check", s) for s in SUBCOMMANDS["paper_check"]} <= subs
    assert ("realtrace", "study") in subs


@pytest.mark.parametrize("module, sub, options", COMMANDS,
                         ids=[f"{m} {s or ''} {' '.join(o)}".strip() for m, s, o in COMMANDS])
def test_every_documented_option_is_in_the_commands_help(module, sub, options):
    text = help_text(module, sub)
    missing = [o for o in options if not re.search(re.escape(o) + r"\b", text)]
    assert not missing, f"'python -m {module} {sub or ''}' documents {missing}, which its --help does not list"


def test_a_wrong_option_would_be_seen():
    """The check reads what it claims to: an option the parser does not have is reported missing."""
    (module, sub, _), = readme_commands("    python -m paper_check simulate --no-such-option T")
    assert (module, sub) == ("paper_check", "simulate")
    assert "--no-such-option" not in help_text(module, sub)
