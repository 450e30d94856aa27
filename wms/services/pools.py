"""SubmitPools as services: getSubmitPoolsForQueue, listing, match-queues,
and the periodic refresh that re-examines waiting jobs (specs/002)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from wms.core import pools, scheduling
from wms.core.errors import InvalidInput, NotFound
from wms.core.task_queues import TaskQueueDefinition
from wms.core.optimizers import Job
from wms.core.identity import Identity
from wms.core.paging import Page
from wms.core.resources import QueueRef
from wms.core.states import JobStatus
from wms.db.engine import reading
from wms.db import cluster_objects as cluster_db
from wms.db import jobs as jobs_db
from wms.db import pools as pools_db
from wms.db import task_queues as tq_db
from wms.services import access
from wms.services import feasibility
from wms.services import jobs as jobs_service
from wms.services import tokens as tokens_service
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, parse_sources, run_chain


def submit_pools_for_queue(runtime: Runtime, site: str, ce: str, queue: str) -> list[str]:
    """getSubmitPoolsForQueue: the pools whose eligible queues contain Site/CE/Queue."""
    for name, value in (("site", site), ("ce", ce), ("queue", queue)):
        if not value:
            raise InvalidInput(f"{name} must be given")
    with reading(runtime.engine) as conn:
        return pools_db.get_pools_for_queue(conn, site, ce, queue)


def list_pools(runtime: Runtime, identity: Identity, page: Page | None = None) -> list[dict[str, Any]]:
    """The pools the caller may see, by id: a pool is its VO's requirements, shown as its task
    queues are. With ``page``: those after its key, and one more than the page holds when there
    are more (wms/api/paging.py)."""
    with reading(runtime.engine) as conn:
        rows = pools_db.list_pools(conn, vo=access.pool_vo_seen(identity, access.policy(runtime)),
                                   after=page.after if page else None, limit=page.size + 1 if page else None)
    return [_pool_view(row) for row in rows]


def get_pool(runtime: Runtime, identity: Identity, pool_id: str) -> dict[str, Any]:
    """One pool; another VO's answers as a missing one."""
    with reading(runtime.engine) as conn:
        row = pools_db.get_pool(conn, pool_id)
    if row is None or not access.may_see_pool(identity, row["vo"], access.policy(runtime)):
        raise NotFound(f"no such SubmitPool: {pool_id}")
    return _pool_view(row)


def _pool_view(row: dict[str, Any]) -> dict[str, Any]:
    document = json.loads(row["requirements"])
    view = {
        "SubmitPool": row["pool_id"],
        "VO": row["vo"],
        "Requirements": document.get(pools.REQUIREMENTS_KEY, document.get(pools.EXPRESSION_KEY)),
        "Created": row["created"].isoformat(),
        "LastUpdate": row["last_update"].isoformat(),
    }
    if "queues" in row:
        view["Queues"] = [QueueRef(*q).name for q in row["queues"]]
    if "queue_count" in row:
        view["QueueCount"] = row["queue_count"]
    if "jobs" in row:
        view["Jobs"] = row["jobs"]
    return view


def explain_job(runtime: Runtime, job: Job, now: datetime) -> dict[str, Any]:
    """Every queue of the job's VO, eligible or with the reason it is not: the
    match framework's queue phase at ``now`` (feasibility.queue_judgement),
    the judgement the SiteDirector makes before it sends pilots."""
    judged = feasibility.queue_judgement(runtime, job, now)
    return {"eligible": sorted(name for name, reason in judged.items() if reason is None),
            "rejected": {name: reason for name, reason in judged.items() if reason is not None}}


def match_queues_for_text(runtime: Runtime, identity: Identity, source: str, text: str, now: datetime) -> dict[str, Any]:
    """The queues that could run a JDL (first job of a parametric one), stored nowhere."""
    settings = runtime.config.settings
    parsed = parse_sources([(source, text)], SubmitOptions(), settings.max_jobs_per_submission,
                           settings.limits.core())
    [job] = run_chain(runtime, runtime.chain_env(now), identity, parsed[:1])
    return explain_job(runtime, job, now)


def match_queues_for_job(runtime: Runtime, identity: Identity, job_id: int, now: datetime) -> dict[str, Any]:
    """The queues that could run a stored job, judged on today's configuration."""
    [row] = jobs_service.visible_jobs(runtime, identity, [job_id], access.MATCH_QUEUES)
    with reading(runtime.engine) as conn:
        original, _ = jobs_db.get_jdl(conn, job_id)
    owner = Identity(user=row["owner"], group=row["owner_group"], vo=row["vo"], role="user")
    return match_queues_for_text(runtime, owner, f"job {job_id}", original, now)


#: The cluster object stamping the pool map: the configuration it was
#: computed from (Config.pool_map_fingerprint) and when.
POOL_MAP = "submit_pool_map"


def pool_map_stamp(runtime: Runtime) -> dict[str, str] | None:
    """When the pool map was last refreshed and from which configuration; None before the first refresh."""
    with reading(runtime.engine) as conn:
        row = cluster_db.get_object(conn, POOL_MAP)
    return json.loads(row["text"]) if row and row["text"] else None


def refresh_submit_pools(runtime: Runtime, now: datetime) -> dict[str, int]:
    """Recompute every pool's eligible queues, then re-examine the waiting jobs.

    Specs/002: site parameters change after jobs were submitted, so the
    pool-to-queue map is recomputed at regular intervals and stamped. Jobs
    are re-examined per task queue (all jobs of one share the answer): a
    task queue that no queue can run gets "No eligible queue: ..." on its
    waiting jobs; one that can again gets back its waiting MinorStatus.
    """
    types = runtime.config.parameter_types
    with reading(runtime.engine) as conn:
        stored = pools_db.list_pools(conn)
    new_queues: dict[str, list[QueueRef]] = {}
    for row in stored:
        document = json.loads(row["requirements"])
        new_queues[row["pool_id"]] = pools.pool_queues(document, runtime.resources_for(row["vo"]), types,
                                                       strict=False)

    def store(conn) -> None:
        for pool_id, refs in new_queues.items():
            pools_db.replace_pool_queues(conn, pool_id, [(r.site, r.ce, r.queue) for r in refs], now)
        stamp = {"fingerprint": runtime.config.pool_map_fingerprint, "refreshed": now.isoformat()}
        cluster_db.put_object(conn, POOL_MAP, json.dumps(stamp), "submit_pool_refresher", now)

    run_in_transaction(runtime.engine, store)

    with reading(runtime.engine) as conn:
        task_queues = tq_db.list_task_queues(conn)
    changed = 0
    for tq in task_queues:
        resources = runtime.resources_for(tq["vo"])
        pool_id = tq["submit_pool"]
        pool_queues = new_queues.get(pool_id, []) if pool_id else None
        try:
            request = TaskQueueDefinition.from_stored(tq["definition"]).request
        except InvalidInput:
            continue        # never matched: the Matcher says why (core/match/levels.py)
        kept, dropped = scheduling.static_queues(request, pool_queues, resources)
        minor = scheduling.WAITING_FOR_PILOT if kept else scheduling.no_queue_message(dropped)

        def update(conn, tq_id=tq["tq_id"], minor=minor) -> int:
            return jobs_db.set_task_queue_minor_status(conn, tq_id, JobStatus.WAITING.value, minor, now)

        changed += run_in_transaction(runtime.engine, update)
    return {"pools": len(new_queues), "task_queues": len(task_queues), "jobs_changed": changed}


def clean_submit_pools(runtime: Runtime, now: datetime) -> dict[str, int]:
    """SubmitPoolCleaner: drop pools no pending job uses, after the grace period (specs/002).

    A pool is kept for ``submit_pool_grace`` seconds after its last job left
    it, since a job may be rescheduled soon after. The DELETE checks again
    that the pool is unused, so a job submitted meanwhile keeps it; empty
    task queues go too, and the usage rows of pilots whose token has ended
    (``tokens.clean_pilot_slots``). Safe to run twice at once.
    """
    cut = now - timedelta(seconds=runtime.config.settings.submit_pool_grace)

    def clean(conn) -> dict[str, int]:
        pools = pools_db.delete_pools(conn, pools_db.unused_pools(conn, cut), unused_before=cut)
        return {"pools_removed": pools, "task_queues_removed": tq_db.delete_empty_task_queues(conn)}

    report = run_in_transaction(runtime.engine, clean)
    # The same sweep for another leftover of matching: the usage rows of ended pilots.
    report["pilot_rows_removed"] = tokens_service.clean_pilot_slots(runtime.engine, now)
    return report
