"""Static scheduling rules of a job against a queue (DIRAC's reserved
requirement keywords, specs/002 introduction): Site, BannedSite, Platform,
CPUTime, Tags, NumberOfProcessors.

"Static" means the answer depends on configuration only: it is computed at
submission, again per task queue when the pools are refreshed, and the
Matcher caches it per task queue. The chain and the refresher both use
``filter_queues``, so the rules live here only. Decisions (documented in
docs/architecture.md):

* A queue that declares no Platform accepts any platform: the pilot
  reports the node's real platform and the Matcher checks it then.
* A queue's CPUTime is the most CPU time a job may use there; a queue
  without CPUTime sets no limit. Jobs are compared by their CPUTime
  segment (the task queue's value), so every job of a task queue gets the
  same answer.
* A queue offers the tags in its ``Tag``/``Tags`` parameter; a job's tags
  must all be offered.
* A queue without NumberOfProcessors offers one processor (as DIRAC).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from wms.core.resources import ParameterMap, QueueRef, Resources

REASON_SITE = "site not requested"
REASON_BANNED = "banned site"
REASON_PLATFORM = "platform mismatch"
REASON_CPUTIME = "CPUTime too short"
REASON_TAGS = "missing tags"
REASON_PROCESSORS = "too few processors"
REASON_REQUIREMENTS = "Requirements not met"

NO_QUEUE = "No eligible queue"
# MinorStatus of a job that some queue can run, waiting for a pilot.
WAITING_FOR_PILOT = "Pilot Agent Submission"


def cpu_time_segment(cpu_time: int, segments: Sequence[int]) -> int:
    """The upper bound of the segment ``cpu_time`` falls in.

    Bucketing keeps jobs that differ a little in CPUTime in one task queue.
    A job needing more than the largest segment keeps its own value, so it
    is never offered to a queue that is too short.
    """
    ordered = sorted(segments)
    i = bisect.bisect_left(ordered, cpu_time)
    return ordered[i] if i < len(ordered) else cpu_time


@dataclass(frozen=True)
class SchedulingRequest:
    """The scheduling-relevant part of a job or task queue."""

    sites: tuple[str, ...] = ()
    banned_sites: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    cpu_time: int = 0
    tags: tuple[str, ...] = ()
    processors: int = 1



def parameter(params: ParameterMap, *names: str) -> Any:
    """A queue parameter by the first of ``names`` it has (names ignore case)."""
    for name in names:
        value = params.get(name)
        if value is not None:
            return value
    return None


def as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return [value]


def rejection(request: SchedulingRequest, ref: QueueRef, params: Mapping[str, Any]) -> str | None:
    """None if the queue may run the request, else a REASON_* constant."""
    if not isinstance(params, ParameterMap):
        params = ParameterMap(params)
    if request.sites and ref.site not in request.sites:
        return REASON_SITE
    if ref.site in request.banned_sites:
        return REASON_BANNED
    offered = as_list(parameter(params, "Platform"))
    if request.platforms and offered and not set(map(str, offered)) & set(request.platforms):
        return REASON_PLATFORM
    limit = parameter(params, "CPUTime", "MaxCPUTime")
    if limit is not None and float(limit) < request.cpu_time:
        return REASON_CPUTIME
    if request.tags and not set(request.tags) <= set(map(str, as_list(parameter(params, "Tag", "Tags")))):
        return REASON_TAGS
    queue_processors = parameter(params, "NumberOfProcessors")
    if request.processors > (int(queue_processors) if queue_processors is not None else 1):
        return REASON_PROCESSORS
    return None


def filter_queues(
    request: SchedulingRequest, candidates: Iterable[QueueRef], resources: Resources
) -> tuple[list[QueueRef], dict[str, int]]:
    """The candidates the request may run on, and how many were dropped for each reason."""
    kept: list[QueueRef] = []
    dropped: dict[str, int] = {}
    for ref in candidates:
        reason = rejection(request, ref, resources.queue_parameter_map(ref))
        if reason is None:
            kept.append(ref)
        else:
            dropped[reason] = dropped.get(reason, 0) + 1
    return kept, dropped


def static_queues(
    request: SchedulingRequest, pool_queues: Iterable[QueueRef] | None, resources: Resources
) -> tuple[list[QueueRef], dict[str, int]]:
    """The queues that could ever run a job or task queue, and why the others cannot.

    ``pool_queues`` are the eligible queues of its SubmitPool (None for a job
    without Requirements: every queue of the VO is a candidate). The queues
    left out of the pool are counted under REASON_REQUIREMENTS.
    """
    every_queue = resources.queues()
    if pool_queues is None:
        return filter_queues(request, every_queue, resources)
    candidates = list(pool_queues)
    kept, dropped = filter_queues(request, candidates, resources)
    excluded = len(every_queue) - len(candidates)
    if excluded > 0:
        dropped[REASON_REQUIREMENTS] = excluded
    return kept, dropped


def no_queue_message(dropped: Mapping[str, int]) -> str:
    """MinorStatus of a job no queue can run, e.g. ``No eligible queue: banned site (2), ...``."""
    if not dropped:
        return NO_QUEUE
    summary = ", ".join(f"{reason} ({count})" for reason, count in sorted(dropped.items()))
    return f"{NO_QUEUE}: {summary}"
