"""The documentation's generated pages: every command's ``--help``, the claims catalogue and the policy catalogue,
made from the toolkit's own parsers and registries each time the site is built, so that no list is typed twice.

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``): :func:`on_files` adds the pages of
:func:`generated_pages` and the committed images the pages show.  Everything else is plain Python with no MkDocs
import, so ``tests/test_docs.py`` calls :func:`generated_pages` without the ``docs`` extra installed.

* Commands: each entry of :data:`COMMANDS` is how a user types a command line and the parser behind it
  (:class:`kvcore.command.Command`, the one runner of every command line); subcommands are read from the parser's
  own subparsers, so a new subcommand gets its section without an edit here.
* Claims: :data:`theorems.claims.CLAIMS` (id, paper section, statement; grouped by the module that registers the
  claim, its *family*) joined with the committed ``paper_check/report.json`` (verdict, summary, correction,
  readings).  A claim missing from either is listed with what is missing, never dropped.
* Policies: :func:`policies.all_policies` and each :class:`policies.registry.PolicyInfo`'s declared metadata.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # a hook runs in MkDocs' process, which need not have the repository on its path
    sys.path.insert(0, str(ROOT))

COMMANDS_PAGE = "reference/commands.md"
CLAIMS_PAGE = "reference/claims.md"
POLICIES_PAGE = "reference/policies.md"
# committed images that hand-written pages show, copied into the site at their repository paths
IMAGE_GLOBS = ("figures/*.png", "realtrace/data/study8k/*.png")
HELP_COLUMNS = "110"  # argparse wraps help to $COLUMNS; fixed so that the page does not depend on the terminal


def _command(module: str, attr: str = "COMMAND") -> Callable[[str], argparse.ArgumentParser]:
    """The parser of a :class:`kvcore.command.Command` held in ``module.attr``, under the program name given."""

    def parser(prog: str) -> argparse.ArgumentParser:
        import importlib

        return getattr(importlib.import_module(module), attr).parser(prog)

    return parser


def _bench_parser(prog: str) -> argparse.ArgumentParser:
    """``python -m bench`` builds its parser inside ``main``; it is read from there by asking for ``--help``."""
    from bench.__main__ import main

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        main(["--help"])
    return _PrintedHelp(text.getvalue())


class _PrintedHelp:
    """A parser stand-in whose help is text already printed by the real parser (see :func:`_bench_parser`)."""

    def __init__(self, text: str):
        self.text = text

    def format_help(self) -> str:
        return self.text


# (what the user types, the parser behind it, one line on what it is for); every command line of the toolkit
# (tests/test_docs.py checks this list against the repository's __main__ modules)
COMMANDS: tuple[tuple[str, Callable[[str], object], str], ...] = (
    ("python -m paper_check", _command("paper_check.cli"),
     "the main job and every subcommand: figures, claims, simulate, fuzz, the real-model commands"),
    ("python -m verify", _command("verify.cli"), "the fuzzer on its own (the same command as `paper_check fuzz`)"),
    ("python -m figures", _command("figures.cli"), "every figure, formula-only, into a directory"),
    ("python -m realtrace", _command("realtrace.cli"),
     "real attention traces: capture, report, press, study, allocate"),
    ("python -m realtrace.quality", _command("realtrace.quality.cli"),
     "output quality (the same command as `paper_check quality`)"),
    ("python -m realtrace.press", _command("realtrace.press.cli"),
     "a kvpress press against the exact optimum (the same command as `paper_check press`)"),
    ("python -m realtrace.quality.bench", _command("realtrace.quality.bench"), "the quality benchmark sweep"),
    ("python -m realtrace.quality.bench_coupled", _command("realtrace.quality.bench_coupled"),
     "the coupled-optimum quality benchmark"),
    ("python -m bench", _bench_parser, "speed against libCacheSim and against the previous optimum"),
    ("python -m bench.fuzz_power", _command("bench.fuzz_power"), "the fuzzer's power on planted flaws"),
    ("python -m bench.quality_cache", _command("bench.quality_cache"), "the quality reference cache, measured"),
    ("python -m bench.rm_optimum", _command("bench.rm_optimum"), "the RM optimum's solver against the previous one"),
    ("python -m bench.mutation", _command("bench.mutation"),
     "a mutation score per module (cosmic-ray's mutants, sampled; the [mutation] extra)"),
)


def slug(text: str) -> str:
    """The anchor of a command or a policy: lower case, a dot kept as an underscore (``realtrace.press`` and
    ``realtrace press`` are two commands), every run of other characters one hyphen."""
    out, dash = [], False
    for ch in text.lower().replace(".", "_"):
        if ch.isalnum() or ch == "_":
            out.append(ch)
            dash = False
        elif not dash:
            out.append("-")
            dash = True
    return "".join(out).strip("-")


def _subparsers(parser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of an argparse parser, by name, in the order they were added (none for a plain parser)."""
    for action in getattr(parser, "_actions", ()):
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_helps() -> list[tuple[str, str, str]]:
    """(command line as typed, its ``--help`` text, what it is for) of every command and subcommand, in order."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        out = []
        for typed, make, purpose in COMMANDS:
            parser = make(typed)
            out.append((typed, parser.format_help(), purpose))
            for name, sub in _subparsers(parser).items():
                out.append((f"{typed} {name}", sub.format_help(), ""))
        return out
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def commands_page() -> str:
    helps = command_helps()
    lines = ["# Every command", "",
             "Generated when the site is built from the toolkit's own parsers (`docs/hooks/generate.py`): each section "
             "is exactly what `--help` prints.  Exit status, bad input and Ctrl-C are the same for all of them "
             "([command line](../command-line.md)).", ""]
    for typed, _, purpose in helps:
        lines.append(f"- [`{typed}`](#{slug(typed)})" + (f": {purpose}" if purpose else ""))
    for typed, text, _ in helps:
        level = "##" if typed.count(" ") == 2 else "###"
        lines += ["", f"{level} `{typed}` {{#{slug(typed)}}}", "", "```text", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# claims
# ---------------------------------------------------------------------------------------------------------------

# family (the module under theorems/claims/ that registers the claim) -> its title and the hand-written page where
# its results are discussed
FAMILIES: dict[str, tuple[str, str]] = {
    "formulas": ("Closed-form numbers (Eq. 2, Eq. 3, the block page's formulas)", "findings.md"),
    "classic": ("Classic paging bounds (§2, §4)", "findings.md"),
    "randomized": ("Randomized policies (§4)", "findings.md"),
    "attention": ("Accumulated attention and decay (§5)", "findings.md"),
    "gda": ("GD-A (§6)", "findings.md"),
    "persistence": ("Persistence, Theorem 4 (§7)", "findings.md"),
    "practice": ("Practice: sinks, ties, budgets, the default (§8, §10, §11)", "findings.md"),
    "recommendations": ("Recommendations (§11)", "findings.md"),
    "blocks": ("The block-level figure page (seed 002)", "figures.md"),
    "allocation": ("Budgets across heads (§8, §11)", "budgets.md"),
    "heads": ("Per head in the model (§3, §9)", "quality.md"),
    "surrogate": ("The first-order surrogate (§3, §9)", "quality.md"),
    "directions": ("The surrogate's failure directions (§3, §9)", "quality.md"),
    "workingset": ("Working sets in the model (§7, §8, §11)", "quality.md"),
    "benchmark": ("The tracking benchmark (§8)", "quality.md"),
    "blind_spot": ("The optimum's blind spot (§4, §9)", "quality.md"),
    "figure14": ("Figure 14 measured (§7)", "quality.md"),
    "paradox": ("Solving the surrogate more exactly (§9)", "budgets.md"),
}


def report_claims(path: Path | None = None) -> dict[str, dict]:
    """The committed report's claims by id (``paper_check/report.json``)."""
    data = json.loads((path or ROOT / "paper_check" / "report.json").read_text())
    return {c["id"]: c for c in data["claims"]}


def claim_family(claim) -> str:
    return claim.compute.__module__.rsplit(".", 1)[-1]


def claim_rows(report_path: Path | None = None) -> list[dict]:
    """One row per claim of the registry (report order) and per claim only the report holds: id, family, source,
    statement, and the report's verdict, summary, correction, readings and per-model readings (``None`` where the
    report lacks it)."""
    from theorems.claims import CLAIMS

    report = report_claims(report_path)
    rows = []
    for cid, c in CLAIMS.items():
        rec = report.get(cid, {})
        rows.append({"id": cid, "family": claim_family(c), "source": c.source, "claim": c.claim,
                     "verdict": rec.get("verdict"), "summary": rec.get("summary"),
                     "correction": rec.get("correction"), "readings": rec.get("readings") or {},
                     "models": rec.get("models") or {}})
    for cid, rec in report.items():
        if cid not in CLAIMS:
            rows.append({"id": cid, "family": None, "source": rec.get("source"), "claim": rec.get("claim"),
                         "verdict": rec.get("verdict"), "summary": rec.get("summary"),
                         "correction": rec.get("correction"), "readings": rec.get("readings") or {},
                         "models": rec.get("models") or {}})
    return rows


def verdict_counts(rows: list[dict]) -> dict[str | None, Counter]:
    """Verdicts counted per family (and over all claims under the key ``None``)."""
    out: dict[str | None, Counter] = {None: Counter()}
    for r in rows:
        out.setdefault(r["family"], Counter())[r["verdict"]] += 1
        out[None][r["verdict"]] += 1
    return out


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def claims_page(report_path: Path | None = None) -> str:
    from theorems.claims import VERDICTS

    rows = claim_rows(report_path)
    counts = verdict_counts(rows)
    lines = ["# Claims catalogue", "",
             "Generated when the site is built from the claim registry (`theorems/claims/`) and the committed report "
             "(`paper_check/report.json`, written by `python -m paper_check`).  The verdict rules are on the "
             "[concepts page](../concepts.md#verdicts).  Every claim reruns alone with "
             "`python -m paper_check claim ID` (`--json` for its values, `--full` for the larger sizes).", "",
             "| family | claims | " + " | ".join(VERDICTS) + " |", "|---|---:|" + "---:|" * len(VERDICTS)]
    families = [f for f in FAMILIES if f in counts] + sorted(f for f in counts if f not in FAMILIES and f)
    if any(r["family"] is None for r in rows):
        families.append(None)
    for fam in families + ["all"]:
        c = counts[None] if fam == "all" else counts[fam]
        name = "**all**" if fam == "all" else f"[{_family_title(fam)}](#{_family_anchor(fam)})"
        lines.append(f"| {name} | {sum(c.values())} | " + " | ".join(str(c.get(v, 0)) for v in VERDICTS) + " |")
    for fam in families:
        title = _family_title(fam)
        page = FAMILIES.get(fam, (None, None))[1] if fam else None
        lines += ["", f"## {title} {{#{_family_anchor(fam)}}}", ""]
        if page:
            lines += [f"Discussed on [{page[:-3].replace('-', ' ')}](../{page}).", ""]
        for r in (r for r in rows if r["family"] == fam):
            lines += _claim_entry(r)
    return "\n".join(lines) + "\n"


def _family_title(fam: str | None) -> str:
    if fam is None:
        return "In the report but not in the registry"
    return FAMILIES.get(fam, (f"Family `{fam}`", None))[0]


def _family_anchor(fam: str | None) -> str:
    return f"family-{fam or 'unregistered'}".replace("_", "-")


def _claim_entry(r: dict) -> list[str]:
    out = [f"### `{r['id']}` {{#{r['id']}}}", "",
           f"**{r['source']}** — {r['claim']}", "",
           f"- verdict: **{r['verdict'] or 'not in the committed report'}**"]
    if r["summary"]:
        out.append(f"- summary: {r['summary']}")
    if r["correction"]:
        out.append(f"- correction: {r['correction']}")
    if r["family"] is None:
        out.append("- not registered in `theorems/claims/`")
    out.append(f"- reproduce: `python -m paper_check claim {r['id']}`")
    if r["models"]:
        out += ["", "| model | verdict | finding |", "|---|---|---|"]
        out += [f"| {_cell(m)} | {_cell(v['verdict'])} | {_cell(v['summary'])} |" for m, v in r["models"].items()]
    if r["readings"]:
        out += ["", "| reading | verdict | finding |", "|---|---|---|"]
        out += [f"| {_cell(name)} | {_cell(v['verdict'])} | {_cell(v['finding'])} |"
                for name, v in r["readings"].items()]
    out.append("")
    return out


# ---------------------------------------------------------------------------------------------------------------
# policies
# ---------------------------------------------------------------------------------------------------------------

def policy_rows() -> list[dict]:
    """The registry's policies with their declared metadata (``policies.registry.PolicyInfo``)."""
    from policies import all_policies

    return [{"name": p.name, "summary": p.summary, "models": p.models, "deterministic": p.deterministic,
             "guarantee": p.guarantee, "weighted": p.weighted, "lazy": p.lazy, "signal": p.signal,
             "citation": p.citation, "params": p.params, "module": p.cls.__module__} for p in all_policies()]


def policies_page() -> str:
    rows = policy_rows()
    lines = ["# Policy catalogue", "",
             "Generated when the site is built from the policy registry (`policies/registry.py`): each policy's "
             "declared metadata, as `python -m paper_check policies` prints it.  What each field means, and how to "
             "declare them for a policy of your own: [your own policy](../own-policy.md#metadata).", "",
             "| policy | models | guarantee | deterministic | weighted | lazy | signal |",
             "|---|---|---|---|---|---|---|"]
    for p in rows:
        lines.append(f"| [{p['name']}](#{slug(p['name'])}) | {', '.join(p['models'])} | {p['guarantee'] or '–'} | "
                     f"{_yes(p['deterministic'])} | {_yes(p['weighted'])} | {_yes(p['lazy'])} | "
                     f"{p['signal'] or '–'} |")
    for p in rows:
        params = ", ".join(f"`{k}={v!r}`" for k, v in p["params"].items()) or "none"
        lines += ["", f"## {p['name']} {{#{slug(p['name'])}}}", "", _cell(p["summary"] or ""), "",
                  f"- models: {', '.join(p['models'])}; guarantee: {p['guarantee'] or 'none declared'}; "
                  f"deterministic: {_yes(p['deterministic'])}; weighted: {_yes(p['weighted'])}; "
                  f"lazy: {_yes(p['lazy'])}; signal: {p['signal'] or 'none'}",
                  f"- parameters: {params}",
                  f"- citation: {p['citation'] or 'none'}",
                  f"- source: `{p['module']}`; simulate it: "
                  f"`python -m paper_check simulate --policy {p['name']} --capacity 8 TRACE`"]
    return "\n".join(lines) + "\n"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def generated_pages() -> dict[str, str]:
    """Every generated page: its path under ``docs/`` and its markdown."""
    return {COMMANDS_PAGE: commands_page(), CLAIMS_PAGE: claims_page(), POLICIES_PAGE: policies_page()}


def nav_pages(mkdocs_yml: str) -> list[str]:
    """The page paths named in ``mkdocs.yml``'s ``nav`` (read without a YAML parser: the nav is a list of
    ``- Title: path.md`` lines until the next top-level key)."""
    pages, in_nav = [], False
    for line in mkdocs_yml.splitlines():
        if line.startswith("nav:"):
            in_nav = True
            continue
        if in_nav and line and not line[0].isspace() and not line.startswith("#"):
            break
        if in_nav and line.strip().endswith(".md"):
            pages.append(line.strip().rsplit(" ", 1)[-1])
    return pages


# ---------------------------------------------------------------------------------------------------------------
# the MkDocs hook
# ---------------------------------------------------------------------------------------------------------------

def on_files(files, config):
    """Add the generated pages and the committed images the pages show (at their repository paths)."""
    from mkdocs.structure.files import File

    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    for pattern in IMAGE_GLOBS:
        for image in sorted(ROOT.glob(pattern)):
            files.append(File(str(image.relative_to(ROOT)), str(ROOT), config["site_dir"],
                              config["use_directory_urls"]))
    return files
