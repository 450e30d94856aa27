"""One Celery task per agent (``wms.agents.<name>``): take the agent's Redis
lock, call the same plain ``(runtime, now)`` function the in-process
scheduler calls, and return its report in JSON form.

A run that finds the lock held returns ``{"skipped": "locked"}``. If Redis
cannot be reached for the lock, the agent runs anyway (logged): the lock
only saves wasted work, the agents' conditional updates keep two runs safe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import redis
from celery.signals import worker_process_init, worker_ready

from agents import site_director
from agents.celery_app import app, task_name
from agents.locks import agent_lock
from agents.reports import log_run
from agents.registry import AGENTS, Agent
from wms.services.runtime import Runtime

log = logging.getLogger("wms.agents.tasks")

AGENT_FUNCTIONS: dict[str, Agent] = {**AGENTS, "site_director": site_director.agent()}

# Per worker process, built on first use (never before a prefork fork).
_runtime: Runtime | None = None
_redis: redis.Redis | None = None
_state_lock = threading.Lock()


@worker_process_init.connect
def _forget_parent_state(**_: Any) -> None:
    global _runtime, _redis
    _runtime = None
    _redis = None


def worker_runtime() -> Runtime:
    """The worker process's Runtime, built from the app's configuration on first use."""
    global _runtime
    with _state_lock:
        if _runtime is None:
            _runtime = Runtime.create(app.wms_config)
        return _runtime


def lock_client() -> redis.Redis | None:
    """A Redis client on the broker's Redis for the locks; None if the broker is not Redis."""
    global _redis
    url = str(app.conf.broker_url)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    with _state_lock:
        if _redis is None:
            _redis = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
        return _redis


def jsonable(value: Any) -> Any:
    """A report as JSON: string keys, lists for tuples and sets, ISO datetimes."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(item) for item in value]
    return str(value)


def run_agent(name: str, function: Agent, now: datetime | None = None) -> Any:
    """One run of agent ``name`` under its lock; its report as JSON, or ``{"skipped": "locked"}``."""
    now = now or datetime.now(UTC)
    ttl = app.agent_timing(name).lock_ttl
    client = lock_client()
    if client is None:
        return _run_logged(name, function, now)
    with contextlib.ExitStack() as stack:
        try:
            acquired = stack.enter_context(agent_lock(client, name, ttl))
        except redis.RedisError as exc:
            log.warning("agent %s runs without its lock (Redis: %s)", name, exc)
            acquired = True
        if not acquired:
            log.info("agent %s skipped: another run holds its lock", name)
            return {"skipped": "locked"}
        return _run_logged(name, function, now)


def _run_logged(name: str, function: Agent, now: datetime) -> Any:
    started = time.monotonic()
    report = jsonable(function(worker_runtime(), now))
    log_run(name, report, time.monotonic() - started)
    return report


def _agent_task(name: str) -> Callable[[], Any]:
    function = AGENT_FUNCTIONS[name]

    @app.task(name=task_name(name))
    def run() -> Any:
        return run_agent(name, function)

    run.__doc__ = f"Agent {name} under its lock (agents.locks); its report."
    return run


TASKS: dict[str, Any] = {name: _agent_task(name) for name in AGENT_FUNCTIONS}

task_queue_priorities = TASKS["task_queue_priorities"]
submit_pool_refresher = TASKS["submit_pool_refresher"]
submit_pool_cleaner = TASKS["submit_pool_cleaner"]
lease_reaper = TASKS["lease_reaper"]
site_director_task = TASKS["site_director"]
sandbox_cleaner = TASKS["sandbox_cleaner"]
job_purger = TASKS["job_purger"]


@worker_ready.connect
def _refresh_pools_at_start(**_: Any) -> None:
    """A worker that starts refreshes the pool map at once, as the in-process
    scheduler runs every agent at start: a queue added to resources.yaml is
    served once the workers restart, not a submit_pool_refresh period later
    (the beat keeps its rhythm across restarts). The agent's lock makes the
    runs of several workers starting together one."""
    try:
        submit_pool_refresher.delay()
    except Exception as exc:  # noqa: BLE001 - the periodic run still comes; a worker must start regardless
        log.warning("could not send the start-up refresh of the pool map: %s", exc)
