"""Layering: nothing in workloads/ imports the simulator package."""

from __future__ import annotations

import ast
from pathlib import Path

import workloads


def test_workloads_never_imports_sim() -> None:
    package_dir = Path(workloads.__file__).parent
    offenders = []
    for path in sorted(package_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            offenders += [f"{path.name}: {name}" for name in names if name.split(".")[0] == "sim"]
    assert len(list(package_dir.rglob("*.py"))) > 20
    assert offenders == []
