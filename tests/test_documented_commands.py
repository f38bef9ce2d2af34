"""Every command the README and the documentation pages (``docs/*.md``) show exists as written: for each
``python -m MODULE [SUBCOMMAND] ...`` in their text, the real command line's ``--help`` (run in a subprocess, as a
user types it) exits 0 and lists every ``--option`` used with it.  Every command of a code block also runs as pasted
(``test_documented_examples.py``) unless :data:`EXEMPT`, the one list of exemptions, says why not; the exempt ones
are run by the tests of their features (``test_cli.py``, ``test_cli_probes.py``, ``test_fuzz_cli.py``,
``test_study.py``, ``test_press_bridge.py``, ``test_realtrace_capture.py``, ...).  A code block's shell line that is
not ``python -m`` of a toolkit module must be exempt."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

import pytest

from tests.command_line import ROOT, run_module
from tests.test_docs import generator

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# the one list of commands the documents may show without this test running their --help: (pattern, why)
# (tests/test_documented_examples.py runs every other command of a code block as pasted; the --help check below
# covers all of them, exempt or not)
EXEMPT = (
    (r"^python -m pip\b", "an install line: CI (.ci/run) runs the installs, and pip's options are pip's"),
    (r"^mkdocs build --strict\b", "built by tests/test_docs.py::test_the_site_builds_strict"),
    (r"\.\.\.|\[|\b(TRACE|DIR|OUT_DIR|NAME|FILE|TARGET|SETS|HOST|K|B|S|N)\b",
     "a template with placeholders, not a command: its options are checked against its --help"),
    (r"^python -m paper_check( --jobs \d+)?\s*$|--full|--write-ledger",
     "the whole main job (about a minute; --full about 17 min), or --write-ledger, which rewrites the committed "
     "ledger: its options are checked against its --help"),
    (r" (quality (?!--list-prompts)|quality-search |capture |press )|^python -m realtrace (report|study)|"
     r"realtrace\.quality|"
     r"bench\.quality_cache",
     "needs the [real] extra and the model, and minutes of CPU (or a capture made first): run by the tests of the "
     "feature, the model ones in CI"),
    (r"^python -m bench\.rm_optimum\s*$", "about 10 minutes (its --sizes run is executed)"),
    (r"^python -m bench\.mutation\b",
     "minutes of CPU per module: tests/test_mutation_bench.py runs it on a small sample"),
)
# shell lines of code blocks: an optional VAR=value prefix or /usr/bin/time, then a program
SHELL_LINE = re.compile(r"^(\w+=\S*\s+)*(/usr/bin/time( -v)?\s+)?"
                        r"(?P<cmd>(\S*/)?(python3?|pip|mkdocs|pytest|git|bash|sh)\b.*)")
# modules documented whose command line is not in the generated reference: a test helper, and pytest (its --help,
# run in the repository, lists the options conftest.py adds: --runslow, --regen-golden)
EXTRA_MODULES = {"tests.test_figure_layout": set(), "pytest": set()}


@lru_cache(maxsize=None)
def known_commands() -> dict[str, set[str]]:
    """module -> its subcommands, read from the real parsers the generated reference is made from."""
    gen = generator()
    out = {module: set(subs) for module, subs in EXTRA_MODULES.items()}
    for typed, make, _ in gen.COMMANDS:
        out[typed.removeprefix("python -m ")] = set(gen._subparsers(make(typed)))
    return out


def exemption(command: str) -> str | None:
    for pattern, why in EXEMPT:
        if re.search(pattern, command):
            return why
    return None


def documented_commands(text: str) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """(module, subcommand or None, options used) of every ``python -m`` command in ``text``, exempt or not (pip's
    are pip's business)."""
    out = []
    for line in text.splitlines():
        for cmd in re.findall(r"python -m ([^`#&]+)", line):
            words = shlex.split(cmd.replace("[", " ").replace("]", " ").replace("|", " "))
            module, rest = words[0], words[1:]
            if module == "pip":
                continue
            known = known_commands()
            assert module in known, f"a document shows 'python -m {module}', not a command of the toolkit: {line!r}"
            sub = rest[0] if rest and rest[0] in known[module] else None
            options = tuple(sorted({w.split("=")[0] for w in rest if w.startswith("--")}))
            out.append((module, sub, options))
    return out


def code_block_commands(text: str) -> list[str]:
    """The shell command lines of a markdown text's code blocks (indented, or fenced without a language or as a
    shell), without their prompts' environment prefixes."""
    out, fence = [], None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("```"):
            fence = None if fence is not None else s[3:].strip()
            continue
        inside = (fence in ("", "bash", "sh", "shell", "console")) if fence is not None else line.startswith("    ")
        m = SHELL_LINE.match(s) if inside else None
        if m:
            out.append(m.group("cmd"))
    return out


COMMANDS = sorted({c for doc in DOCUMENTS for c in documented_commands(doc.read_text())},
                  key=lambda c: (c[0], c[1] or "", c[2]))


@lru_cache(maxsize=None)
def help_text(module: str, sub: str | None) -> str:
    code, out, err = run_module(module, *([sub] if sub else []), "--help", timeout=300)
    assert code == 0, f"python -m {module} {sub or ''} --help: exit {code}\n{err[-2000:]}"
    return out


def test_the_documents_show_the_commands():
    modules = {m for m, _, _ in COMMANDS}
    subs = {(m, s) for m, s, _ in COMMANDS}
    assert {"paper_check", "realtrace", "figures", "bench", "verify"} <= modules
    assert {("paper_check", s) for s in known_commands()["paper_check"]} <= subs
    assert ("realtrace", "study") in subs


def test_every_code_block_command_is_checked_or_exempt():
    """A shell line of a code block is ``python -m`` of a toolkit module (checked below) or exempt with a reason."""
    unchecked = [(doc.name, c) for doc in DOCUMENTS for c in code_block_commands(doc.read_text())
                 if not c.startswith("python -m ") and not exemption(c)]
    assert not unchecked, f"commands shown but neither checked nor exempt (add a reason to EXEMPT): {unchecked}"


@pytest.mark.parametrize("module, sub, options", COMMANDS,
                         ids=[f"{m} {s or ''} {' '.join(o)}".strip() for m, s, o in COMMANDS])
def test_every_documented_option_is_in_the_commands_help(module, sub, options):
    text = help_text(module, sub)
    missing = [o for o in options if not re.search(re.escape(o) + r"\b", text)]
    assert not missing, f"'python -m {module} {sub or ''}' documents {missing}, which its --help does not list"


def test_the_documented_test_paths_exist():
    """Each path a documented ``python -m pytest`` names (a file or directory, ``::test`` dropped) exists."""
    paths = {w.split("::")[0] for doc in DOCUMENTS for line in doc.read_text().splitlines()
             for cmd in re.findall(r"python -m pytest([^`#&]*)", line) for w in shlex.split(cmd)
             if not w.startswith("-") and "/" in w}
    assert "theorems/" in paths or "theorems" in paths
    assert not [p for p in paths if not (ROOT / p).exists()]


def test_a_wrong_option_would_be_seen():
    """The check reads what it claims to: an option the parser does not have is reported missing."""
    (module, sub, _), = documented_commands("    python -m paper_check simulate --no-such-option T")
    assert (module, sub) == ("paper_check", "simulate")
    assert "--no-such-option" not in help_text(module, sub)


def test_an_unchecked_command_would_be_seen():
    """A code block's shell line that is neither a toolkit command nor exempt is found; an exempt one is not."""
    text = "Run:\n\n    git clone x\n    mkdocs build --strict\n\n```python\nimport os\n```\n"
    assert code_block_commands(text) == ["git clone x", "mkdocs build --strict"]
    assert exemption("git clone x") is None and exemption("mkdocs build --strict")
