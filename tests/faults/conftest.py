"""Fault-injection tests (marker ``faults``): real processes killed on a
schedule. ``pytest -m faults`` runs only them; ``make test`` runs them with
the rest. A missing service skips them with the reason, and fails them
under CI=true. A failure shows the schedule of faults and the tails of the
logs of every process involved (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import TIMEOUT
from tests.e2e.conftest import private_redis  # noqa: F401 - the fixture, shared


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/faults/" in str(item.path):
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.timeout(TIMEOUT))
