"""Every policy module is registered: a file in ``policies/`` that applies ``@register`` must be listed in
``policies._MODULES`` (otherwise its policy silently never enters the registry, the test matrix or the fuzzer), and
every listed module must register something (issue 22)."""

import ast
from pathlib import Path

import policies

POLICY_DIR = Path(policies.__file__).resolve().parent


def registering_modules(directory: Path) -> set[str]:
    """Modules of ``directory`` (``__init__`` aside) that decorate a class with ``register`` / ``x.register``."""
    found = set()
    for f in directory.glob("*.py"):
        if f.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    (d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else None) == "register"
                    for d in node.decorator_list):
                found.add(f.stem)
    return found


def test_every_module_that_registers_a_policy_is_listed():
    assert registering_modules(POLICY_DIR) - set(policies._MODULES) == set()


def test_every_listed_module_registers_a_policy():
    modules = {info.cls.__module__.rpartition(".")[2] for info in policies.REGISTRY.values()}
    assert set(policies._MODULES) - modules == set()


def test_a_forgotten_module_line_is_seen(tmp_path):
    (tmp_path / "mine.py").write_text("from policies import register\n\n\n@register\nclass Mine:\n    pass\n")
    (tmp_path / "helper.py").write_text("def register_later():\n    pass\n")
    assert registering_modules(tmp_path) - set(policies._MODULES) == {"mine"}
