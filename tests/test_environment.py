"""The services CI runs against. Under CI=true a missing one fails the run;
on a laptop the test skips with the reason."""

from __future__ import annotations

import os

import pytest
import redis

REDIS_URL = os.environ.get("WMS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def test_redis_is_reachable():
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        assert client.ping() is True
    except redis.RedisError as exc:
        message = f"Redis not reachable at {REDIS_URL}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    finally:
        client.close()


def test_tests_of_one_shared_service_run_on_one_worker(tmp_path):
    """tests/conftest.py puts the tests of one shared service (the Slurm
    cluster, the sshd, the ARC CE, the console's browser) in one xdist group,
    so that one worker starts it once. A pytest and pytest-xdist that stop
    honouring the group (pytest 9.2 with xdist 3.8 did, silently) fail here."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        if 'shared' in item.name:\n"
        "            item.add_marker(pytest.mark.xdist_group('svc'))\n")
    (tmp_path / "test_groups.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.parametrize('n', range(6))\n"
        "def test_shared(n):\n"
        "    with open('workers.txt', 'a') as f:\n"
        "        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
        "@pytest.mark.parametrize('n', range(6))\n"
        "def test_other(n):\n"
        "    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:randomly",
                          "-p", "no:cacheprovider", "-q", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers
