"""A leading underscore means private to its module: no module imports another's private
name or reaches into another module's private attributes (framework and plugins alike).
What plugins implement (``compute_gram``, ``compute_estimate``, ...) and may call has a
public name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted([*(ROOT / "monk_framework").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_here(tree: ast.Module) -> set[str]:
    """Private names this module defines: functions, classes, methods, attributes it assigns."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if _private(n)}


def crossings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _defined_here(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
                continue
            found.append(f"line {node.lineno}: reads {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_crosses_a_module_boundary(path):
    assert crossings(path) == [], f"{path.relative_to(ROOT)} uses another module's private names"


def test_the_check_catches_a_crossing(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from monk_framework.core.results import _array_eq\n\ndef f(pool):\n    return pool._source\n")
    assert crossings(bad) == ["line 1: imports _array_eq", "line 4: reads pool._source"]
