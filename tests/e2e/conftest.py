"""End-to-end tests: every part a real process (marker ``e2e``).

Run only them with ``pytest -m e2e``, or leave them out with ``-m "not e2e"``.
A service that is missing (PostgreSQL, redis-server) skips them with the
reason, and fails them under CI=true. A failure shows the tails of the
processes' logs (tests/conftest.py).
"""

from __future__ import annotations

import pytest

from tests.e2e.processes import RedisServer
from tests.helpers import patience

# A few minutes on a loaded machine; the limit only ends a run that hangs.
TIMEOUT = patience(900)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/e2e/" in str(item.path):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.timeout(TIMEOUT))


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of the test's own on a free port (never the machine's 6379)."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.kill()
