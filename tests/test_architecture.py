"""The dependency direction drawn in the README's architecture section, checked on the source: every import of a
project package from another one must be an allowed edge, so the graph stays acyclic (policies know nothing of
adversaries, adversaries drive policies only through kvcore's simulators, paper_check is the only orchestrator)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "kvcore": set(),
    "policies": {"kvcore"},
    "adversary": {"kvcore"},
    "figures": {"kvcore"},
    "realtrace": {"kvcore", "policies", "adversary"},
    "theorems": {"kvcore", "policies", "adversary", "figures", "realtrace"},
    "paper_check": {"kvcore", "policies", "figures", "realtrace", "theorems"},
    "bench": {"kvcore", "policies"},
}


def imports_of(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in (ROOT / package).rglob("*.py"):
        if f.name.startswith("test_") or f.name == "conftest.py":
            continue  # test modules may use anything
        for node in ast.walk(ast.parse(f.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top in ALLOWED and top != package:
                    found.setdefault(top, set()).add(str(f.relative_to(ROOT)))
    return found


def test_imports_follow_the_architecture():
    bad = {(pkg, dep): files for pkg in ALLOWED for dep, files in imports_of(pkg).items() if dep not in ALLOWED[pkg]}
    assert not bad, f"imports against the architecture: {bad}"


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
