"""The Celery application of the distributed set-up: `celery -A agents worker`
runs the agents' tasks (agents/tasks.py), `celery -A agents beat` sends them
on their periods (wms.yaml ``agent_periods``).

Nothing here touches Redis or a database at import time: the configuration
directory (``$WMS_CONFIG``, else ``./config``) is read on first access to
``app.conf`` (Celery's lazy defaults), and each worker process builds its
Runtime on its first task (agents.tasks.worker_runtime).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from celery import Celery

from agents.broker import transport_for
from wms.config import Config, config_dir_from_env, load_config

TASK_PREFIX = "wms.agents."
DEFAULT_QUEUE = "wms-agents"


def task_name(agent: str) -> str:
    """The Celery task name of an agent: ``wms.agents.<agent>``."""
    return TASK_PREFIX + agent


def agent_names() -> list[str]:
    """Every agent Celery runs: the registry's plus the SiteDirector."""
    from agents.registry import (
        AGENTS,  # imported here so that `import agents` stays light
    )

    return [*AGENTS, "site_director"]


@dataclass(frozen=True)
class AgentTiming:
    """How long one run of an agent may take, from its period.

    A run is soft-limited to 80 % and killed at 90 % of the period (at least
    5 / 10 s), so it ends before the next one is due; the lock lives 30 s
    longer than the hard limit, so it outlives any run that is not killed
    and still frees itself when a worker dies holding it. Time limits are
    enforced by the prefork pool only (not by ``--pool solo``).
    """

    period: int

    @property
    def time_limit(self) -> int:
        return max(10, int(self.period * 0.9))

    @property
    def soft_time_limit(self) -> int:
        return max(5, int(self.period * 0.8))

    @property
    def lock_ttl(self) -> int:
        return self.time_limit + 30


def celery_settings(config: Config) -> dict[str, Any]:
    """The Celery settings derived from wms.yaml."""
    settings = config.settings
    timings = {name: AgentTiming(settings.agent_period(name)) for name in agent_names()}
    return {
        "broker_url": settings.broker_url,
        # kombu's Redis transport with a crash on broker loss guarded (agents/broker.py).
        "broker_transport": transport_for(settings.broker_url),
        "result_backend": settings.broker_url,
        "broker_connection_retry_on_startup": True,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_expires": 3600,
        "timezone": "UTC",
        "enable_utc": True,
        "task_default_queue": DEFAULT_QUEUE,
        # Late acknowledgement: a run lost with its worker is delivered again
        # (harmless, the agents are idempotent); one task at a time per process.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_annotations": {
            task_name(name): {"time_limit": t.time_limit, "soft_time_limit": t.soft_time_limit}
            for name, t in timings.items()
        },
        # One beat dispatches at a time: the one holding the beat lock (agents/beat.py).
        "beat_scheduler": "agents.beat:SingleBeatScheduler",
        # A run that waited a whole period in the queue is dropped: the next one is due.
        "beat_schedule": {
            name: {"task": task_name(name), "schedule": float(t.period), "options": {"expires": float(t.period)}}
            for name, t in timings.items()
        },
    }


class AgentsCelery(Celery):
    """A Celery app configured from a WMS configuration directory, lazily."""

    def __init__(self, config_dir: str | Path | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("include", ["agents.tasks"])
        super().__init__("agents", **kwargs)
        self.config_dir = config_dir
        self.add_defaults(lambda: celery_settings(self.wms_config))

    @cached_property
    def wms_config(self) -> Config:
        """The WMS configuration (``config_dir``, else ``$WMS_CONFIG``, else ./config)."""
        return load_config(config_dir_from_env(self.config_dir))

    def agent_timing(self, name: str) -> AgentTiming:
        return AgentTiming(self.wms_config.settings.agent_period(name))


app = AgentsCelery()
