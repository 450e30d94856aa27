"""Building blocks of the optimizer chain: the job being checked, the
environment shared by a batch, the executor interface and its registry.

Executors are registered by name (``@register``); the order in which they
run comes from wms.yaml, not from the registry, as in the Kubernetes
scheduler framework. An entry ``package.module:ClassName`` in the list
loads a site's own executor.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping, Protocol

from wms.core.errors import ConfigError
from wms.core.identity import Identity
from wms.core.jdl import JobDescription
from wms.core.resources import QueueRef, Resources
from wms.core.task_queues import TaskQueueDefinition


@dataclass(frozen=True)
class PoolInfo:
    """A SubmitPool: the hash of canonical requirements and where they can run."""

    pool_id: str
    requirements: Mapping[str, Any]
    vo: str
    queues: tuple[QueueRef, ...]


@dataclass
class Job:
    """One job on its way through the chain.

    ``updates`` are attributes the chain adds to or changes in the JDL
    (Owner, OwnerGroup, SubmitPool, Site, ...); ``queues`` are the queues
    that could ever run the job, narrowed by each executor in turn.
    """

    description: JobDescription
    source: str
    identity: Identity
    owner: str = ""
    owner_group: str = ""
    vo: str = ""
    updates: dict[str, Any] = field(default_factory=dict)
    pool: PoolInfo | None = None
    sites: list[str] = field(default_factory=list)
    banned_sites: list[str] = field(default_factory=list)
    queues: list[QueueRef] | None = None
    cpu_time: int = 0
    minor_status: str = "Pilot Agent Submission"
    # Why queues were dropped, for the "no eligible queue" message.
    rejections: dict[str, int] = field(default_factory=dict)
    # The task queue the job is filed into (the TaskQueue executor), and that queue's first priority.
    task_queue: TaskQueueDefinition | None = None
    task_queue_priority: int = 1
    # Grid Engine requests by canonical complex name, values in their types.
    hard_requests: dict[str, Any] = field(default_factory=dict)
    soft_requests: dict[str, Any] = field(default_factory=dict)

    def drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` queues dropped for ``reason``."""
        if count:
            self.rejections[reason] = self.rejections.get(reason, 0) + count


@dataclass
class ChainEnv:
    """What every executor of a batch may read, and caches shared by the batch.

    ``resources_for`` returns the Resources view of one VO; ``pools`` keeps
    the SubmitPools computed so far, so a thousand jobs with the same
    requirements cost one eligibility computation.
    """

    settings: Any
    operations: Any
    cluster: Any
    resources_for: Callable[[str], Resources]
    # How each Requirements parameter compares (number, string, list).
    parameter_types: Mapping[str, str]
    # The complex attributes (built-in and cluster.yaml) requests may name.
    complexes: Any
    now: datetime
    pools: dict[str, PoolInfo] = field(default_factory=dict)
    # (vo, pool id, scheduling request) -> (queues kept, drops by reason).
    static_queues: dict[tuple, tuple[list[QueueRef], dict[str, int]]] = field(default_factory=dict)


class Executor(Protocol):
    name: str

    def process(self, job: Job, env: ChainEnv) -> None:
        """Check or prepare ``job``; raise InvalidInput/JDLError to refuse it."""


registry: dict[str, type[Executor]] = {}


def register(cls: type[Executor]) -> type[Executor]:
    """Class decorator adding an executor to the registry under its name."""
    if cls.name in registry:
        raise ValueError(f"executor {cls.name!r} registered twice")
    registry[cls.name] = cls
    return cls


def build_chain(names: list[str]) -> list[Executor]:
    """Instantiate the executors named in wms.yaml, in that order."""
    chain: list[Executor] = []
    for entry in names:
        if ":" in entry:
            module_name, _, class_name = entry.partition(":")
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
            except (ImportError, AttributeError) as exc:
                raise ConfigError(f"optimizers: cannot load executor {entry!r}: {exc}", where="wms.yaml") from exc
        else:
            try:
                cls = registry[entry]
            except KeyError:
                known = ", ".join(sorted(registry))
                raise ConfigError(f"optimizers: unknown executor {entry!r} (known: {known})", where="wms.yaml") from None
        if not callable(getattr(cls, "process", None)) or not isinstance(getattr(cls, "name", None), str):
            raise ConfigError(f"optimizers: {entry!r} is not an executor (needs name and process)", where="wms.yaml")
        chain.append(cls())
    return chain
