"""The pilot is shipped to worker nodes: standard library only, runnable as a zipapp."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipapp
from pathlib import Path

PILOT = Path(__file__).resolve().parents[2] / "pilot"


def top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_standard_library_only():
    offenders = {
        f"{path.name} imports {name}"
        for path in PILOT.rglob("*.py")
        for name in top_level_imports(path)
        if name not in sys.stdlib_module_names and name not in ("pilot", "__future__")
    }
    assert offenders == set()


def test_runs_as_a_zipapp_outside_the_project(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(PILOT, src / "pilot", ignore=shutil.ignore_patterns("__pycache__"))
    # zipapp's own main= template drops the return value; this keeps the exit code.
    (src / "__main__.py").write_text("import sys\nfrom pilot.main import main\nsys.exit(main())\n")
    target = tmp_path / "pilot.pyz"
    zipapp.create_archive(src, target)
    # -I: isolated mode, no site-packages, nothing from the project's venv on the path.
    proc = subprocess.run([sys.executable, "-I", str(target), "--help"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "wms-pilot" in proc.stdout
    bad = subprocess.run([sys.executable, "-I", str(target), "--site", "S", "--ce", "C", "--queue", "Q"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=30, env={})
    assert bad.returncode == 2 and "no token" in bad.stderr
