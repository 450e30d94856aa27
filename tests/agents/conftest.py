from __future__ import annotations

import os

import pytest
import redis

from tests.helpers import default_config
from wms.services.runtime import Runtime


@pytest.fixture
def runtime(engine) -> Runtime:
    return Runtime.create(default_config(), engine)


# The spare Redis database the Celery and broker tests use (and flush): 11
# for a plain run; under pytest-xdist each worker (gw0, gw1, ...) counts down
# from 11, so two workers never flush each other's queues.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
REDIS_URL = os.environ.get("WMS_TEST_CELERY_REDIS_URL", f"redis://127.0.0.1:6379/{11 - _WORKER}")


@pytest.fixture(scope="module")
def redis_client():
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        message = f"Redis not reachable at {REDIS_URL}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()
