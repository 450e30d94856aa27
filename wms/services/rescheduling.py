"""wms reschedule: an ended job (Done, Failed, Killed, Stalled) runs again as a new attempt.

As DIRAC's rescheduleJob does, the job goes through the optimizer chain
again from the JDL its owner submitted (with the options of its
submission), so that it is filed into the task queue and SubmitPool of
today's configuration: those of its first run may be gone (a task queue
and a pool no unfinished job needs are cleaned away). Each reschedule
counts against ``max_reschedule`` (wms.yaml), the count the Matcher's lost
jobs use too; an operator's ``reset`` starts it again. Caps are checked
for each owner as at a submission (the jobs are not final again).

The job's change is one conditional update, on the state and the
reschedule count read: two reschedules of one job at once make one new
attempt, a pilot's late report of the old attempt is refused as any stale
attempt's is (its attempt number is over), and the debits of a Stalled job
are returned in the same transaction.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from typing import Any

from sqlalchemy import update

from wms.core import holds as hold_rules
from wms.core import jdl, retries
from wms.core.errors import Forbidden, WmsError
from wms.core.identity import Identity
from wms.core.limits import STORED
from wms.core.states import JobStatus
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db.engine import reading
from wms.db.schema import jobs
from wms.services import access
from wms.services import jobs as jobs_service
from wms.services import submission
from wms.services.jobs import Selection
from wms.services.matcher import forget_waiting_task_queues
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

log = logging.getLogger(__name__)

#: The history's source of a retry the JDL asked for (MaxRetries).
SOURCE_RETRY = "Retry"

#: The states a job is rescheduled from.
RESCHEDULABLE = frozenset({JobStatus.DONE.value, JobStatus.FAILED.value, JobStatus.KILLED.value,
                           JobStatus.STALLED.value})
#: The states Grid Engine's qmod -rj (``running``) reschedules from too: its pilot is told to
#: stop the payload at its next heartbeat, as for a kill, and its late reports are refused.
STARTED = frozenset({JobStatus.MATCHED.value, JobStatus.RUNNING.value})


def reschedule_jobs(runtime: Runtime, identity: Identity, selection: Selection, reset: bool, reason: str | None,
                    now: datetime, running: bool = False) -> dict[str, Any]:
    """Reschedule the selected jobs; what was rescheduled, what not and why. With ``running``
    (qmod -rj) a Matched or Running job is rescheduled too: it waits again at once and its
    pilot stops the payload at its next heartbeat."""
    states = RESCHEDULABLE | STARTED if running else RESCHEDULABLE
    if reset and identity.role not in access.ADMINS:
        raise Forbidden(f"a {identity.role} may not reset the reschedule count (--reset): only operators and "
                        "managers may")
    why = hold_rules.clean_reason(reason)
    rows, _, next_after = jobs_service.selected_jobs(runtime, identity, selection, "reschedule", states)
    most = runtime.config.settings.max_reschedule
    refused: dict[str, str] = {}
    candidates = []
    for row in rows:
        if row["status"] not in states:
            refused[str(row["job_id"])] = (f"it is {row['status']}: only a Done, Failed, Killed or Stalled job is "
                                           "rescheduled" + (" (a Matched or Running one with qmod -rj, wms "
                                                            "reschedule --running)"
                                                            if row["status"] in STARTED else ""))
        elif not reset and row["reschedule_count"] >= most:
            refused[str(row["job_id"])] = (f"rescheduled {row['reschedule_count']} times already, as many as "
                                           f"max_reschedule allows ({most}); an operator may start the count again "
                                           "(--reset)")
        else:
            candidates.append(row)

    filed = refile(runtime, candidates, refused, now)
    minor = f"Rescheduled by {identity.user}" + (f": {why}" if why else "")
    rescheduled = wait_again(runtime, filed, refused, jobs_service.source(identity), minor, reset, now)
    return {"rescheduled": rescheduled, "not_rescheduled": refused, "next_after": next_after}


def retry_failed(runtime: Runtime, job_id: int, now: datetime) -> str | None:
    """A job its pilot has just reported Failed waits again when its JDL asks for a retry
    on that exit code (wms/core/retries.py); the reason recorded, or None when it does not.

    It takes the reschedule's way (refile, wait_again), as the system: the
    change is conditional on the Failed state and the count read, so that a
    reschedule or a deletion meanwhile wins and the job is retried once."""
    with reading(runtime.engine) as conn:
        rows = jobs_db.get_jobs(conn, [job_id])
        if not rows or rows[0]["status"] != JobStatus.FAILED.value:
            return None
        row = rows[0]
        stored = jobs_db.get_jdl(conn, job_id)[1]
    description = jdl.parse_one(stored, f"job {job_id}", limits=STORED)
    reason = retries.retry_reason(description, row["exit_code"], row["reschedule_count"],
                                  runtime.config.settings.max_reschedule)
    if reason is None:
        return None
    refused: dict[str, str] = {}
    filed = refile(runtime, [row], refused, now)
    if not wait_again(runtime, filed, refused, SOURCE_RETRY, reason, False, now):
        log.info("job %s not retried: %s", job_id, refused.get(str(job_id), "it changed meanwhile"))
        return None
    return reason


def wait_again(runtime: Runtime, filed: list[dict], refused: dict[str, str], source: str, minor: str,
               reset: bool, now: datetime) -> list[int]:
    """The refiled jobs back to Waiting in one transaction, each conditional on the state and
    reschedule count read (a job changed meanwhile is left, with the reason in ``refused``),
    counted (or the count started again: ``reset``), its debits returned, ``minor`` recorded
    in its history by ``source``; the ids that changed."""
    if not filed:
        return []

    def work(conn) -> list[int]:
        owners = Counter((j["row"]["owner"], j["row"]["vo"]) for j in filed)
        for (owner, vo), n in sorted(owners.items()):
            submission.check_caps(conn, runtime.config.settings.caps.core(), owner, Counter({vo: n}))
        tq_ids = submission.store_pools_and_task_queues(conn, [j["job"] for j in filed], now)
        done = []
        for item in filed:
            row, job = item["row"], item["job"]
            changed = conn.execute(
                update(jobs)
                .where(jobs.c.job_id == row["job_id"], jobs.c.status == row["status"],
                       jobs.c.reschedule_count == row["reschedule_count"])
                .values(status=JobStatus.WAITING.value, minor_status=hold_rules.clip(minor), last_update_time=now,
                        task_queue_id=tq_ids[job.task_queue.key],
                        submit_pool=job.pool.pool_id if job.pool else None, site=submission.site_summary(job),
                        reschedule_count=0 if reset else jobs.c.reschedule_count + 1, exit_code=None,
                        end_time=None, hold_types=None, **match_db.CLEARED_PLACEMENT)
            ).rowcount
            if changed:
                done.append(row["job_id"])
            else:
                refused[str(row["job_id"])] = "it changed meanwhile (rescheduled or reported by another)"
        jobs_db.update_jdls(conn, {item["row"]["job_id"]: submission.final_jdl(item["job"])
                                   for item in filed if item["row"]["job_id"] in done})
        match_db.release_debits(conn, done)      # a Stalled job's; the others gave theirs back when they ended
        jobs_db.add_history(conn, [{"job_id": job_id, "status": JobStatus.WAITING.value,
                                    "minor_status": hold_rules.clip(minor), "source": source, "time": now}
                                   for job_id in done])
        return done

    done = run_in_transaction(runtime.engine, work)
    if done:
        forget_waiting_task_queues(runtime)
    return done


def refile(runtime: Runtime, rows: list[dict[str, Any]], refused: dict[str, str], now: datetime,
           overrides: dict[str, Any] | None = None) -> list[dict]:
    """Each job through the optimizer chain again, from the JDL its owner submitted (with
    ``overrides``, as `wms submit`'s options), as its owner: ``{"row", "job"}`` each. A job
    the chain (or its reservation) now refuses is left out, with the reason in ``refused``."""
    if not rows:
        return []
    with reading(runtime.engine) as conn:
        originals = {row["job_id"]: jobs_db.get_jdl(conn, row["job_id"])[0] for row in rows}
    env = runtime.chain_env(now)
    filed = []
    for row in rows:
        owner = Identity(user=row["owner"], group=row["owner_group"], vo=row["vo"], role=access.USER)
        try:
            [description] = jdl.parse_jdl(originals[row["job_id"]], f"job {row['job_id']}", overrides=overrides,
                                          limits=STORED)
            [job] = submission.run_chain(runtime, env, owner, [(f"job {row['job_id']}", description)])
            submission.check_reservations(runtime, env, owner, [job], now)
        except WmsError as exc:
            refused[str(row["job_id"])] = f"the optimizers refuse it now: {exc}"
            continue
        if job.task_queue is None:
            refused[str(row["job_id"])] = "the optimizers filed it into no task queue"
            continue
        filed.append({"row": row, "job": job})
    return filed
