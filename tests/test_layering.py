"""Imports go one way (DESIGN.md): core imports nothing from db, services,
api or cli; db nothing from services, api or cli; services nothing from api
or cli; the pilot only the standard library. classad2 only in core/classad.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import REPO

FORBIDDEN = {
    "wms/core": ("wms.db", "wms.services", "wms.api", "wms.cli", "wms.config", "sqlalchemy", "fastapi", "httpx"),
    "wms/db": ("wms.services", "wms.api", "wms.cli"),
    "wms/services": ("wms.api", "wms.cli"),
    "wms/api": ("wms.cli",),
}


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("package, banned", FORBIDDEN.items())
def test_imports_go_one_way(package, banned):
    offenders = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in (REPO / package).rglob("*.py")
        for name in imports(path)
        if any(name == b or name.startswith(b + ".") for b in banned)
    ]
    assert offenders == []


def test_only_the_classad_wrapper_imports_classad2():
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "wms").rglob("*.py")
        if any(name.split(".")[0] == "classad2" for name in imports(path)) and path.name != "classad.py"
    ]
    assert offenders == []
