"""A task queue's definition: what makes jobs share one task queue.

Jobs whose scheduling-relevant content is identical share one task queue
(Grid Engine calls it a job category): owner, group, VO, SubmitPool, the
scheduling request (CPUTime segment, the user's Site/BannedSite, Platform,
Tags, processors), the ClassAd Requirements expression and the part of the
job's own ad it reads, hard and soft resource requests, parallel
environment, project and advance reservation.

The TaskQueue optimizer builds a :class:`TaskQueueDefinition`; the job
carries it, the database stores its document (:meth:`stored`) and is
searched by its key (:attr:`key`, a digest of that document), and the
Matcher's view of a task queue holds the one read back
(:meth:`from_stored`). The document's names are the stored form, read and
written here only: a misspelt attribute fails at once, where a misspelt
key of a dict would read None.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping

from wms.core.errors import InvalidInput
from wms.core.scheduling import SchedulingRequest

#: The document key of the job's ad its Requirements expression reads
#: (core/pools.py's ``my``): present only when the expression reads the job's ad.
REQUIREMENTS_AD = "requirements_ad"


def _frozen(requests: Mapping[str, Any]) -> Mapping[str, Any]:
    """Requests in name order, read-only: the definition is a value."""
    return MappingProxyType(dict(sorted(requests.items())))


@dataclass(frozen=True)
class TaskQueueDefinition:
    """The scheduling-relevant content of a job, shared by every job of its task queue."""

    owner: str
    owner_group: str
    vo: str
    submit_pool: str | None
    request: SchedulingRequest
    requirements_expr: str | None = None
    # The job's own ad as far as the expression reads it (MY), as ClassAd text.
    requirements_ad: str | None = None
    # Canonical complex names and typed values: "mf=2G" and "mem_free=2048M" are one request.
    hard_requests: Mapping[str, Any] = field(default_factory=dict)
    soft_requests: Mapping[str, Any] = field(default_factory=dict)
    parallel_environment: str | None = None
    project: str | None = None
    # The advance reservation the jobs run in (JDL Reservation, -ar).
    reservation: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "hard_requests", _frozen(self.hard_requests))
        object.__setattr__(self, "soft_requests", _frozen(self.soft_requests))

    @property
    def slots(self) -> int:
        """Slots a job of this task queue takes (its processors)."""
        return self.request.processors

    def document(self) -> dict[str, Any]:
        """The definition as the JSON document stored with the task queue (and shown by ``wms task-queues``)."""
        request = self.request
        out: dict[str, Any] = {
            "owner": self.owner,
            "owner_group": self.owner_group,
            "vo": self.vo,
            "submit_pool": self.submit_pool,
            "cpu_time": request.cpu_time,
            "sites": list(request.sites),
            "banned_sites": list(request.banned_sites),
            "platforms": sorted(request.platforms),
            "tags": list(request.tags),
            "number_of_processors": request.processors,
            "requirements_expr": self.requirements_expr,
            "resource_requests": dict(self.hard_requests),
            "soft_resource_requests": dict(self.soft_requests),
            "parallel_environment": self.parallel_environment,
            "project": self.project,
            "reservation": self.reservation,
        }
        if self.requirements_ad is not None:
            # Jobs whose expressions read different values of their own ads differ in what they match.
            out[REQUIREMENTS_AD] = self.requirements_ad
        return out

    def stored(self) -> str:
        """The document as the task queue's ``definition`` column holds it."""
        return json.dumps(self.document(), sort_keys=True)

    @cached_property
    def key(self) -> str:
        """The task queue key: a digest of the document, so equal definitions share one task queue.

        Its input must never change for a definition that did not: the
        stored task queues are found by it (tests/core/test_task_queues.py
        pins it)."""
        text = json.dumps(self.document(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @classmethod
    def from_stored(cls, stored: str | Mapping[str, Any]) -> TaskQueueDefinition:
        """A stored document read back; InvalidInput naming the key when it is not one this module writes.

        A document written before a key existed lacks it: it reads as that key's empty value."""
        data = _loaded(stored)
        unknown = sorted(set(data) - _KNOWN)
        if unknown:
            raise InvalidInput(f"task queue definition: unknown key {unknown[0]!r}")
        reader = _Reader(data)
        return cls(
            owner=reader.text("owner") or "",
            owner_group=reader.text("owner_group") or "",
            vo=reader.text("vo") or "",
            submit_pool=reader.text("submit_pool"),
            request=SchedulingRequest(
                sites=reader.texts("sites"),
                banned_sites=reader.texts("banned_sites"),
                platforms=reader.texts("platforms"),
                cpu_time=reader.integer("cpu_time") or 0,
                tags=reader.texts("tags"),
                processors=reader.integer("number_of_processors") or 1,
            ),
            requirements_expr=reader.text("requirements_expr"),
            requirements_ad=reader.text(REQUIREMENTS_AD),
            hard_requests=reader.requests("resource_requests"),
            soft_requests=reader.requests("soft_resource_requests"),
            parallel_environment=reader.text("parallel_environment"),
            project=reader.text("project"),
            reservation=reader.integer("reservation"),
        )


_KNOWN = frozenset(TaskQueueDefinition("", "", "", None, SchedulingRequest(), requirements_ad="").document())


def _loaded(stored: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(stored, str):
        try:
            stored = json.loads(stored)
        except ValueError as exc:
            raise InvalidInput(f"task queue definition: not JSON: {exc}") from None
    if not isinstance(stored, Mapping):
        raise InvalidInput("task queue definition: not a JSON object")
    return stored


class _Reader:
    """Typed reads of a stored document: a value of the wrong type names its key."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data

    def _wrong(self, key: str, what: str) -> InvalidInput:
        return InvalidInput(f"task queue definition: {key} must be {what}, got {self.data[key]!r}")

    def text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._wrong(key, "a list of strings")
        return tuple(value)

    def integer(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self._wrong(key, "an integer")
        return value

    def requests(self, key: str) -> Mapping[str, Any]:
        value = self.data.get(key) or {}
        if not isinstance(value, dict):
            raise self._wrong(key, "an object of resource requests")
        return value
