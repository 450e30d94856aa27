"""A directory the worker processes of one `wms server --workers N` share."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def directory_in_environment(variable: str, prefix: str) -> Iterator[Path]:
    """The directory the environment ``variable`` names, if set (its owner keeps
    it); else a new one, named in ``variable`` while the block runs, so that
    the workers started in it find it, and removed at the end."""
    given = os.environ.get(variable)
    if given:
        yield Path(given)
        return
    directory = tempfile.mkdtemp(prefix=prefix)
    os.environ[variable] = directory
    try:
        yield Path(directory)
    finally:
        os.environ.pop(variable, None)
        shutil.rmtree(directory, ignore_errors=True)
