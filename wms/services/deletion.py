"""wms delete: jobs leave every list, and are purged after a retention period.

DIRAC's dirac-wms-job-delete (state Deleted) and Grid Engine's qdel of a
job: a job that has not ended is killed first (the pilot's next heartbeat
tells it to stop; its debits are returned in the same transaction), then
every job named becomes Deleted. A deleted job is out of every list (`wms
jobs`, the console's) but answers by id, so that its owner can still read
what happened to it until it is purged: the job_purger agent removes it,
its JDL, history, holds, output and sandbox files (their content goes with
the sandbox cleaner once no job names it) ``deleted_job_retention`` after
its deletion. Every change is conditional on the state read, so a delete
and a pilot's report, or two purgers, never both win.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select

from wms.core import holds as hold_rules
from wms.core.identity import Identity
from wms.core.states import KILLABLE, JobStatus
from wms.db import holds as holds_db
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db.engine import reading
from wms.db.jobs import chunked
from wms.db.schema import job_holds, job_jdls, jobs, status_history
from wms.services import jobs as jobs_service
from wms.services.jobs import Selection
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

#: The states a job is deleted from: every one but Deleted.
DELETABLE = frozenset(s.value for s in JobStatus if s != JobStatus.DELETED)
#: Jobs one purger run removes in one transaction.
PURGE_BATCH = 1_000


def delete_jobs(runtime: Runtime, identity: Identity, selection: Selection, reason: str | None,
                now: datetime) -> dict[str, Any]:
    """Delete the selected jobs (killing first those that have not ended); what was deleted, what not and why."""
    why = hold_rules.clean_reason(reason)
    rows, _, next_after = jobs_service.selected_jobs(runtime, identity, selection, "delete", DELETABLE)
    ids = [r["job_id"] for r in rows]
    source = jobs_service.source(identity)
    minor = hold_rules.clip(f"Deleted by {identity.user}" + (f": {why}" if why else ""))

    def work(conn) -> list[int]:
        killed = jobs_db.set_status(conn, ids, JobStatus.KILLED.value, f"Killed by {identity.user} (deleted)",
                                    source, now, expect={s.value for s in KILLABLE})
        match_db.release_debits(conn, killed)      # what a matched or running job held is free at once
        deleted = jobs_db.set_status(conn, ids, JobStatus.DELETED.value, minor, source, now, expect=DELETABLE,
                                     values={"hold_types": None})
        holds_db.drop_holds_of_jobs(conn, deleted)
        return deleted

    deleted = run_in_transaction(runtime.engine, work) if ids else []
    refused = {str(i): "it was deleted already" for i in ids if i not in deleted}
    return {"deleted": deleted, "not_deleted": refused, "next_after": next_after}


def purge_deleted_jobs(runtime: Runtime, now: datetime) -> dict[str, int]:
    """job_purger agent: the jobs deleted more than deleted_job_retention ago go, with
    everything of theirs; a batch a transaction, each deleted row still Deleted."""
    cut = now - timedelta(seconds=runtime.config.settings.deleted_job_retention)
    purged = 0
    while True:
        with reading(runtime.engine) as conn:
            due = list(conn.execute(
                select(jobs.c.job_id).where(jobs.c.status == JobStatus.DELETED.value, jobs.c.last_update_time < cut)
                .order_by(jobs.c.job_id).limit(PURGE_BATCH)).scalars())
        if not due:
            return {"purged": purged}

        def purge(conn, due=due) -> int:
            count = 0
            for chunk in chunked(due):
                gone = jobs.c.job_id.in_(chunk) & (jobs.c.status == JobStatus.DELETED.value)
                still = list(conn.execute(select(jobs.c.job_id).where(gone).with_for_update()).scalars())
                if not still:
                    continue
                # The history and holds carry no foreign key; the JDL, output, debits and sandbox files cascade.
                for table in (status_history, job_holds, job_jdls):
                    conn.execute(delete(table).where(table.c.job_id.in_(still)))
                count += conn.execute(delete(jobs).where(jobs.c.job_id.in_(still))).rowcount
            return count

        purged += run_in_transaction(runtime.engine, purge)
        if len(due) < PURGE_BATCH:
            return {"purged": purged}
