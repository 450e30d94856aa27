"""The agents on Celery with a real Redis and a real worker process, and the
per-agent Redis lock (agents/locks.py).

Under CI=true an unreachable Redis fails; on a laptop the tests skip with
the reason. Only the spare Redis database below is used, and flushed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from agents.celery_app import (
    DEFAULT_QUEUE,
    AgentsCelery,
    AgentTiming,
    agent_names,
    task_name,
)
from agents.locks import acquire, acquire_key, agent_lock, lock_key, release, release_key, renew_key
from tests.agents.conftest import REDIS_URL
from tests.helpers import CONFIG_DIR, ROLAND, as_pilot, patience, wait_until
from tests.sandboxes_config import received
from wms.core.match.context import PilotRequest
from wms.db.engine import make_engine
from wms.services import leases
from wms.services import matcher, sandboxes
from wms.services import pools as pools_service
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

BIN = Path(sys.executable).parent
RESULT_TIMEOUT = patience(90)


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory, redis_client) -> Path:
    """A copy of config/ on a SQLite file and the spare Redis database, schema created."""
    tmp = tmp_path_factory.mktemp("celery")
    directory = tmp / "config"
    shutil.copytree(CONFIG_DIR, directory)
    wms_yaml = directory / "wms.yaml"
    text = wms_yaml.read_text()
    text = re.sub(r"(?m)^database_url:.*$", f"database_url: sqlite:///{tmp / 'wms.db'}", text)
    text = re.sub(r"(?m)^broker_url:.*$", f"broker_url: {REDIS_URL}", text)
    text = re.sub(r"(?m)^  directory: var/sandboxes$", f"  directory: {tmp / 'sandboxes'}", text)
    wms_yaml.write_text(text)
    env = {**os.environ, "WMS_CONFIG": str(directory)}
    env.pop("WMS_DATABASE_URL", None)
    env.pop("WMS_BROKER_URL", None)
    subprocess.run([str(BIN / "wms"), "db", "upgrade"], cwd=tmp, env=env, check=True,
                   capture_output=True, timeout=60)
    return directory


# This module's tasks go to a queue of its own worker alone: another module's
# worker on the same Redis (tests of several modules interleave on one xdist
# worker) must not run them against its own database.
OWN_QUEUE = f"{DEFAULT_QUEUE}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def client_app(config_dir) -> AgentsCelery:
    app = AgentsCelery(config_dir=config_dir, set_as_current=False)
    yield app
    app.close()


def start_worker(config_dir: Path, output: int | None) -> subprocess.Popen:
    """A Celery worker of the agents on ``config_dir`` (one process, the agents' queue)."""
    env = {**os.environ, "WMS_CONFIG": str(config_dir)}
    env.pop("WMS_DATABASE_URL", None)
    env.pop("WMS_BROKER_URL", None)
    return subprocess.Popen(
        [str(BIN / "celery"), "-A", "agents", "worker", "--pool", "solo", "-Q", f"{OWN_QUEUE},{DEFAULT_QUEUE}",
         "-n", f"test-{uuid.uuid4().hex[:8]}@%h", "--loglevel", "warning", "--without-heartbeat",
         "--without-gossip", "--without-mingle"],
        cwd=config_dir.parent, env=env, stdout=output, stderr=subprocess.STDOUT,
    )


@pytest.fixture(scope="module")
def worker(config_dir, client_app):
    process = start_worker(config_dir, subprocess.PIPE)
    yield process
    process.terminate()  # warm shutdown
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.stdout.close()


def result_of(app: AgentsCelery, agent: str, worker: subprocess.Popen):
    result = app.send_task(task_name(agent), queue=OWN_QUEUE)
    try:
        return result.get(timeout=RESULT_TIMEOUT)
    except Exception:
        if worker.poll() is not None:
            pytest.fail(f"the worker exited ({worker.returncode}): {worker.stdout.read().decode()[-2000:]}")
        raise
    finally:
        result.forget()


# -- the application's settings ----------------------------------------------------
def test_beat_schedule_and_limits_follow_wms_yaml(client_app):
    settings = client_app.wms_config.settings
    conf = client_app.conf
    assert conf.broker_url == conf.result_backend == REDIS_URL
    assert set(conf.beat_schedule) == set(agent_names()) >= {"lease_reaper", "site_director"}
    for name, entry in conf.beat_schedule.items():
        period = settings.agent_period(name)
        assert entry["task"] == f"wms.agents.{name}"
        assert entry["schedule"] == period
        limits = conf.task_annotations[entry["task"]]
        assert limits["soft_time_limit"] < limits["time_limit"] < period
        assert AgentTiming(period).lock_ttl > limits["time_limit"]
    assert conf.task_serializer == "json" and conf.task_acks_late and conf.worker_prefetch_multiplier == 1


# -- a real worker -------------------------------------------------------------------
@pytest.mark.parametrize("agent, keys", [
    ("submit_pool_refresher", {"pools", "task_queues", "jobs_changed"}),
    ("lease_reaper", {"returned", "stalled"}),
])
def test_worker_runs_the_agent(client_app, worker, agent, keys):
    report = result_of(client_app, agent, worker)
    assert set(report) == keys
    assert all(isinstance(value, int) for value in report.values())


def test_a_worker_that_starts_refreshes_the_pool_map_at_once(client_app, worker, config_dir):
    """The beat keeps its rhythm across restarts, so the refresh a restarted
    worker sends itself is what serves a queue added to resources.yaml."""
    runtime = Runtime.create(client_app.wms_config, make_engine(client_app.wms_config.settings.database_url))
    started = datetime.now(UTC)
    second = start_worker(config_dir, subprocess.DEVNULL)
    try:
        def refreshed_since_start() -> bool:
            stamp = pools_service.pool_map_stamp(runtime)
            return stamp is not None and datetime.fromisoformat(stamp["refreshed"]) >= started

        wait_until(refreshed_since_start, RESULT_TIMEOUT, "the pool map refreshed by the starting worker",
                   details=lambda: str(pools_service.pool_map_stamp(runtime)))
        assert pools_service.pool_map_stamp(runtime)["fingerprint"] == runtime.config.pool_map_fingerprint
    finally:
        second.terminate()
        second.wait(timeout=patience(30))
        runtime.engine.dispose()


def test_the_worker_expires_the_sandboxes_of_finished_jobs(client_app, worker):
    runtime = Runtime.create(client_app.wms_config, make_engine(client_app.wms_config.settings.database_url))
    long_ago = datetime.now(UTC) - timedelta(seconds=runtime.config.settings.sandboxes.max_age + 60)
    digest, body = received(b"#!/bin/sh\n")
    sandboxes.upload(runtime, ROLAND, digest, body, long_ago)
    [job_id] = submit_jobs(runtime, ROLAND, [("a.jdl", '[ Executable = "/bin/sh"; CPUTime = 300; '
                                                       'InputSandbox = {"run.sh"}; ]')], SubmitOptions(), long_ago,
                           input_sandboxes=[{"run.sh": digest}])
    request = PilotRequest(site="DIRAC.Local.ch", ce="localhost", queue="default", host="wn1", pilot_id="p1",
                           platform="x86_64-el9", cpu_time_left=100000)
    assert matcher.request_job(runtime, request, long_ago).job["JobID"] == job_id
    for status in ("Running", "Done"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", status, "", 0, long_ago)

    report = result_of(client_app, "sandbox_cleaner", worker)
    # The content itself was stored just now: it stays its orphan_grace.
    assert report == {"files_removed": 1, "uploads_forgotten": 1, "contents_removed": 0}
    assert sandboxes.manifest(runtime, ROLAND, job_id)["InputSandbox"] == []
    runtime.engine.dispose()


def test_a_run_skips_while_another_holds_the_lock(client_app, worker, redis_client):
    with agent_lock(redis_client, "lease_reaper", ttl=30) as acquired:
        assert acquired
        assert result_of(client_app, "lease_reaper", worker) == {"skipped": "locked"}
    assert redis_client.exists(lock_key("lease_reaper")) == 0
    assert "skipped" not in result_of(client_app, "lease_reaper", worker)


# -- the lock ------------------------------------------------------------------------
def test_of_concurrent_acquisitions_one_wins(redis_client):
    name = f"race-{uuid.uuid4().hex}"
    barrier = threading.Barrier(16)
    tokens: list[str | None] = []

    def contend() -> None:
        client = redis.Redis.from_url(REDIS_URL)
        barrier.wait()
        tokens.append(acquire(client, name, ttl=10))
        client.close()

    threads = [threading.Thread(target=contend) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [token for token in tokens if token is not None]
    assert len(tokens) == 16 and len(winners) == 1
    assert redis_client.get(lock_key(name)).decode() == winners[0]


def test_only_the_owner_releases(redis_client):
    name = f"owner-{uuid.uuid4().hex}"
    with agent_lock(redis_client, name, ttl=10) as first:
        token = redis_client.get(lock_key(name)).decode()
        with agent_lock(redis_client, name, ttl=10) as second:
            assert first and not second
        assert release(redis_client, name, "not-the-owner") is False
        assert redis_client.get(lock_key(name)).decode() == token  # both left it alone
    assert redis_client.exists(lock_key(name)) == 0


def test_the_lock_expires(redis_client):
    name = f"expiry-{uuid.uuid4().hex}"
    old = acquire(redis_client, name, ttl=0.2)
    assert old is not None and acquire(redis_client, name, ttl=10) is None
    time.sleep(0.3)
    new = acquire(redis_client, name, ttl=10)
    assert new is not None
    assert release(redis_client, name, old) is False  # the expired owner cannot free the new one
    assert release(redis_client, name, new) is True


def test_renew_extends_only_the_owners_lock_and_retakes_a_lost_one(redis_client):
    key = f"wms:test-renew:{uuid.uuid4().hex}"
    token = acquire_key(redis_client, key, ttl=1)
    assert renew_key(redis_client, key, token, ttl=30) is True
    assert redis_client.pttl(key) > 20_000
    assert renew_key(redis_client, key, "not-the-owner", ttl=30) is False
    assert redis_client.get(key).decode() == token
    redis_client.delete(key)  # e.g. a restarted Redis without persistence
    assert renew_key(redis_client, key, token, ttl=30) is True
    assert redis_client.get(key).decode() == token
    assert release_key(redis_client, key, token) is True and redis_client.exists(key) == 0


def test_the_beat_scheduler_is_the_locking_one(client_app):
    assert client_app.conf.beat_scheduler == "agents.beat:SingleBeatScheduler"
