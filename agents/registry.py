"""The agents by name, with the function each runs (periods come from wms.yaml)."""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from wms.services.deletion import purge_deleted_jobs
from wms.services.leases import expire_leases, reap_stalled
from wms.services.pools import clean_submit_pools, refresh_submit_pools
from wms.services.reservations import manage as manage_reservations
from wms.services.runtime import Runtime
from wms.services.sandboxes import clean as clean_sandboxes
from wms.services.task_queues import recompute_priorities

Agent = Callable[[Runtime, datetime], object]

AGENTS: dict[str, Agent] = {
    # Group shares (operations.yaml) split among each group's task queues.
    "task_queue_priorities": recompute_priorities,
    # specs/002: the pool-to-queue map follows the Resources configuration.
    "submit_pool_refresher": refresh_submit_pools,
    # specs/002: pools no job needs go after a grace period.
    "submit_pool_cleaner": clean_submit_pools,
    # Matched jobs whose pilot never confirmed, and running jobs whose pilot
    # fell silent, go back to Waiting (or fail after max_reschedule times).
    "lease_reaper": lambda runtime, now: {"returned": expire_leases(runtime, now),
                                          "stalled": reap_stalled(runtime, now)},
    # specs/003: advance reservations start (w -> r), end (r -> x, their jobs
    # killed first) and go into error when a reserved queue is lost.
    "reservation_manager": manage_reservations,
    # Sandboxes of jobs finished more than sandboxes.max_age ago, and uploads
    # no submission took, go (services/sandboxes.py).
    "sandbox_cleaner": clean_sandboxes,
    # Deleted jobs (wms delete) go, with their history, JDL, output and
    # sandboxes, deleted_job_retention after their deletion.
    "job_purger": purge_deleted_jobs,
}
