"""TaskQueue: the last executor. Files the job into a task queue.

Jobs whose scheduling-relevant content is identical share one task queue
(core/task_queues.py): the executor builds the job's
:class:`TaskQueueDefinition`, whose key the service looks up or creates the
queue by, and the queue's first priority.
"""

from __future__ import annotations

import dataclasses

from wms.core import pools
from wms.core.optimizers.base import ChainEnv, Job, register
from wms.core.optimizers.job_scheduling import scheduling_request
from wms.core.shares import DEFAULT_SHARE, SCALE
from wms.core.task_queues import TaskQueueDefinition


@register
class TaskQueue:
    name = "TaskQueue"

    def process(self, job: Job, env: ChainEnv) -> None:
        desc = job.description
        request = scheduling_request(job, env.settings.cpu_time_segments)
        job.task_queue = TaskQueueDefinition(
            owner=job.owner,
            owner_group=job.owner_group,
            vo=job.vo,
            submit_pool=job.pool.pool_id if job.pool else None,
            request=dataclasses.replace(request, platforms=tuple(sorted(request.platforms))),
            requirements_expr=desc.requirements_expr,
            requirements_ad=job.pool.requirements.get(pools.JOB_AD_KEY) if job.pool is not None else None,
            hard_requests=job.hard_requests or desc.resource_requests,
            soft_requests=job.soft_requests or desc.soft_resource_requests,
            parallel_environment=desc.parallel_environment,
            project=desc.project,
            reservation=desc.reservation,
        )
        # In the units of core/shares.py, until the TaskQueuePriorities
        # agent splits the group's share among its task queues.
        job.task_queue_priority = SCALE * int(env.operations.Shares.get(job.owner_group, DEFAULT_SHARE))
