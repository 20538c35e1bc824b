"""The conductor package imports one way: no module reaches back to one that imports it.

Every import statement counts, including those only made for type checking
and those inside functions: a circle among them is a circle in the design.
Each module must also import on its own in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import corral.baremetal.conductor as package

PACKAGE = package.__name__
DIRECTORY = Path(package.__file__).parent
MODULES = sorted(f"{PACKAGE}.{path.stem}" for path in DIRECTORY.glob("*.py") if path.stem != "__init__")


def imports_within_package(module: str) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its source."""
    tree = ast.parse((DIRECTORY / f"{module.rpartition('.')[2]}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            # "from package import a, b" names modules; "from package.a import x" names package.a.
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in MODULES and name != module)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` as a list of modules (first repeated last), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        for target in sorted(graph.get(module, ())):
            cycle = visit(target, path + [module])
            if cycle:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle
    return None


def test_find_cycle_reports_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_conductor_modules_import_one_way() -> None:
    graph = {module: imports_within_package(module) for module in MODULES}
    assert f"{PACKAGE}.manager" in graph and graph[f"{PACKAGE}.manager"], graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


@pytest.mark.parametrize("module", MODULES)
def test_each_conductor_module_imports_alone(module: str) -> None:
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
