"""Every third-party module Corral imports is a declared dependency.

A module that happens to be installed with the test tools (jsonpatch comes
with openstacksdk, for example) would otherwise pass the suite and fail on a
fresh machine after ``pip install .``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "corral").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"corral"}


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"]) + list(project["optional-dependencies"].get("keystone", []))
    return {re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-") for requirement in requirements}


def test_every_imported_module_is_declared() -> None:
    distributions = importlib.metadata.packages_distributions()
    declared = _declared()
    missing = {}
    for module in sorted(_imported_top_levels()):
        # An optional extra that is not installed is known by its module name.
        providers = {name.lower().replace("_", "-") for name in distributions.get(module, [module])}
        if not providers & declared:
            missing[module] = sorted(providers)
    assert missing == {}
