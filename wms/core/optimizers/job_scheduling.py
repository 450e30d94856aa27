"""JobScheduling: narrows the job's queues by Site, BannedSite, Platform,
CPUTime, Tags and NumberOfProcessors (rules in ``wms.core.scheduling``),
and writes the eligible sites into the job's Site (RFC #7: "the list of
eligible sites can be added to the Site job description parameter").

Only static rules apply here; what depends on a pilot (free slots, load,
consumables) is the Matcher's business. A job no queue can run is still
accepted: it waits with a MinorStatus that says why, and the pool refresh
re-examines it when the configuration changes.
"""

from __future__ import annotations

from typing import Sequence

from wms.core import scheduling
from wms.core.requirements import eligible_sites
from wms.core.optimizers.base import ChainEnv, Job, register


def scheduling_request(job: Job, cpu_time_segments: Sequence[int]) -> scheduling.SchedulingRequest:
    desc = job.description
    return scheduling.SchedulingRequest(
        sites=tuple(job.sites),
        banned_sites=tuple(job.banned_sites),
        platforms=tuple(desc.platforms),
        cpu_time=scheduling.cpu_time_segment(job.cpu_time, cpu_time_segments),
        tags=tuple(sorted(desc.tags)),
        processors=desc.number_of_processors,
    )


@register
class JobScheduling:
    name = "JobScheduling"

    def process(self, job: Job, env: ChainEnv) -> None:
        resources = env.resources_for(job.vo)
        pool_queues = job.pool.queues if job.pool is not None else None
        request = scheduling_request(job, env.settings.cpu_time_segments)
        # Jobs of a batch mostly share their scheduling content: decide once.
        key = (job.vo, job.pool.pool_id if job.pool is not None else None, request)
        decided = env.static_queues.get(key)
        if decided is None:
            decided = env.static_queues[key] = scheduling.static_queues(request, pool_queues, resources)
        kept, dropped = decided
        for reason, count in dropped.items():
            job.drop(reason, count)
        job.queues = list(kept)
        if kept:
            job.updates["Site"] = eligible_sites(kept)
        else:
            job.minor_status = scheduling.no_queue_message(job.rejections)
