"""The documentation site cannot drift from the code: the pages ``docs/hooks/generate.py`` makes at build time cover
every command line and subcommand (read from the real parsers and from the repository's ``__main__`` modules), every
claim of the registry and of the committed report, and every registered policy; every page of the nav exists; the
README's verdict table equals the committed report's counts.  None of this needs MkDocs.  One test builds the site
with ``mkdocs build --strict`` (a broken link, a missing page or anchor fails it) when the ``docs`` extra is
installed."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from functools import lru_cache

import pytest

from tests.command_line import ROOT

GENERATOR = ROOT / "docs" / "hooks" / "generate.py"
# modules run with ``python -m`` that are not a user's command line, and why
INTERNAL = {
    "bench.e2e": "a child process of python -m bench (end-to-end timings)",
    "bench.optimum_child": "a child process of python -m bench (one optimum, timed)",
    "paper_check.step_host": "the step host of paper_check --full, started by it",
    "tests.test_figure_layout": "a test module's helper, documented on the figures page",
}


@lru_cache(maxsize=None)
def generator():
    """``docs/hooks/generate.py`` imported as MkDocs imports it (by path: ``docs/`` is not a package)."""
    spec = importlib.util.spec_from_file_location("docs_generate", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=None)
def pages() -> dict[str, str]:
    return generator().generated_pages()


def missing_sections(page: str, names, heading: str) -> list[str]:
    """The ``names`` without a heading ``heading.format(name=...)`` line in ``page``."""
    lines = set(page.splitlines())
    return [n for n in names if not any(line.startswith(heading.format(name=n)) for line in lines)]


def command_line_modules() -> set[str]:
    """Every ``python -m`` target of the repository: packages with a ``__main__.py`` and modules with a
    ``__main__`` guard, found on disk (not from the generator's list)."""
    out = set()
    for f in ROOT.rglob("*.py"):
        rel = f.relative_to(ROOT)
        if rel.parts[0] in ("docs", "site", "build") or rel.parts[0].startswith("."):
            continue
        if f.name == "__main__.py":
            out.add(".".join(rel.parts[:-1]))
        elif re.search(r'^if __name__ == "__main__":', f.read_text(), re.M):
            out.add(".".join(rel.with_suffix("").parts))
    return out


def test_every_command_line_has_its_section():
    documented = {typed.removeprefix("python -m ") for typed, _, _ in generator().COMMANDS}
    missing = command_line_modules() - documented - set(INTERNAL)
    assert not missing, f"python -m {sorted(missing)}: no section in the generated command reference"
    page = pages()[generator().COMMANDS_PAGE]
    assert not missing_sections(page, sorted(documented), "## `python -m {name}`")


def test_every_subcommand_has_its_section_with_its_help():
    """Each subcommand of each command, read from the real parser, has its section, holding its own usage line."""
    gen, page = generator(), pages()[generator().COMMANDS_PAGE]
    from paper_check.cli import COMMAND

    paper_check_subs = gen._subparsers(COMMAND.parser("python -m paper_check"))
    assert {"list", "figure", "claim", "simulate", "fuzz", "policies"} <= set(paper_check_subs)
    for typed, make, _ in gen.COMMANDS:
        for name, parser in gen._subparsers(make(typed)).items():
            section = page.split(f"### `{typed} {name}` {{#", 1)
            assert len(section) == 2, f"'{typed} {name}' has no section"
            usage = parser.format_usage().split()[1:4]   # 'usage:' PROG...: the first words of its own usage
            assert " ".join(usage) in " ".join(section[1].split("```", 2)[1].split()), f"'{typed} {name}'"
    anchors = re.findall(r"\{#([^}]+)\}", page)
    assert len(anchors) == len(set(anchors)), [a for a, n in Counter(anchors).items() if n > 1]


def test_every_claim_has_its_entry_with_the_reports_verdict():
    from theorems.claims import CLAIMS

    report = {c["id"]: c for c in json.loads((ROOT / "paper_check" / "report.json").read_text())["claims"]}
    ids = set(CLAIMS) | set(report)
    assert len(ids) >= 47
    page = pages()[generator().CLAIMS_PAGE]
    assert not missing_sections(page, sorted(ids), "### `{name}` {{#{name}}}")
    for cid in ids:
        entry = page.split(f"### `{cid}` {{#{cid}}}", 1)[1].split("\n### ", 1)[0]
        assert f"- verdict: **{report[cid]['verdict']}**" in entry, cid
        assert f"`python -m paper_check claim {cid}`" in entry, cid
        assert CLAIMS[cid].source in entry and report[cid]["summary"] in entry, cid


def test_every_policy_has_its_entry():
    from policies import all_policies

    names = [p.name for p in all_policies()]
    assert len(names) >= 20
    gen = generator()
    page = pages()[gen.POLICIES_PAGE]
    assert not missing_sections(page, names, "## {name} {{#")
    assert not missing_sections(page, names, "| [{name}](#")


def test_the_policies_pages_rule_tables_name_every_registered_policy():
    """``docs/policies.md`` keeps a hand-written rule per policy beside the generated catalogue: its two tables name
    exactly the registered policies (``LRU / FIFO`` is one row of two)."""
    from policies import all_policies

    text = (ROOT / "docs" / "policies.md").read_text()
    named = [n.strip() for row in re.findall(r"^\| ([^|`]+?) \| .* \|$", text, re.M) if row not in ("name", "---")
             for n in row.split(" / ")]
    registered = sorted(p.name for p in all_policies())
    assert sorted(named) == registered, (f"add a row to docs/policies.md for {sorted(set(registered) - set(named))}; "
                                         f"remove {sorted(set(named) - set(registered))}")


def test_a_missing_entry_would_be_seen():
    """The coverage checks read what they claim to: a page without one policy's entry is reported."""
    page = pages()[generator().POLICIES_PAGE]
    cut = re.sub(r"^## LRU \{#lru\}$", "", page, flags=re.M)
    assert cut != page and missing_sections(cut, ["LRU", "FIFO"], "## {name} {{#") == ["LRU"]


def test_the_nav_pages_exist_and_every_page_is_in_the_nav():
    gen = generator()
    nav = gen.nav_pages((ROOT / "mkdocs.yml").read_text())
    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert len(nav) >= 15 and len(nav) == len(set(nav))
    assert not [p for p in nav if p not in written and p not in pages()], "nav names a page that does not exist"
    assert not (written | set(pages())) - set(nav), "a page the nav leaves out"


def test_the_readme_verdict_table_equals_the_report():
    """The README's one-screen summary: per family, the count of each verdict, and the page it links, as computed
    from the committed report by the generator's claim rows."""
    from theorems.claims import VERDICTS

    gen = generator()
    counts = gen.verdict_counts(gen.claim_rows())
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    rows = {}
    row = re.compile(r"^\| \[(?P<title>[^\]]+)\]\(docs/(?P<page>[\w-]+\.md)\) \|(?P<nums>[ \d|]+)\|$", re.M)
    for m in row.finditer(readme):
        rows[m["title"]] = (m["page"], [int(x) for x in m["nums"].split("|")])
    expected = {title: (page, [sum(counts[fam].values())] + [counts[fam].get(v, 0) for v in VERDICTS])
                for fam, (title, page) in gen.FAMILIES.items() if fam in counts}
    assert rows == expected
    total = re.search(r"^\| \*\*all\*\* \|(?P<nums>[ \d|]+)\|$", readme, re.M)["nums"]
    assert [int(x) for x in total.split("|")] == [sum(counts[None].values())] + [counts[None][v] for v in VERDICTS]


def test_the_site_builds_strict(tmp_path):
    """``mkdocs build --strict`` succeeds (warnings are errors: a broken link, a missing page or anchor); the build
    writes into a temporary directory, never the repository."""
    if importlib.util.find_spec("mkdocs") is None or shutil.which("mkdocs") is None:
        pytest.skip("the docs extra is not installed: python -m pip install -e '.[docs]'")
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "claims" / "index.html").exists()
    print(f"mkdocs build --strict: {time.monotonic() - start:.1f} s")
