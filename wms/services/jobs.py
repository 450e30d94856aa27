"""Reading and changing jobs: status, lists, history, JDL, kill."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from wms.core.identity import Identity
from wms.core.limits import APPLICATION_HISTORY_MAX, CONTROL_JOBS_MAX
from wms.core.paging import Page
from wms.core.states import FINAL_STATES, KILLABLE, JobStatus
from wms.db.engine import reading
from wms.db import holds as holds_db
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db import reservations as ar_db
from wms.services import access
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

SOURCE_USER = "User"
# The history source of an application status the job set itself (with its job token).
SOURCE_JOB = "job"
# A job's minor status while its payload runs: the pilot reports Running with
# "Application"; the payload's own line follows it.
APPLICATION = "Application"


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
    if identity.role == access.JOB and part not in access.JOB_READS:
        raise Forbidden(f"a job token reads only the status and JDL of its job, not its {part}")
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
    runtime: Runtime, identity: Identity, *, status: str | None = None, owner: str | None = None,
    pilot: str | None = None, page: Page | None = None, descending: bool = False,
) -> list[dict[str, Any]]:
    """Jobs the caller may see: users as the visibility policy says (their own by default), a pilot
    those it holds, admins anyone's; ``owner`` filters among them (another user's hidden jobs: none);
    ``pilot``: only those that pilot holds or last held. By id (``descending``: newest first); with
    ``page``: those after its key, and one more than the page holds when there are more
    (wms/api/paging.py)."""
    if status is not None and status not in {s.value for s in JobStatus}:
        raise InvalidInput(f"unknown status {status!r} (one of {', '.join(s.value for s in JobStatus)})")
    held_by, seen = pilot, None
    if identity.role == access.JOB:
        raise Forbidden("a job token reads its own job only (GET /jobs/ID)")
    if identity.role == access.PILOT:
        if pilot is not None and pilot != identity.pilot_id:
            raise Forbidden("a pilot token lists only the jobs of its own pilot")
        if identity.pilot_id is None:
            return []
        held_by = identity.pilot_id
    else:
        seen = access.job_columns_seen(identity, access.policy(runtime))
    with reading(runtime.engine) as conn:
        rows = jobs_db.list_jobs(conn, owner=owner, status=status, pilot_id=held_by, any_of=seen,
                                 after=page.after if page else None, limit=page.size + 1 if page else None,
                                 descending=descending)
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


@dataclass(frozen=True)
class Selection:
    """The jobs a job control acts on: ``job_ids``, or a filter (``status``,
    ``owner``) taken a batch at a time after the id ``after``."""

    job_ids: list[int] | None = None
    status: str | None = None
    owner: str | None = None
    after: int | None = None


def selected_jobs(runtime: Runtime, identity: Identity, selection: Selection, verb: str,
                  states: Collection[str]) -> tuple[list[dict[str, Any]], bool, int | None]:
    """The rows a job control (``verb``: hold, release, ...) acts on, whether they
    were named by id, and the id the filter's next batch starts after (None: no more).

    Named jobs are refused whole: one unknown or unseen (404, as a missing
    one), one not the caller's to change (403). A filter selects among the
    jobs the caller may change, at most CONTROL_JOBS_MAX at a time: a user
    their own (``owner`` is for operators and managers), an administrator
    anyone's."""
    filtered = selection.status is not None or selection.owner is not None
    if selection.job_ids and (filtered or selection.after is not None):
        raise InvalidInput("give job ids or a filter (status, owner), not both")
    if selection.job_ids:
        if len(selection.job_ids) > CONTROL_JOBS_MAX:
            raise InvalidInput(f"at most {CONTROL_JOBS_MAX} job ids a call, not {len(selection.job_ids)}")
        rows = visible_jobs(runtime, identity, list(dict.fromkeys(selection.job_ids)))
        refused = [r["job_id"] for r in rows if not access.may_change_job(identity, r["owner"])]
        if refused:
            raise Forbidden(f"you may not {verb} job {', '.join(map(str, refused))}: it is not yours")
        return rows, True, None
    if not filtered:
        raise InvalidInput("give job ids or a filter (status, owner)")
    if selection.status is not None and selection.status not in {s.value for s in JobStatus}:
        raise InvalidInput(f"unknown status {selection.status!r} (one of {', '.join(s.value for s in JobStatus)})")
    if selection.status is not None and selection.status not in states:
        raise InvalidInput(f"status {selection.status}: only jobs that are {' or '.join(sorted(states))} "
                           f"can be given to {verb}")
    owner = selection.owner
    if identity.role not in access.ADMINS:
        if owner is not None and owner != identity.user:
            raise Forbidden(f"a {identity.role} may not {verb} the jobs of {owner}: owner is a filter for "
                            "operators and managers")
        owner = identity.user
    with reading(runtime.engine) as conn:
        rows = jobs_db.list_jobs(conn, owner=owner, status=selection.status or list(states), after=selection.after,
                                 limit=CONTROL_JOBS_MAX + 1)
    more = len(rows) > CONTROL_JOBS_MAX
    rows = rows[:CONTROL_JOBS_MAX]
    return rows, False, rows[-1]["job_id"] if more else None


def source(identity: Identity) -> str:
    """Who changed a job, as its history names them: role and name."""
    return f"{identity.role.capitalize()} {identity.user}"


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
            expect={s.value for s in KILLABLE}, values={"hold_types": None},
        )
        holds_db.drop_holds_of_jobs(conn, killed)      # a killed job is held by nobody
        # What a matched or running job held is free again at once.
        match_db.release_debits(conn, killed)
        return killed

    killed = run_in_transaction(runtime.engine, kill) if to_kill else []
    not_killed = {str(i): f"already {s}" for i, s in finished.items()}
    for i in to_kill:
        if i not in killed:
            not_killed[str(i)] = "finished meanwhile"
    # Killed in the database at once; on its node a payload stops when its
    # pilot next hears from the server (the heartbeat's answer says Kill).
    on_nodes = {JobStatus.MATCHED.value, JobStatus.RUNNING.value, JobStatus.STALLED.value}
    stopping = sorted(r["job_id"] for r in rows if r["job_id"] in killed and r["status"] in on_nodes)
    return {"killed": sorted(killed), "not_killed": not_killed, "stopping": stopping}


def set_application_status(runtime: Runtime, identity: Identity, job_id: int, text: str,
                           now: datetime) -> dict[str, Any]:
    """setApplicationStatus: a running job's progress line, as its minor status
    ``Application: <text>``, from its job token, the pilot holding it or an administrator.

    Only while the job is Running in the attempt the caller speaks for
    (Conflict otherwise, nothing changed). The history records a line
    when it changes, at most APPLICATION_HISTORY_MAX per attempt; past
    them only the minor status follows (docs/security.md, "Job tokens").
    """
    text = text.strip()
    if not text:
        raise InvalidInput("application_status must not be empty or blank")
    [row] = visible_jobs(runtime, identity, [job_id])
    if not access.may_set_application_status(identity, row):
        raise Forbidden(f"you may not set the application status of job {job_id}")
    attempt = identity.attempt if identity.role == access.JOB else row["attempt"]
    minor = f"{APPLICATION}: {text}"

    def change(conn) -> bool:
        outcome = jobs_db.set_running_minor_status(conn, job_id, attempt, minor, now)
        if outcome == "not running":
            current = jobs_db.get_jobs(conn, [job_id])
            state = current[0]["status"] if current else "gone"
            raise Conflict(f"job {job_id} is not running in attempt {attempt} (it is {state}): "
                           "its application status is set only while it runs")
        if outcome == "same":
            return False
        since = row["start_time"] or row["matched_time"] or row["submission_time"]
        if jobs_db.count_history_since(conn, job_id, f"{APPLICATION}: ", since) >= APPLICATION_HISTORY_MAX:
            return False
        jobs_db.add_history(conn, [{"job_id": job_id, "status": JobStatus.RUNNING.value, "minor_status": minor,
                                    "source": _source(identity), "time": now}])
        return True

    recorded = run_in_transaction(runtime.engine, change)
    return {"JobID": job_id, "Status": JobStatus.RUNNING.value, "MinorStatus": minor, "Recorded": recorded}


def _source(identity: Identity) -> str:
    """Who set an application status, as the history names it."""
    if identity.role == access.JOB:
        return SOURCE_JOB
    if identity.role == access.PILOT:
        return f"Pilot {identity.pilot_id}"
    return SOURCE_USER
