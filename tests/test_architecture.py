"""The dependency direction drawn in docs/architecture.md (and, short, in the README), checked on the source: every
import of a project package from another one must be an allowed edge, so the graph stays acyclic (policies know
nothing of adversaries, adversaries drive policies only through kvcore's simulators, paper_check is the only
orchestrator).

An import is any ``import x`` / ``from x import y`` anywhere in a module (function bodies included) and any call
``import_module("x...")`` / ``__import__("x...")`` with a literal module name, so a string import cannot hide an
edge.  Test modules (``test_*.py``, ``conftest.py``) may import anything.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "kvcore": set(),
    "policies": {"kvcore"},
    "adversary": {"kvcore"},
    "figures": {"kvcore", "policies"},
    "verify": {"kvcore", "policies", "adversary"},
    "realtrace": {"kvcore", "policies", "adversary", "figures"},
    "theorems": {"kvcore", "policies", "adversary", "figures", "realtrace", "verify"},
    "paper_check": {"kvcore", "policies", "figures", "realtrace", "theorems", "verify"},
    "bench": {"kvcore", "policies"},
}
STRING_IMPORTERS = {"import_module", "__import__"}


def imported_names(tree: ast.AST) -> list[str]:
    """Every module name the source imports, statically or through a literal string."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in STRING_IMPORTERS:
                out.append(node.args[0].value)
    return out


def imports_of(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in (root / package).rglob("*.py"):
        if f.name.startswith("test_") or f.name == "conftest.py":
            continue  # test modules may use anything
        for name in imported_names(ast.parse(f.read_text())):
            top = name.split(".")[0]
            if top in ALLOWED and top != package:
                found.setdefault(top, set()).add(str(f.relative_to(root)))
    return found


def violations(root: Path = ROOT) -> dict:
    return {(pkg, dep): files for pkg in ALLOWED for dep, files in imports_of(pkg, root).items()
            if dep not in ALLOWED[pkg]}


def test_imports_follow_the_architecture():
    bad = violations()
    assert not bad, f"imports against the architecture: {bad}"


def test_a_string_import_against_the_direction_is_seen(tmp_path):
    """A policy module that reaches the adversaries through ``import_module("adversary...")`` is a violation."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "sneaky.py").write_text(
        "from importlib import import_module\n\n\ndef peek():\n    return import_module('adversary.lower_bounds')\n")
    assert violations(tmp_path) == {("policies", "adversary"): {"policies/sneaky.py"}}


def test_allowed_graph_is_acyclic():
    state: dict[str, int] = {}

    def visit(n: str) -> None:
        assert state.get(n) != 1, f"cycle through {n}"
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in ALLOWED[n]:
            visit(m)
        state[n] = 2

    for n in ALLOWED:
        visit(n)


# --------------------------------------------------------------------------------------------------------------------
# inside a package: no import cycles between its modules, no source file over 500 lines
# --------------------------------------------------------------------------------------------------------------------

MAX_LINES = 500


def _module_name(f: Path, root: Path) -> str:
    parts = list(f.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name of a relative ``from ... import`` in ``module``."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def module_graph(root: Path = ROOT):
    """Directed graph of the project's non-test modules: an edge A -> B when A imports B (anywhere in A, function
    bodies included; ``from P import x`` counts as importing ``P.x`` when that is a module, else ``P``).  Importing
    one's own ancestor package is not an edge: Python runs a package's ``__init__`` before any of its modules, so it
    closes no cycle the modules could be caught in."""
    import networkx as nx

    files = {}
    for pkg in ALLOWED:
        for f in (root / pkg).rglob("*.py"):
            if not (f.name.startswith("test_") or f.name == "conftest.py"):
                files[_module_name(f, root)] = f
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for mod, f in files.items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(node, mod, f.name == "__init__.py") if node.level else node.module
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in files else src for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in files:   # import a.b.c of a function/attribute path: the module that holds it
                    t = t.rpartition(".")[0]
                if t and t != mod and not mod.startswith(t + "."):
                    g.add_edge(mod, t)
    return g


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    import networkx as nx

    return sorted(sorted(c) for c in nx.strongly_connected_components(module_graph(root)) if len(c) > 1)


def test_no_import_cycles_between_modules():
    assert import_cycles() == [], "modules that import each other (a library module that is also its own command line?)"


def test_an_import_cycle_through_a_function_level_import_is_seen(tmp_path):
    pkg = tmp_path / "realtrace"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lib.py").write_text("def run():\n    from .cli import fmt\n    return fmt()\n")
    (pkg / "cli.py").write_text("from realtrace.lib import run\n\n\ndef fmt():\n    return run\n")
    (pkg / "child.py").write_text("from . import lib\nimport realtrace\n")   # a parent import is not a cycle
    assert import_cycles(tmp_path) == [["realtrace.cli", "realtrace.lib"]]


def test_no_source_file_is_over_500_lines():
    """A file that long holds more than one role (issue 22); split it by role."""
    long = {str(f.relative_to(ROOT)): n for pkg in ALLOWED for f in (ROOT / pkg).rglob("*.py")
            if not f.name.startswith("test_") and (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert long == {}
