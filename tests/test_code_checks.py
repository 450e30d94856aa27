"""The code checks, run with the suite: ruff on everything, mypy on wms/core
(pure logic: its types are its documentation) and on the pilot (it runs on
nodes nobody watches: a type error found there is found late)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: it is a test dependency (pip install -e '.[test]')")
    return found


def test_ruff_finds_nothing():
    run = subprocess.run([tool("ruff"), "check", "--no-cache", "wms", "agents", "pilot", "tests"], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_mypy_finds_nothing_in_core_and_the_pilot():
    run = subprocess.run([tool("mypy"), "--no-incremental", "wms/core", "pilot"], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
