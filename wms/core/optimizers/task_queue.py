"""TaskQueue: the last executor. Files the job into a task queue.

Jobs whose scheduling-relevant content is identical share one task queue
(Grid Engine calls it a job category): owner, group, VO, SubmitPool,
CPUTime segment, the user's Site/BannedSite, Platform, Tags, the ClassAd
Requirements expression, hard and soft resource requests, processors,
parallel environment, project and reservation. The definition's digest is
the task queue key; the service looks the key up or creates the queue.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from wms.core.optimizers.base import ChainEnv, Job, register
from wms.core.shares import DEFAULT_SHARE, SCALE
from wms.core.optimizers.job_scheduling import scheduling_request


def task_queue_key(definition: dict[str, Any]) -> str:
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@register
class TaskQueue:
    name = "TaskQueue"

    def process(self, job: Job, env: ChainEnv) -> None:
        desc = job.description
        request = scheduling_request(job, env.settings.cpu_time_segments)
        definition: dict[str, Any] = {
            "owner": job.owner,
            "owner_group": job.owner_group,
            "vo": job.vo,
            "submit_pool": job.pool.pool_id if job.pool else None,
            "cpu_time": request.cpu_time,
            "sites": list(request.sites),
            "banned_sites": list(request.banned_sites),
            "platforms": sorted(request.platforms),
            "tags": list(request.tags),
            "number_of_processors": request.processors,
            "requirements_expr": desc.requirements_expr,
            # Canonical names and typed values: "mf=2G" and "mem_free=2048M" are one request.
            "resource_requests": dict(sorted((job.hard_requests or desc.resource_requests).items())),
            "soft_resource_requests": dict(sorted((job.soft_requests or desc.soft_resource_requests).items())),
            "parallel_environment": desc.parallel_environment,
            "project": desc.project,
            "reservation": desc.reservation,
        }
        job.task_queue = {
            "tq_key": task_queue_key(definition),
            "owner": job.owner,
            "owner_group": job.owner_group,
            "vo": job.vo,
            "submit_pool": definition["submit_pool"],
            "cpu_time": definition["cpu_time"],
            "definition": definition,
            "reservation_id": desc.reservation,
            # In the units of core/shares.py, until the TaskQueuePriorities
            # agent splits the group's share among its task queues.
            "priority": SCALE * int(env.operations.Shares.get(job.owner_group, DEFAULT_SHARE)),
        }
