"""The package's layers import one way.

``monk_framework`` is built in floors: ``core`` (interfaces), ``io`` (reading samples), ``numerics``, ``engine``,
``two_sample`` (the statistics) and ``app`` (command line, jobs, files, experiments).
Every import of the package's own modules (at module level or inside a function; only
imports under ``if TYPE_CHECKING:`` are left out, they never run) goes to the same floor
or one below, the graph has no cycle, and no function imports a module of the package
lazily: only third-party packages may be imported inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "monk_framework"
#: bottom to top; the top-level ``__init__`` (the public API), ``__main__``, the
#: conformance kit ``checks`` and the plugin API ``plugin`` stand on top of everything
FLOORS = ("core", "io", "numerics", "engine", "two_sample", "app")
TOP = len(FLOORS)


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` under ``root``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(inner) for inner in ast.walk(node))
    return skip


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported module of the package, line, at module level) for every import that runs."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_nodes(tree)
    top = {id(node) for node in tree.body}
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - node.level + 1]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin for alias in node.names]
        for target in targets:
            while target and target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != module:
                found.append((target, node.lineno, id(node) in top))
    return found


def import_graph(root: Path, package: str) -> tuple[dict[str, set[str]], list[str]]:
    """The graph of runtime imports between the package's modules, and the lazy ones."""
    modules = module_files(root, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    lazy = []
    for name, path in modules.items():
        for target, line, at_top in imports_of(name, path, modules):
            graph[name].add(target)
            if not at_top:
                lazy.append(f"{path.relative_to(root)}:{line} imports {target} inside a function")
    return graph, lazy


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def floor_of(module: str, package: str = PACKAGE) -> int:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FLOORS:
        return FLOORS.index(parts[1])
    return TOP


def climbs(graph: dict[str, set[str]], package: str = PACKAGE) -> list[str]:
    return sorted(
        f"{source} (floor {floor_of(source, package)}) imports {target} (floor {floor_of(target, package)})"
        for source, targets in graph.items()
        for target in targets
        if floor_of(target, package) > floor_of(source, package)
    )


GRAPH, LAZY = import_graph(ROOT, PACKAGE)


def test_the_internal_import_graph_has_no_cycle():
    assert cycles(GRAPH) == []


def test_imports_never_climb_to_a_higher_floor():
    assert climbs(GRAPH) == []


def test_no_module_of_the_package_is_imported_inside_a_function():
    assert LAZY == []


def test_every_module_lives_on_a_floor():
    loose = [m for m in GRAPH if floor_of(m) == TOP and m not in (PACKAGE, f"{PACKAGE}.__main__", f"{PACKAGE}.checks", f"{PACKAGE}.plugin")]
    assert loose == []


@pytest.fixture
def tangled(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("from pkg.core import b\n")
    (pkg / "core" / "b.py").write_text("def f():\n    from pkg.app import c\n")
    (pkg / "app").mkdir()
    (pkg / "app" / "__init__.py").write_text("")
    (pkg / "app" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.core import a\nfrom . import d\n")
    (pkg / "app" / "d.py").write_text("from ..core.a import x\n")
    return tmp_path


def test_the_checks_catch_a_cycle_a_climb_and_a_lazy_import(tangled):
    graph, lazy = import_graph(tangled, "pkg")
    # a -> b -> (lazily) c -> d -> a; the TYPE_CHECKING import of a is not an edge
    assert graph["pkg.app.c"] == {"pkg.app.d"}
    assert cycles(graph) == [["pkg.app.c", "pkg.app.d", "pkg.core.a", "pkg.core.b"]]
    assert climbs(graph, "pkg") == ["pkg.core.b (floor 0) imports pkg.app.c (floor 5)"]
    assert lazy == ["pkg/core/b.py:2 imports pkg.app.c inside a function"]


#: what a plugin may import of the package: the public top level and the plugin API
PLUGIN_FRONT_DOOR = (PACKAGE, f"{PACKAGE}.plugin")


def package_imports(source: str, filename: str = "<source>") -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of ``monk_framework`` in Python source."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == PACKAGE:
            found.append((node.lineno, node.module or "", [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names if alias.name.split(".")[0] == PACKAGE]
    return found


def through_the_front_door(source: str, filename: str = "<source>") -> list[str]:
    """The imports of ``source`` that go past the plugin front door: any module of the
    package but the top level and :mod:`monk_framework.plugin`, and any name of the top
    level that is not public (in its ``__all__``)."""
    import monk_framework

    public = set(monk_framework.__all__)
    bad = []
    for line, module, names in package_imports(source, filename):
        if module not in PLUGIN_FRONT_DOOR:
            bad.append(f"{filename}:{line} imports {module}")
        elif module == PACKAGE:
            bad += [f"{filename}:{line} imports {PACKAGE}.{name}, not a public name" for name in names if name not in public]
    return bad


def test_plugins_import_only_the_public_top_level_and_the_plugin_api():
    bad = [problem for path in sorted((ROOT / "plugins").glob("*.py")) for problem in through_the_front_door(path.read_text(), path.name)]
    assert bad == []


def test_the_docs_plugin_examples_import_only_the_front_door():
    import re

    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        for block in re.findall(r"<!-- example: \w+\.py -->\n```python\n(.*?)```", text, flags=re.S):
            assert through_the_front_door(block, page.name) == []


def test_the_plugin_api_names_only_what_it_defines_or_gathers():
    import monk_framework.plugin as api

    # every name it offers exists, and it offers the protocols the engine fulfils
    assert all(hasattr(api, name) for name in api.__all__)
    assert {"Pool", "GramMatrix", "pooled_sample", "gram_matrix_of", "reserve_memory"} <= set(api.__all__)


def test_the_front_door_check_catches_an_engine_import_and_a_private_name():
    source = "from monk_framework import Kernel, _private\nfrom monk_framework.engine.pooled import PooledSample\nimport monk_framework.plugin\n"
    assert through_the_front_door(source, "p.py") == [
        "p.py:1 imports monk_framework._private, not a public name",
        "p.py:2 imports monk_framework.engine.pooled",
    ]


#: where the sizes of tiles, bands and batches, and the checks of a size against memory,
#: may be written: the engine alone (``engine.memory``: the table of sizes, the one
#: chunking rule ``chunk_rows`` that plugins call too, the refusals). In ``core`` the
#: budget itself (``resources.py``) reads the machine's memory and holds the check before
#: allocation, but sets no size and cuts no chunk; the core's kernel and embedding methods
#: hand their tiling to the engine (``core.protocols.KernelWork``). The application and
#: ``io`` hold only early refusals of what a user asked for (a plan, a file, a data set),
#: and are not scanned.
POLICY_SCANNED = ("core", "numerics", "two_sample")
BUDGET_HOME = "monk_framework/core/resources.py"
#: the weight of one item of a user's request, handed to the engine's refusals
#: (engine.memory.reserve_memory and reserve_budget), not the size of a chunk of work
ITEM_WEIGHTS = {"GRID_POINT_BYTES", "KERNEL_BYTES", "TRACE_VALUE_BYTES", "PARTITION_POINT_BYTES"}
#: the memory checks that only the engine (and the early refusals) make
MEMORY_CHECKS = {"check_fits", "check_memory", "available_memory"}


def engine_policy(source: str, filename: str = "<source>") -> list[str]:
    """Byte sizes of chunks, chunk formulas and memory checks written in ``source``: a
    module-level ``NAME_BYTES = ...`` (not an item weight), a floor division by a product
    with 8 (the bytes of a float64) or of a budget or a ``*_BYTES`` name, a call of the
    memory checks or of ``.fits(...)``."""
    found = []
    tree = ast.parse(source, filename=filename)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id.endswith("_BYTES") and target.id not in ITEM_WEIGHTS:
                found.append(f"{filename}:{node.lineno} sets the byte size {target.id}")
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            right, left = ast.unparse(node.right), ast.unparse(node.left)
            by_float = isinstance(node.right, ast.BinOp) and any(isinstance(c, ast.Constant) and c.value == 8 for c in ast.walk(node.right))
            if by_float or "budget" in left or "_BYTES" in left or "_BYTES" in right:
                found.append(f"{filename}:{node.lineno} cuts a chunk by hand: {ast.unparse(node)}")
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else ""
            if name in MEMORY_CHECKS or (name == "fits" and isinstance(node.func, ast.Attribute)):
                found.append(f"{filename}:{node.lineno} checks memory itself: {name}(...)")
    return sorted(found, key=lambda line: int(line.split(":")[1].split()[0]))


def test_engine_policy_lives_in_the_engine():
    # every tile, band and batch is cut by engine.memory.chunk_rows, from one table of
    # sizes, and every memory check outside the early refusals is the engine's
    paths = [p for floor in POLICY_SCANNED for p in sorted((ROOT / PACKAGE / floor).rglob("*.py"))] + sorted((ROOT / "plugins").glob("*.py"))
    bad = []
    for path in paths:
        name = str(path.relative_to(ROOT))
        found = engine_policy(path.read_text(), name)
        bad += [line for line in found if "checks memory itself" not in line] if name == BUDGET_HOME else found
    assert bad == []


def test_the_policy_check_catches_a_byte_size_a_chunk_formula_and_a_memory_check():
    source = (
        "TILE_BYTES = 4 * 2**20\nTRACE_VALUE_BYTES = 100\n"
        "def f(n, resources):\n"
        "    rows = max(1, TILE_BYTES // (8 * n))\n"
        "    more = resources.budget // 4\n"
        "    ok = chunk_rows(8 * n, resources=resources)\n"
        "    check_fits(8 * n, None)\n"
        "    return resources.fits(rows)\n"
    )
    assert engine_policy(source, "m.py") == [
        "m.py:1 sets the byte size TILE_BYTES",
        "m.py:4 cuts a chunk by hand: TILE_BYTES // (8 * n)",
        "m.py:5 cuts a chunk by hand: resources.budget // 4",
        "m.py:7 checks memory itself: check_fits(...)",
        "m.py:8 checks memory itself: fits(...)",
    ]


#: the most lines a module of the package (or a built-in plugin) may have: one that grows
#: past it holds more than one concern, and is split by concern
MODULE_LINES = 700


def test_no_module_is_longer_than_a_reader_can_hold():
    long = [
        f"{path.relative_to(ROOT)}: {count} lines"
        for path in sorted([*(ROOT / PACKAGE).rglob("*.py"), *(ROOT / "plugins").glob("*.py")])
        if (count := len(path.read_text().splitlines())) > MODULE_LINES
    ]
    assert long == []


def test_plugins_ask_the_engine_for_mathematics_not_for_workers():
    # where work runs (threads, Dask workers, the spreading of one job) is the engine's
    # business: no built-in plugin imports the backends or the spreading setting
    found = []
    for path in sorted((ROOT / "plugins").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == f"{PACKAGE}.engine.backends":
                found.append(f"{path.name}:{node.lineno} imports {node.module}")
            if isinstance(node, ast.ImportFrom) and node.module == f"{PACKAGE}.core.resources":
                found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith("spread")]
    assert found == []


#: what the package may import: its declared runtime dependencies (pyproject.toml), at
#: module level; the optional extras (experiments, dask) only inside a function, where
#: the code that needs them names the extra when it is missing
RUNTIME = {"numpy", "scipy", "pluggy", "attrs", "typer", "rich", "numba", "llvmlite", "threadpoolctl"}
EXTRAS = {"matplotlib", "dask", "distributed"}


def third_party_imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level name, line, at module level) of every import of a module that is neither
    the standard library's nor this project's."""
    import sys

    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_nodes(tree)
    in_functions = {id(inner) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for inner in ast.walk(node)}
    own = {PACKAGE, "monk_plugins", "plugins"}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top and top not in sys.stdlib_module_names and top not in own and top != "__future__":
                found.append((top, node.lineno, id(node) not in in_functions))
    return found


def test_the_package_imports_only_what_it_declares():
    # `import click` passed every test (the test extra brings click along with dask) and
    # broke the README's main job, whose install has typer alone (which vendors click)
    bad = []
    for path in sorted([*(ROOT / PACKAGE).rglob("*.py"), *(ROOT / "plugins").glob("*.py")]):
        for top, line, module_level in third_party_imports(path):
            allowed = RUNTIME if module_level else RUNTIME | EXTRAS
            if top not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {top}")
    assert bad == []
    # the lists above are pyproject.toml's, not a copy that drifts from it
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = lambda specs: {re.split(r"[\[<>=!~ ]", spec)[0].lower() for spec in specs}  # noqa: E731
    assert names(project["dependencies"]) == RUNTIME
    extras = names(project["optional-dependencies"]["experiments"]) | names(project["optional-dependencies"]["dask"])
    assert extras | {"distributed"} == EXTRAS


def test_an_undeclared_import_is_caught(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\nimport click\nfrom numpy import linalg\n\ndef f():\n    import matplotlib.pyplot\n")
    assert third_party_imports(module) == [("click", 2, True), ("numpy", 3, True), ("matplotlib", 6, False)]
