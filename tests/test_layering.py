"""Imports go one way (DESIGN.md): core imports nothing from db, services,
api or cli; db nothing from services, api or cli; services nothing from api
or cli; the pilot only the standard library. classad2 only in core/classad.py.
Every package and entry module has its rule here, so a new one cannot be
forgotten. Within a package, imports between its folders go one way too
(no folder imports one that imports it back, however indirectly)."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import REPO

# backends/bundle.py reads the pilot package's files to ship them, the
# one import of the pilot outside it.
SERVER_SIDE = ("wms.api", "wms.cli", "wms.server", "agents")
FORBIDDEN = {
    "wms/core": ("wms.db", "wms.services", "wms.api", "wms.cli", "wms.config", "sqlalchemy", "fastapi", "httpx",
                 "agents", "pilot"),
    "wms/config": ("wms.db", "wms.services", "wms.api", "wms.cli", "agents", "pilot"),
    "wms/db": ("wms.services", "wms.api", "wms.cli", "agents", "pilot"),
    "wms/services": (*SERVER_SIDE, "pilot"),
    # The backends start and watch pilots: core's rules, no database, no service of ours.
    "wms/backends": ("wms.db", "wms.services", "wms.api", "wms.cli", "wms.server", "agents"),
    "wms/api": ("wms.cli", "wms.server", "agents", "pilot"),
    "wms/cli": ("wms.api", "agents", "pilot"),
    "agents": ("wms.api", "wms.cli", "pilot"),
    # Entry modules: the server and the benchmarks use services, never the command line.
    "wms/server.py": ("wms.cli", "pilot"),
    "wms/bench": ("wms.cli", "wms.api", "agents", "pilot"),
    "wms/demo.py": ("wms.api", "wms.services", "wms.db", "agents", "pilot"),
    # The command reference reads the parsers of the command line and of the pilot, nothing else.
    "wms/command_reference.py": ("wms.api", "wms.services", "wms.db", "agents", "wms.server"),
    "wms/token_file.py": ("wms",),
    # Logging set-up and request ids: the server, the API and the agents use it; it uses nothing of theirs.
    "wms/http_bodies.py": ("wms.db", "wms.services", "wms.api", "wms.cli", "wms.config", "agents", "pilot"),
    "wms/logs.py": ("wms.db", "wms.services", "wms.api", "wms.cli", "wms.config", "agents", "pilot"),
    "wms/__init__.py": ("wms.db", "wms.services", "wms.api", "wms.cli"),
}
# The pilot runs on worker nodes with nothing but python3.
STDLIB_ONLY = ("pilot",)


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def files(place: str) -> list[Path]:
    path = REPO / place
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


@pytest.mark.parametrize("place, banned", FORBIDDEN.items())
def test_imports_go_one_way(place, banned):
    offenders = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in files(place)
        for name in imports(path)
        if any(name == b or name.startswith(b + ".") for b in banned)
    ]
    assert offenders == []


def test_every_package_and_entry_module_has_a_rule():
    places = set(FORBIDDEN) | set(STDLIB_ONLY)
    found = {str(p.relative_to(REPO)) for p in (REPO / "wms").iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    found |= {"agents", "pilot"}
    assert sorted(found - places) == []


def test_the_pilot_uses_the_standard_library_only():
    allowed = set(sys.stdlib_module_names) | {"pilot"}
    offenders = [f"{path.relative_to(REPO)} imports {name}" for place in STDLIB_ONLY for path in files(place)
                 for name in imports(path) if name.split(".")[0] not in allowed]
    assert offenders == []


def test_only_the_classad_wrapper_imports_classad2():
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "wms").rglob("*.py")
        if any(name.split(".")[0] == "classad2" for name in imports(path)) and path.name != "classad.py"
    ]
    assert offenders == []


# ---------------------------------------------------------------- folders of one package
PACKAGES = ("wms/core", "wms/config", "wms/db", "wms/services", "wms/api", "wms/cli", "agents", "pilot")


def folder_of(module: str) -> str | None:
    """The folder (relative to the repository) of a module or package of ours; None for any other."""
    path = REPO / module.replace(".", "/")
    if (path / "__init__.py").exists():
        return str(path.relative_to(REPO))
    if path.with_suffix(".py").exists():
        return str(path.parent.relative_to(REPO))
    return None


def imported_folders(path: Path) -> set[str]:
    """The folders ``path`` imports from; ``from a.b import c`` counts c's folder when c is a module."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(folder for alias in node.names if (folder := folder_of(alias.name)) is not None)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                folder = folder_of(f"{node.module}.{alias.name}") or folder_of(node.module)
                if folder is not None:
                    out.add(folder)
    return out


def folder_graph(package: str) -> dict[str, set[str]]:
    """Which folder of ``package`` imports which other folder of it."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in files(package):
        here = str(path.parent.relative_to(REPO))
        for folder in imported_folders(path):
            if folder != here and (folder == package or folder.startswith(package + "/")):
                edges[here].add(folder)
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph (its folders, the first repeated at the end), or [] when it has none."""
    state: dict[str, str] = {}
    trail: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        trail.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return trail[trail.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        trail.pop()
        return []

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


@pytest.mark.parametrize("package", PACKAGES)
def test_the_folders_of_a_package_import_each_other_one_way(package):
    assert cycle(folder_graph(package)) == []


def test_a_cycle_between_folders_is_found():
    edges = {"wms/core/match": {"wms/core", "wms/core/reservations"}, "wms/core/reservations": {"wms/core/match"}}
    assert cycle(edges) == ["wms/core/match", "wms/core/reservations", "wms/core/match"]
    assert cycle({"wms/core/match": {"wms/core"}, "wms/core/reservations": {"wms/core"}}) == []
