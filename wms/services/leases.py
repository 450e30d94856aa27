"""The job lease life cycle: from the pilot's confirmation of a matched job
to its end, or to its return to Waiting.

The Matcher (services/matcher.py) hands a job out with a lease. Here the
pilot that holds it reports on it (Running, Done, Failed), renews its
lease with heartbeats and stores its output; and the reapers give back
what nobody confirmed (``expire_leases``) and what fell silent or whose
pilot ended (``reap_stalled``). Every call from a pilot asks the one
holder check (``holder_refusal``): is the job this pilot's, in the attempt
it quotes? (docs/architecture.md, "Leases", "Fencing".)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection

from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound, WmsError
from wms.core.identity import Identity
from wms.core.states import JobStatus
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db import pilot_reports as reports_db
from wms.db.engine import reading
from wms.services import tokens as tokens_service
from wms.services.matcher import forget_waiting_task_queues
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

SOURCE_PILOT = "Pilot"
SOURCE_LEASES = "LeaseReaper"
SOURCE_STALLED = "StalledJobs"


PILOT_TRANSITIONS = {
    JobStatus.RUNNING: (JobStatus.MATCHED,),
    JobStatus.DONE: (JobStatus.RUNNING, JobStatus.MATCHED),
    JobStatus.FAILED: (JobStatus.RUNNING, JobStatus.MATCHED),
}


@dataclass(frozen=True)
class StatusReport:
    """One job's status as the pilot that holds it reports it (see ``pilot_status``)."""

    job_id: int
    pilot_id: str
    status: str
    minor_status: str = ""
    exit_code: int | None = None
    attempt: int | None = None
    ended_ago: float | None = None
    output: tuple[str, str, bool] | None = None


def pilot_status(
    runtime: Runtime, identity: Identity, job_id: int, pilot_id: str, status: str, minor_status: str,
    exit_code: int | None, now: datetime, attempt: int | None = None, ended_ago: float | None = None,
    output: tuple[str, str, bool] | None = None,
) -> dict[str, Any]:
    """The pilot confirms (Running) or finishes (Done/Failed) a job it holds.

    ``ended_ago`` (Done/Failed): seconds since the payload ended, by the
    pilot's clock; the job's end time is ``now`` less that (at most
    ``heartbeat_timeout``: a pilot silent longer would have lost the job).
    ``output`` (Done/Failed): stdout, stderr and whether they were cut,
    stored with the status in one transaction, or not at all.

    Running is idempotent before the job's first heartbeat: the same pilot
    repeating it (in the same attempt) is told again that the job is its own,
    and the start window opens again from ``now``, so that a pilot whose
    first answer was lost starts the job at once, or learns it is gone.
    Refused with Conflict when the job is no longer this pilot's (killed,
    lease expired and given to another), or no longer in ``attempt`` (the
    hand-out the pilot quotes) because it was handed out again: the pilot
    must stop it.
    """
    report = StatusReport(job_id, pilot_id, status, minor_status, exit_code, attempt, ended_ago, output)
    [answer] = pilot_statuses(runtime, identity, [report], now)
    if isinstance(answer, WmsError):
        raise answer
    return answer


def pilot_statuses(runtime: Runtime, identity: Identity, reports: Sequence[StatusReport],
                   now: datetime) -> list[dict[str, Any] | WmsError]:
    """Several reports (a pilot's slots'), each taken or refused as
    ``pilot_status`` takes it alone, answered in order: the answer, or the
    error the single report raises. The ones taken are recorded in one
    transaction with their history, their outputs and the release of what
    the ended jobs held (wms/db/pilot_reports.py; one round trip on
    PostgreSQL): a database that fails takes none of them, and the call
    fails as any does. A job named twice refuses the call (InvalidInput).
    """
    seen: set[int] = set()
    for report in reports:
        if report.job_id in seen:
            # Taken in one transaction, a job's second report would be answered
            # otherwise than if it came after the first: one report a job a call.
            raise InvalidInput(f"job {report.job_id} is reported twice: one report a job in a call")
        seen.add(report.job_id)
    answers: list[dict[str, Any] | WmsError | None] = []
    changes: list[tuple[StatusReport, reports_db.Report]] = []
    for report in reports:
        try:
            change = _status_change(runtime, report, now)
            _check_pilot(identity, report.pilot_id)
            changes.append((report, change))
            answers.append(None)
        except WmsError as exc:
            answers.append(exc)
    # One call on PostgreSQL, its own transaction; statements one by one elsewhere.
    taken = run_in_transaction(runtime.engine, lambda conn: reports_db.take(conn, [c for _, c in changes], now),
                               single_statement=reports_db.takes_in_one_call(runtime.engine)) if changes else set()
    results = iter(changes)
    for index, answer in enumerate(answers):
        if answer is None:
            report, change = next(results)
            answers[index] = ({"JobID": report.job_id, "Status": change.status} if report.job_id in taken
                              else _refusal(runtime, report, JobStatus(change.status), now))
    return [a for a in answers if a is not None]


def _status_change(runtime: Runtime, report: StatusReport, now: datetime) -> reports_db.Report:
    """The report as the database takes it; InvalidInput for a report that makes no sense."""
    try:
        new = JobStatus(report.status)
    except ValueError:
        raise InvalidInput(f"status must be Running, Done or Failed, got {report.status!r}") from None
    if new not in PILOT_TRANSITIONS:
        raise InvalidInput(f"status must be Running, Done or Failed, got {report.status!r}")
    if report.output is not None and new is JobStatus.RUNNING:
        raise InvalidInput("output comes with the end of a job (Done or Failed), not with Running")
    minor = report.minor_status or {JobStatus.RUNNING: "Job started", JobStatus.DONE: "Execution complete"}.get(new, "")
    expect = tuple(s.value for s in PILOT_TRANSITIONS[new])
    source = f"{SOURCE_PILOT} {report.pilot_id}"
    if new is JobStatus.RUNNING:
        # No heartbeat yet: the start window runs (reap_stalled) until the first one.
        return reports_db.Report(report.job_id, report.pilot_id, report.attempt, new.value, expect, minor, source)
    ago = min(report.ended_ago or 0.0, float(runtime.config.settings.heartbeat_timeout))
    return reports_db.Report(report.job_id, report.pilot_id, report.attempt, new.value, expect, minor, source,
                             end_time=now - timedelta(seconds=ago), exit_code=report.exit_code, output=report.output)


def _refusal(runtime: Runtime, report: StatusReport, new: JobStatus, now: datetime) -> dict[str, Any] | WmsError:
    """A report that changed nothing: a repeated Running answered again, else why it is refused."""
    job_id, pilot_id, attempt = report.job_id, report.pilot_id, report.attempt
    # A repeated Running report (its first answer was lost): the pilot asks
    # whether the job is still its own, and may start it now if it is.
    if new is JobStatus.RUNNING and run_in_transaction(
            runtime.engine, lambda conn: match_db.reopen_start_window(conn, job_id, pilot_id, attempt, now)):
        return {"JobID": job_id, "Status": new.value}
    with reading(runtime.engine) as conn:
        placement = match_db.job_placement(conn, job_id)
    refusal = holder_refusal(job_id, placement, pilot_id, attempt)
    if refusal is not None:
        return refusal
    assert placement is not None
    return Conflict(f"job {job_id} is not held by pilot {pilot_id} in a state that allows {new.value} "
                    f"(it is {placement['status']})")


def holder_refusal(job_id: int, placement: dict[str, Any] | None, pilot_id: str,
                   attempt: int | None) -> WmsError | None:
    """Why ``pilot_id`` may not speak for the job (its ``placement``) in the
    attempt it quotes; None when it holds the job in that attempt.

    * NotFound when there is no such job, or when the attempt the pilot
      quotes (the current one) was given to another pilot: the job was
      never this pilot's in that attempt, and it answers as a missing job
      does, so that a pilot cannot probe ids;
    * Conflict when the attempt it quotes is over (the job was handed out
      again), or when the pilot no longer holds the job (a job that went
      back to Waiting, its lease expired, holds no pilot; so does one
      handed out again while the pilot quotes no attempt): the pilot must
      stop its copy.
    """
    if placement is None:
        return NotFound(f"no such job: {job_id}")
    holder = placement["pilot_id"]
    if attempt is not None and placement["attempt"] != attempt:
        return Conflict(f"job {job_id} was handed out again: attempt {attempt} is over, "
                        f"attempt {placement['attempt']} is {placement['status']}")
    if holder == pilot_id:
        return None
    if attempt is not None and holder is not None:
        return NotFound(f"no such job: {job_id}")
    return Conflict(f"job {job_id} is not held by pilot {pilot_id} (it is {placement['status']})")


def heartbeat(runtime: Runtime, identity: Identity, job_id: int, pilot_id: str, now: datetime,
              attempt: int | None = None) -> dict[str, Any]:
    """A running job is alive; tells the pilot to kill it when it was killed or handed out again meanwhile."""
    _check_pilot(identity, pilot_id)

    def beat(conn: Connection) -> dict[str, Any]:
        placement = match_db.job_placement(conn, job_id)
        refusal = holder_refusal(job_id, placement, pilot_id, attempt)
        if isinstance(refusal, NotFound):
            raise refusal
        assert placement is not None
        # The renewal is conditional on the row as the reaper's expiry is, so
        # the database orders the two: a heartbeat either renews the lease or
        # is told to kill, never renews a job already given back.
        if (refusal is None and placement["status"] in (JobStatus.RUNNING, JobStatus.MATCHED)
                and match_db.set_pilot_status(conn, job_id, pilot_id, [placement["status"]],
                                              {"heartbeat_time": now}, attempt)):
            return {"JobID": job_id, "Status": placement["status"], "Kill": False}
        return {"JobID": job_id, "Status": placement["status"], "Kill": True}

    return run_in_transaction(runtime.engine, beat)


def store_output(runtime: Runtime, identity: Identity, job_id: int, pilot_id: str, stdout: str, stderr: str,
                 truncated: bool, now: datetime, attempt: int | None = None) -> None:
    """The output of the job's current attempt, from the pilot that holds it."""
    _check_pilot(identity, pilot_id)

    def store(conn: Connection) -> None:
        refusal = holder_refusal(job_id, match_db.job_placement(conn, job_id), pilot_id, attempt)
        if refusal is not None:
            raise refusal
        match_db.store_output(conn, job_id, stdout, stderr, truncated, now)

    run_in_transaction(runtime.engine, store)


def _check_pilot(identity: Identity, pilot_id: str) -> None:
    """Only the pilot itself (its own token), an operator or a manager speaks for ``pilot_id``."""
    if identity.role not in ("pilot", "operator", "manager"):
        raise Forbidden("only pilots report job status")
    tokens_service.check_pilot(identity, pilot_id)


# ---------------------------------------------------------------- leases and stalled jobs
LEASE_EXPIRED = ("Lease expired: the pilot did not confirm the job",
                 "Lease expired too often: the job was rescheduled the most times allowed")
STALLED = ("Rescheduled: the pilot stopped sending heartbeats",
           "Stalled too often: the job was rescheduled the most times allowed")
NO_HEARTBEAT = "No heartbeat from the pilot"
NOT_STARTED = "No heartbeat since the pilot reported it Running"
ENDED_RUNNING = ("Rescheduled: the pilot ended while the job ran", STALLED[1])
ENDED_MATCHED = ("Rescheduled: the pilot ended before confirming the job", LEASE_EXPIRED[1])


def expire_leases(runtime: Runtime, now: datetime) -> int:
    """Matched jobs whose pilot never confirmed go back to Waiting, their debits returned.

    A job rescheduled ``max_reschedule`` times fails instead. Safe to run
    twice at once: the status change is conditional and the debits are
    returned in the same transaction as the change.
    """
    with reading(runtime.engine) as conn:
        expired = match_db.expired_leases(conn, now)

    def give_back(conn: Connection, job_id: int) -> int:
        return _reschedule(runtime, conn, job_id, JobStatus.MATCHED, match_db.jobs.c.lease_expires < now,
                           LEASE_EXPIRED, SOURCE_LEASES, now)

    return _each_in_own_transaction(runtime, expired, give_back)


def reap_stalled(runtime: Runtime, now: datetime) -> int:
    """Running jobs whose pilot fell silent or ended become Stalled, then are
    rescheduled (or fail); Matched jobs of an ended pilot go straight back.

    Silent means no heartbeat for ``heartbeat_timeout`` seconds, or none at
    all within ``match_lease`` seconds of the Running report (the start
    window: a pilot that lost the answer to its report started nothing, and
    its slot should not be held for the whole heartbeat timeout). The pilot
    honours both leases, shorter by half, so the job is handed out again
    only after its copy has been stopped (docs/architecture.md, "Leases").
    Ended means
    the pilot's batch system says it is over (Done, Failed or Aborted, as
    the SiteDirector last read it): its watchdog has killed the payloads
    with it (docs/architecture.md), so nothing of the job runs any more and
    there is nothing to wait for. The lost job is never lost: it goes back
    to Waiting with its consumables returned, at most ``max_reschedule``
    times (DESIGN.md; specs/004's lost jobs). A late report from the old
    pilot gets HTTP 409.
    """
    settings = runtime.config.settings
    cut = now - timedelta(seconds=settings.heartbeat_timeout)
    start_cut = now - timedelta(seconds=settings.match_lease)
    with reading(runtime.engine) as conn:
        silent = match_db.silent_running_jobs(conn, cut)
        unstarted = match_db.unstarted_running_jobs(conn, start_cut)
        ended = match_db.jobs_of_ended_pilots(conn)
    stalling = set(silent) | set(unstarted)
    orphans = {o.job_id: o for o in ended if o.job_id not in stalling}

    def stall(conn: Connection, job_id: int) -> int:
        return _stall(runtime, conn, job_id, match_db.jobs.c.heartbeat_time < cut, NO_HEARTBEAT, STALLED, now)

    def stall_unstarted(conn: Connection, job_id: int) -> int:
        stale = match_db.NO_HEARTBEAT_YET & (match_db.jobs.c.start_time < start_cut)
        return _stall(runtime, conn, job_id, stale, NOT_STARTED, STALLED, now)

    def give_back(conn: Connection, job_id: int) -> int:
        orphan = orphans[job_id]
        still_held = match_db.jobs.c.pilot_id == orphan.pilot_id     # not handed out again meanwhile
        if orphan.status == JobStatus.MATCHED.value:
            return _reschedule(runtime, conn, job_id, JobStatus.MATCHED, still_held, ENDED_MATCHED,
                               SOURCE_STALLED, now)
        return _stall(runtime, conn, job_id, still_held, f"The pilot ended ({orphan.pilot_state})",
                      ENDED_RUNNING, now)

    return (_each_in_own_transaction(runtime, silent, stall)
            + _each_in_own_transaction(runtime, unstarted, stall_unstarted)
            + _each_in_own_transaction(runtime, list(orphans), give_back))


def _stall(runtime: Runtime, conn: Connection, job_id: int, stale: Any, why: str, minors: tuple[str, str],
           now: datetime) -> int:
    """Running -> Stalled (``why``) while ``stale`` holds, then rescheduled; 1 if it changed."""
    if not match_db.mark_stalled(conn, job_id, stale, why, now):
        return 0
    jobs_db.add_history(conn, [{"job_id": job_id, "status": JobStatus.STALLED.value, "minor_status": why,
                                "source": SOURCE_STALLED, "time": now}])
    return _reschedule(runtime, conn, job_id, JobStatus.STALLED, match_db.jobs.c.job_id == job_id,
                       minors, SOURCE_STALLED, now)


def _each_in_own_transaction(runtime: Runtime, job_ids: list[int], work) -> int:
    """``work(conn, job_id)`` per job, one transaction each; how many jobs changed.

    One transaction per job keeps locks short and lets one job's conflict
    retry without redoing the others.
    """
    changed = 0
    for job_id in job_ids:
        changed += run_in_transaction(runtime.engine, lambda conn, job_id=job_id: work(conn, job_id))
    if changed:
        forget_waiting_task_queues(runtime)
    return changed


def _reschedule(runtime: Runtime, conn: Connection, job_id: int, from_status: JobStatus, stale: Any,
                minors: tuple[str, str], source: str, now: datetime) -> int:
    """Back to Waiting (or Failed past max_reschedule), debits returned, history recorded; 1 if it changed."""
    minor_waiting, minor_failed = minors
    new = match_db.reschedule(conn, job_id, from_status.value, stale,
                              max_reschedule=runtime.config.settings.max_reschedule,
                              minor_waiting=minor_waiting, minor_failed=minor_failed, now=now)
    if new is None:
        return 0
    match_db.release_debits(conn, [job_id])
    minor = minor_waiting if new == JobStatus.WAITING else minor_failed
    jobs_db.add_history(conn, [{"job_id": job_id, "status": new, "minor_status": minor, "source": source, "time": now}])
    return 1


def job_output(runtime: Runtime, job_id: int) -> dict[str, Any]:
    with reading(runtime.engine) as conn:
        row = match_db.get_output(conn, job_id)
    if row is None:
        raise NotFound(f"job {job_id} has no output yet")
    return {"JobID": job_id, "stdout": row["stdout"], "stderr": row["stderr"], "truncated": bool(row["truncated"])}
