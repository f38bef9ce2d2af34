"""The dependency direction drawn in the README's architecture section, checked on the source: every import of a
project package from another one must be an allowed edge, so the graph stays acyclic (policies know nothing of
adversaries, adversaries drive policies only through kvcore's simulators, paper_check is the only orchestrator).

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
    "realtrace": {"kvcore", "policies", "adversary"},
    "theorems": {"kvcore", "policies", "adversary", "figures", "realtrace"},
    "paper_check": {"kvcore", "policies", "figures", "realtrace", "theorems"},
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
