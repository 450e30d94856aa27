"""wms alter (Grid Engine's qalter): change a Waiting or Held job's priority,
hard resource requests (-l), queue list (-q) and name (-N).

The change is made to the JDL its owner submitted, as `wms submit`'s
options are (requests merged request by request, the rest replaced), and
the job goes through the optimizer chain again as its owner, so that it
is filed into the task queue and SubmitPool its new description belongs
to. The job's row, JDLs, task queue and pool are written in one
transaction that first locks the job while it is still Waiting or Held:
the Matcher's claim skips a locked row and takes only a Waiting one, so an
alter racing a claim ends with the job either altered and not handed out
under its old description, or handed out and the alter refused with the
state it found.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update

from wms.core import holds as hold_rules
from wms.core.errors import InvalidInput
from wms.core.identity import Identity
from wms.core.states import JobStatus
from wms.db import holds as holds_db
from wms.db import jobs as jobs_db
from wms.db.schema import job_jdls, jobs
from wms.services import jobs as jobs_service
from wms.services import submission
from wms.services.jobs import Selection
from wms.services.matcher import forget_waiting_task_queues
from wms.services.rescheduling import refile
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

#: The states a job is altered in (qalter changes pending jobs).
ALTERABLE = frozenset({JobStatus.WAITING.value, JobStatus.HELD.value})


def describe(overrides: dict[str, Any]) -> str:
    """What an alter changes, as its history entry says it: ``priority 5, -l h_rt=1:00:00, -N name``."""
    parts = []
    if "Priority" in overrides:
        parts.append(f"priority {overrides['Priority']}")
    requests = dict(overrides.get("ResourceRequests") or {})
    queues = requests.pop("qname", None)
    if requests:
        parts.append("-l " + ",".join(f"{k}={v}" for k, v in requests.items()))
    if queues is not None:
        parts.append(f"-q {queues.replace('|', ',')}")
    if "JobName" in overrides:
        parts.append(f"-N {overrides['JobName']}")
    return ", ".join(parts)


def alter_jobs(runtime: Runtime, identity: Identity, selection: Selection, overrides: dict[str, Any],
               reason: str | None, now: datetime) -> dict[str, Any]:
    """qalter: apply ``overrides`` (JDL attributes: Priority, ResourceRequests, JobName) to the
    selected jobs and file them again; what was altered, what not and why."""
    if not overrides:
        raise InvalidInput("nothing to alter: give a priority, resource requests, queues or a job name")
    why = hold_rules.clean_reason(reason)
    rows, _, next_after = jobs_service.selected_jobs(runtime, identity, selection, "alter", ALTERABLE)
    refused: dict[str, str] = {}
    candidates = []
    for row in rows:
        if row["status"] in ALTERABLE:
            candidates.append(row)
        else:
            refused[str(row["job_id"])] = _not_alterable(row)
    filed = refile(runtime, candidates, refused, now, overrides)
    source = jobs_service.source(identity)
    note = hold_rules.clip(f"Altered by {identity.user}: {describe(overrides)}" + (f" ({why})" if why else ""))

    def work(conn) -> list[int]:
        locked = {r["job_id"]: r for r in holds_db.lock_jobs(conn, [f["row"]["job_id"] for f in filed], ALTERABLE)}
        kept = [f for f in filed if f["row"]["job_id"] in locked]
        current = {r["job_id"]: r for r in jobs_db.get_jobs(conn, [f["row"]["job_id"] for f in filed
                                                                      if f["row"]["job_id"] not in locked])}
        for f in filed:
            if f["row"]["job_id"] not in locked:
                refused[str(f["row"]["job_id"])] = _not_alterable(current.get(f["row"]["job_id"]))
        tq_ids = submission.store_pools_and_task_queues(conn, [f["job"] for f in kept], now)
        history = []
        for f in kept:
            row, job = locked[f["row"]["job_id"]], f["job"]
            waiting = row["status"] == JobStatus.WAITING.value
            conn.execute(update(jobs).where(jobs.c.job_id == row["job_id"]).values(
                task_queue_id=tq_ids[job.task_queue.key], submit_pool=job.pool.pool_id if job.pool else None,
                site=submission.site_summary(job), priority=job.description.priority, cpu_time=job.cpu_time,
                job_name=job.description.job_name or "", last_update_time=now,
                # a held job keeps saying who holds it
                minor_status=job.minor_status if waiting else row["minor_status"]))
            conn.execute(update(job_jdls).where(job_jdls.c.job_id == row["job_id"]).values(
                original_jdl=job.description.text, jdl=submission.final_jdl(job)))
            history.append({"job_id": row["job_id"], "status": row["status"], "minor_status": note,
                            "source": source, "time": now})
        jobs_db.add_history(conn, history)
        return [f["row"]["job_id"] for f in kept]

    altered = run_in_transaction(runtime.engine, work) if filed else []
    if altered:
        forget_waiting_task_queues(runtime)
    return {"altered": altered, "not_altered": refused, "next_after": next_after}


def _not_alterable(row: dict[str, Any] | None) -> str:
    if row is None:
        return "it is gone"
    where = f" on {row['queue']}" if row["queue"] else ""
    return f"it is {row['status']}{where}: only a Waiting or Held job is altered"
