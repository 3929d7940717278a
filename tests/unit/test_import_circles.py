"""The library's imports point one way: no module reaches itself through its imports.

Every import counts, wherever it stands: at module level, inside a function (a
lazy import is still a dependency) and under `if TYPE_CHECKING:` (a type-only
import still ties the two modules' meanings together). A circle makes a module
impossible to read, test or move without the others, and an import order that
works today can fail after an unrelated edit.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import candor

pytestmark = pytest.mark.unit

LIBRARY = Path(candor.__file__).parent


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every dotted name an import statement of the file names, anywhere in it."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            # `from candor.api import feedback` imports the module candor.api.feedback.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = module_files(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported in imported_names(name, path):
            # A name inside a module (candor.traces.Trace) is an edge to the module.
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                graph[name].add(imported)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_library_has_no_import_circle() -> None:
    found = circles(import_graph(LIBRARY))

    assert found == [], "import circles among candor's modules: " + "; ".join(
        " <-> ".join(circle) for circle in found
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_circle_through_a_type_only_import_and_a_lazy_one_is_found(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.b import B\n",
            "pkg/b.py": "def f():\n    from . import c\n",
            "pkg/c.py": "import pkg.a\n",
            "pkg/leaf.py": "from pkg import a\n",
        },
    )

    assert circles(import_graph(package)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_imports_that_point_one_way_are_no_circle(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/x.py": "from ..y import Y\n",
            "pkg/y.py": "import json\nfrom pkg import z\n",
            "pkg/z.py": "",
        },
    )

    graph = import_graph(package)

    assert graph["pkg.sub.x"] == {"pkg.y"} and graph["pkg.y"] == {"pkg", "pkg.z"}
    assert circles(graph) == []
