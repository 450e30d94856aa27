"""Reading and changing jobs: status, lists, history, JDL, kill."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wms.core.errors import Forbidden, InvalidInput, NotFound
from wms.core.identity import Identity
from wms.core.states import FINAL_STATES, KILLABLE, JobStatus
from wms.db.engine import reading
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db import reservations as ar_db
from wms.services import access
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

SOURCE_USER = "User"


def summary(row: dict[str, Any], reservations: dict[int, int] | None = None) -> dict[str, Any]:
    """The public view of one job (INTERFACE.md "Machine-readable output").

    ``AR`` is the advance reservation the job asked for (qsub -ar; specs/003
    5.1.3.6: qstat -j shows it), None without; ``reservations`` maps task
    queue ids to it."""
    return {
        "JobID": row["job_id"],
        "JobName": row["job_name"],
        "Status": row["status"],
        "MinorStatus": row["minor_status"],
        "Owner": row["owner"],
        "OwnerGroup": row["owner_group"],
        "VO": row["vo"],
        "Site": row["site"],
        "Queue": row["queue"],
        "SubmitPool": row["submit_pool"] or "",
        "TaskQueue": row["task_queue_id"],
        "AR": (reservations or {}).get(row["task_queue_id"]),
        "Priority": row["priority"],
        "CPUTime": row["cpu_time"],
        "SubmissionTime": row["submission_time"].isoformat(),
        "LastUpdateTime": row["last_update_time"].isoformat(),
    }


def visible_jobs(runtime: Runtime, identity: Identity, job_ids: list[int],
                 part: str = access.STATUS) -> list[dict[str, Any]]:
    """The rows of ``job_ids``; refuses the whole request if one is unknown or not the caller's to see.

    A job the caller may not see answers exactly as a missing one, so that
    ids cannot be probed; ``part`` is what the caller asks of the jobs
    (access.STATUS, JDL, ...), of which a pilot reads only access.PILOT_READS."""
    if not job_ids:
        raise InvalidInput("no job id given")
    with reading(runtime.engine) as conn:
        rows = {row["job_id"]: row for row in jobs_db.get_jobs(conn, job_ids)}
    policy = access.policy(runtime)
    unseen = [i for i in job_ids if i not in rows or not access.may_see_job(identity, rows[i], policy)]
    if unseen:
        raise NotFound(f"no such job: {', '.join(map(str, unseen))}")
    if identity.role == access.PILOT and part not in access.PILOT_READS:
        raise Forbidden(f"a pilot reads only the status and JDL of the jobs it holds, not their {part}")
    return [rows[i] for i in job_ids]


def with_reservations(runtime: Runtime, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The public views of ``rows``, each with the advance reservation of its task queue."""
    tq_ids = [r["task_queue_id"] for r in rows if r["task_queue_id"] is not None]
    with reading(runtime.engine) as conn:
        reservations = ar_db.reservations_of_task_queues(conn, tq_ids) if tq_ids else {}
    return [summary(row, reservations) for row in rows]


def job_status(runtime: Runtime, identity: Identity, job_ids: list[int]) -> list[dict[str, Any]]:
    return with_reservations(runtime, visible_jobs(runtime, identity, job_ids))


def list_jobs(
    runtime: Runtime, identity: Identity, *, status: str | None = None, owner: str | None = None, limit: int | None = None,
    pilot: str | None = None,
) -> list[dict[str, Any]]:
    """Jobs the caller may see: users as the visibility policy says (their own by default), a pilot
    those it holds, admins anyone's; ``owner`` filters among them (another user's hidden jobs: none);
    ``pilot``: only those that pilot holds or last held."""
    if status is not None and status not in {s.value for s in JobStatus}:
        raise InvalidInput(f"unknown status {status!r} (one of {', '.join(s.value for s in JobStatus)})")
    held_by, seen = pilot, None
    if identity.role == access.PILOT:
        if pilot is not None and pilot != identity.pilot_id:
            raise Forbidden("a pilot token lists only the jobs of its own pilot")
        if identity.pilot_id is None:
            return []
        held_by = identity.pilot_id
    else:
        seen = access.job_columns_seen(identity, access.policy(runtime))
    with reading(runtime.engine) as conn:
        rows = jobs_db.list_jobs(conn, owner=owner, status=status, limit=limit, pilot_id=held_by, any_of=seen)
    return with_reservations(runtime, rows)


def history(runtime: Runtime, identity: Identity, job_id: int) -> list[dict[str, Any]]:
    visible_jobs(runtime, identity, [job_id], access.HISTORY)
    with reading(runtime.engine) as conn:
        entries = jobs_db.get_history(conn, job_id)
    return [
        {
            "Status": e["status"],
            "MinorStatus": e["minor_status"],
            "Source": e["source"],
            "Time": e["time"].isoformat(),
        }
        for e in entries
    ]


def job_jdl(runtime: Runtime, identity: Identity, job_id: int) -> dict[str, str]:
    visible_jobs(runtime, identity, [job_id], access.JDL)
    with reading(runtime.engine) as conn:
        original, processed = jobs_db.get_jdl(conn, job_id)
    return {"JobID": job_id, "OriginalJDL": original, "JDL": processed}


def kill_jobs(runtime: Runtime, identity: Identity, job_ids: list[int], now: datetime) -> dict[str, Any]:
    """Kill jobs; refused whole if one is unknown or not the caller's.

    Jobs already finished are reported, not changed. The status change is
    conditional on the state read, so a job that finishes meanwhile is not
    turned into Killed.
    """
    rows = visible_jobs(runtime, identity, job_ids)
    refused = [r["job_id"] for r in rows if not access.may_change_job(identity, r["owner"])]
    if refused:
        raise Forbidden(f"you may not kill job {', '.join(map(str, refused))}")
    finished = {r["job_id"]: r["status"] for r in rows if r["status"] in FINAL_STATES}
    to_kill = [r["job_id"] for r in rows if r["job_id"] not in finished]

    def kill(conn) -> list[int]:
        killed = jobs_db.set_status(
            conn, to_kill, JobStatus.KILLED.value, f"Killed by {identity.user}", SOURCE_USER, now,
            expect={s.value for s in KILLABLE},
        )
        # What a matched or running job held is free again at once.
        match_db.release_debits(conn, killed)
        return killed

    killed = run_in_transaction(runtime.engine, kill) if to_kill else []
    not_killed = {str(i): f"already {s}" for i, s in finished.items()}
    for i in to_kill:
        if i not in killed:
            not_killed[str(i)] = "finished meanwhile"
    return {"killed": sorted(killed), "not_killed": not_killed}
