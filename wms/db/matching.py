"""Queries of the Matcher: candidate task queues, the claim, consumable
debits and their return.

The claim is built to be safe with many Matchers on one database:

* the job row is picked with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL and
  MariaDB (inside their claim function / procedure), so concurrent
  claimers take different jobs instead of waiting on each other; SQLite
  serialises writers (BEGIN IMMEDIATE);
* the status change is conditional (``WHERE status = 'Waiting'``);
* each debit is a conditional update, ``used + amount <= capacity``, so a
  consumable can never be overbooked whatever the interleaving: a debit
  that does not fit changes no row and the caller rolls back.

* the claim names the version of the resource quota sets it applied and
  is refused (``QuotaSetsChanged``) when another is stored: a change of
  the sets recounts what running jobs hold, and the usage guard
  (``guard_usage``, ``lock_usage_for_recount``) keeps claims and releases
  out while it does.

On PostgreSQL and MariaDB the same statements run inside one stored
function / procedure (``claim_in_one_call``; their current text is in
wms/db/sql/, installed by migrations as frozen copies); ``claim_job`` and
``debit_all`` are the statement-by-statement form SQLite uses. ``claim``
is the one entry point; tests/db/test_claim_routines.py runs the same
cases through it on the three databases. The function and the procedure
also take several jobs of a task queue in one call (``claim_several``, a batch's
jobs drawn to the same task queue): each as ``claim`` would take it, a
later one only while every debit still fits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY, Connection, Double, String, Text, bindparam, cast, delete, exists, insert, select, text, update,
)
from sqlalchemy.exc import DBAPIError

from wms.core.states import JobStatus
from wms.db.engine import insert_ignoring_duplicates, routine_committed
from wms.db.jobs import add_history, chunked
from wms.db.pilots import FINAL_STATES as PILOT_FINAL_STATES
from wms.db.schema import (
    cluster_objects, job_debits, job_jdls, job_outputs, jobs, pilots, resource_usage, task_queues,
)

WAITING = JobStatus.WAITING.value


_HAS_WAITING = exists().where(jobs.c.task_queue_id == task_queues.c.tq_id, jobs.c.status == WAITING)
_WAITING_TASK_QUEUES = select(task_queues.c.tq_id, task_queues.c.priority, task_queues.c.submit_pool).where(_HAS_WAITING)


def waiting_task_queues(conn: Connection) -> list[tuple[int, int, str | None]]:
    """(tq_id, priority, submit_pool) of every task queue with waiting jobs (one index probe each)."""
    return [(row[0], row[1], row[2]) for row in conn.execute(_WAITING_TASK_QUEUES).all()]


def get_task_queues(conn: Connection, tq_ids: Iterable[int]) -> list[dict[str, Any]]:
    ids = list(tq_ids)
    if not ids:
        return []
    return [dict(r) for r in conn.execute(select(task_queues).where(task_queues.c.tq_id.in_(ids))).mappings().all()]


def used(conn: Connection, scope: str, resource: str) -> float:
    stmt = select(resource_usage.c.used).where(resource_usage.c.scope == scope, resource_usage.c.resource == resource)
    return float(conn.execute(stmt).scalar() or 0.0)


def holders(conn: Connection, scope: str, resource: str, limit: int = 5) -> list[int]:
    """The first ``limit`` jobs (by id) holding a positive amount of ``resource`` at ``scope``."""
    stmt = (select(job_debits.c.job_id)
            .where(job_debits.c.scope == scope, job_debits.c.resource == resource, job_debits.c.amount > 0)
            .order_by(job_debits.c.job_id).limit(limit))
    return list(conn.execute(stmt).scalars().all())


def all_usage(conn: Connection) -> dict[tuple[str, str], float]:
    stmt = select(resource_usage.c.scope, resource_usage.c.resource, resource_usage.c.used)
    return {(s, r): float(u) for s, r, u in conn.execute(stmt).all()}


def ensure_usage_rows(conn: Connection, keys: Iterable[tuple[str, str]]) -> None:
    """Create missing usage rows at zero (the debit updates an existing row)."""
    rows = [{"scope": s, "resource": r, "used": 0.0} for s, r in sorted(set(keys))]
    insert_ignoring_duplicates(conn, resource_usage, rows, ["scope", "resource"])


def idle_rows(conn: Connection, scope_prefix: str, resource: str) -> list[str]:
    """The scopes starting with ``scope_prefix`` whose ``resource`` row holds nothing now."""
    stmt = select(resource_usage.c.scope).where(
        resource_usage.c.scope.startswith(scope_prefix, autoescape=True), resource_usage.c.resource == resource,
        resource_usage.c.used <= 0)
    return list(conn.execute(stmt).scalars().all())


def delete_idle_rows(conn: Connection, scopes: Sequence[str], resource: str) -> int:
    """Delete those usage rows that still hold nothing (a claim debiting one
    meanwhile keeps it: the condition is checked again on the locked row)."""
    deleted = 0
    ids = sorted(set(scopes))
    for start in range(0, len(ids), 500):
        deleted += conn.execute(delete(resource_usage).where(
            resource_usage.c.scope.in_(ids[start:start + 500]), resource_usage.c.resource == resource,
            resource_usage.c.used <= 0)).rowcount
    return deleted


@dataclass(frozen=True)
class Placement:
    """Where a claimed job goes, to whom, and until when the claim holds without confirmation."""

    pilot_id: str
    site: str
    queue: str
    host: str
    slots: int
    lease_expires: datetime
    minor_status: str
    now: datetime

    def params(self) -> dict[str, Any]:
        return {"pilot": self.pilot_id, "site": self.site, "queue": self.queue, "host": self.host,
                "slots": self.slots, "lease": self.lease_expires, "minor": self.minor_status, "now": self.now}


# The statement form of the claim (SQLite), built once: building SQLAlchemy
# expressions per call costs more than executing them on SQLite. Writers
# are serialised there (BEGIN IMMEDIATE), so no row locks are needed.
_BEST_WAITING_ID = (
    select(jobs.c.job_id)
    .where(jobs.c.task_queue_id == bindparam("tq_id"), jobs.c.status == WAITING)
    .order_by(jobs.c.priority.desc(), jobs.c.job_id)
    .limit(1)
)
# SQLite's RETURNING may not name the FROM tables: the JDL is read after.
_CLAIM_RETURNING = (
    update(jobs)
    .where(jobs.c.job_id == _BEST_WAITING_ID.scalar_subquery(), jobs.c.status == WAITING)
    .values(
        status=JobStatus.MATCHED.value,
        minor_status=bindparam("minor", type_=String) + " (attempt " + cast(jobs.c.attempt + 1, String) + ")",
        attempt=jobs.c.attempt + 1,
        pilot_id=bindparam("pilot"),
        site=bindparam("site"),
        queue=bindparam("queue"),
        host=bindparam("host"),
        slots=bindparam("slots"),
        lease_expires=bindparam("lease", type_=jobs.c.lease_expires.type),
        matched_time=bindparam("now", type_=jobs.c.matched_time.type),
        last_update_time=bindparam("now", type_=jobs.c.last_update_time.type),
    )
    .returning(jobs.c.job_id, jobs.c.cpu_time, jobs.c.attempt, jobs.c.minor_status)
)
_JDL = select(job_jdls.c.jdl).where(job_jdls.c.job_id == bindparam("j_job_id"))


def claim_job(conn: Connection, tq_id: int, placement: Placement) -> dict[str, Any] | None:
    """Waiting -> Matched for the best waiting job of a task queue (highest
    priority, then oldest), one attempt more; the job (id, cpu_time, attempt,
    minor_status, jdl) or None. The
    statement form, which SQLite uses; PostgreSQL and MariaDB run the same
    inside ``claim_in_one_call``."""
    row = conn.execute(_CLAIM_RETURNING, {"tq_id": tq_id, **placement.params()}).mappings().first()
    if row is None:
        return None
    return {**row, "jdl": conn.execute(_JDL, {"j_job_id": row["job_id"]}).scalar_one()}


# The usage guard. A change of the resource quota sets recounts what every
# Matched and Running job holds; claims and releases must not interleave
# with it. PostgreSQL: they take resource_usage in ROW EXCLUSIVE mode, the
# recount in EXCLUSIVE mode (migration 0009). MariaDB: they take a shared
# lock on the "rqs" row of cluster_objects, the recount an exclusive one.
# SQLite serialises writers anyway.
RULES_KIND = "rqs"
_RULES_ROW = select(cluster_objects.c.version).where(cluster_objects.c.kind == RULES_KIND)


def guard_usage(conn: Connection) -> None:
    """Wait for a recount in progress, then keep the next one out until this transaction ends."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE resource_usage IN ROW EXCLUSIVE MODE"))
    elif conn.dialect.name in ("mysql", "mariadb"):
        conn.execute(_RULES_ROW.with_for_update(read=True))


def lock_usage_for_recount(conn: Connection) -> None:
    """Wait for every claim and release in progress, and keep new ones out until this transaction ends."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE resource_usage IN EXCLUSIVE MODE"))
    elif conn.dialect.name in ("mysql", "mariadb"):
        conn.execute(_RULES_ROW.with_for_update())


class QuotaSetsChanged(Exception):
    """The claim applied resource quota sets that are no longer the stored ones."""


def check_rules_version(conn: Connection, version: int) -> None:
    """The statement form's check (SQLite): the claim's sets are still the stored ones."""
    if int(conn.execute(_RULES_ROW).scalar() or 0) != version:
        raise QuotaSetsChanged()


class DebitDoesNotFit(Exception):
    """A debit of the one-call claim found its consumable full; ``index`` is its place in the list."""

    def __init__(self, index: int) -> None:
        super().__init__(f"debit {index} does not fit")
        self.index = index


DEBIT_FULL_SQLSTATE = "WMS01"
SETS_CHANGED_SQLSTATE = "WMS02"
_CLAIM_FUNCTION = text(
    "SELECT job_id, cpu_time, jdl, attempt FROM wms_claim_jobs(:tq_id, :count, :pilot, :site, :queue, :host, :slots, "
    ":lease, :minor, :now, :source, :scopes, :resources, :amounts, :capacities, :rules_version)"
).bindparams(
    bindparam("lease", type_=jobs.c.lease_expires.type), bindparam("now", type_=jobs.c.matched_time.type),
    bindparam("scopes", type_=ARRAY(Text)), bindparam("resources", type_=ARRAY(Text)),
    bindparam("amounts", type_=ARRAY(Double)), bindparam("capacities", type_=ARRAY(Double)),
)


_CLAIM_PROCEDURE = text(
    "CALL wms_claim_jobs(:tq_id, :count, :pilot, :site, :queue, :host, :slots, :lease, :minor, :now, :source, "
    ":debits, :rules_version)"
).bindparams(bindparam("lease", type_=jobs.c.lease_expires.type), bindparam("now", type_=jobs.c.matched_time.type))
# MariaDB's procedure signals this, with "WMS01 <index>" or "WMS02" as its message.
_MARIADB_SIGNAL = 1644


def claim(
    conn: Connection, tq_id: int, placement: Placement, *, source: str,
    debits: Sequence[tuple[str, str, float, float]], rules_version: int,
) -> dict[str, Any] | None:
    """The claim, in the form of the database: one call on PostgreSQL and
    MariaDB (``claim_in_one_call``), the same statements one by one on
    SQLite, whose writers are serialised. Same arguments, answers and
    refusals everywhere: the job (job_id, cpu_time, attempt, jdl) or None;
    QuotaSetsChanged; DebitDoesNotFit with the 0-based index of the first
    debit that did not fit (the caller's transaction then rolls back)."""
    if claims_in_one_call(conn):
        jobs = claim_in_one_call(conn, tq_id, placement, source=source, debits=debits, rules_version=rules_version)
        return jobs[0] if jobs else None
    check_rules_version(conn, rules_version)
    job = claim_job(conn, tq_id, placement)
    if job is None:
        return None
    missed = debit_all(conn, debits)
    if missed is not None:
        raise DebitDoesNotFit(missed)
    record_debits(conn, job["job_id"], [(s, r, a) for s, r, a, _ in debits])
    add_history(conn, [{"job_id": job["job_id"], "status": JobStatus.MATCHED.value,
                        "minor_status": job["minor_status"], "source": source, "time": placement.now}])
    return job


def claim_several(
    conn: Connection, tq_id: int, placement: Placement, count: int, *, source: str,
    debits: Sequence[tuple[str, str, float, float]], rules_version: int,
) -> list[dict[str, Any]]:
    """Up to ``count`` jobs of a task queue in one call (PostgreSQL and
    MariaDB: ``claims_in_one_call``), each taken as ``claim`` takes one, in
    the order ``claim`` would take them; the first refused as ``claim``
    refuses, a later one that does not fit ending the list instead."""
    return claim_in_one_call(conn, tq_id, placement, source=source, debits=debits, rules_version=rules_version,
                             count=count)


def claims_in_one_call(conn_or_engine: Any) -> bool:
    """True where the claim is one call: PostgreSQL and MariaDB (migration
    0009), for one job or several (``claim_several``, migration 0018).
    SQLite's statements claim one job at a time."""
    return conn_or_engine.dialect.name in ("postgresql", "mysql", "mariadb")


def claims_on_autocommit(conn_or_engine: Any) -> bool:
    """True where the claim runs on an autocommit connection: PostgreSQL, whose
    function is one statement and so its own transaction. MariaDB's procedure
    runs several in the caller's transaction and commits it at the end
    (migration 0012); the caller's COMMIT then costs nothing
    (``routine_committed``), and a refusal part-way leaves the caller's
    ROLLBACK to undo what it did."""
    return conn_or_engine.dialect.name == "postgresql"


def claim_in_one_call(
    conn: Connection, tq_id: int, placement: Placement, *, source: str,
    debits: Sequence[tuple[str, str, float, float]], rules_version: int, count: int = 1,
) -> list[dict[str, Any]]:
    """The whole claim in one round trip: the usage guard and the check of
    ``rules_version``, claim_job, every debit (scope, resource, amount,
    capacity; given sorted) and record_debits, and the Matched history
    entry, repeated for up to ``count`` jobs (claim_several).
    The jobs claimed, perhaps none; raises DebitDoesNotFit when a
    consumable is full for the first and QuotaSetsChanged when the sets
    are not those of ``rules_version`` (the caller's transaction must then
    roll back; on PostgreSQL the failed statement already undid everything)."""
    params = {"tq_id": tq_id, "count": count, "source": source, "rules_version": rules_version,
              **placement.params()}
    if conn.dialect.name == "postgresql":
        params.update({"scopes": [d[0] for d in debits], "resources": [d[1] for d in debits],
                       "amounts": [float(d[2]) for d in debits], "capacities": [float(d[3]) for d in debits]})
        statement = _CLAIM_FUNCTION
    else:
        params["debits"] = json.dumps([[d[0], d[1], float(d[2]), float(d[3])] for d in debits])
        statement = _CLAIM_PROCEDURE
    try:
        rows = conn.execute(statement, params).mappings().all()
    except DBAPIError as exc:
        if _refusal(exc) == SETS_CHANGED_SQLSTATE:
            raise QuotaSetsChanged() from None
        index = _full_debit_index(exc)
        if index is not None:
            raise DebitDoesNotFit(index) from None
        raise
    routine_committed(conn)       # both routines leave no transaction open (a no-op but on MariaDB)
    return [dict(row) for row in rows if row["job_id"] is not None]


def _refusal(exc: DBAPIError) -> str | None:
    """WMS01 or WMS02 when the claim refused itself, else None."""
    orig = exc.orig
    state = getattr(orig, "sqlstate", None)                              # PostgreSQL
    if state in (DEBIT_FULL_SQLSTATE, SETS_CHANGED_SQLSTATE):
        return state
    args = getattr(orig, "args", ())                                     # MariaDB: "WMS01 <index>", "WMS02"
    if len(args) == 2 and args[0] == _MARIADB_SIGNAL:
        word = str(args[1]).split(" ", 1)[0]
        return word if word in (DEBIT_FULL_SQLSTATE, SETS_CHANGED_SQLSTATE) else None
    return None


def _full_debit_index(exc: DBAPIError) -> int | None:
    """The 0-based index of the debit that did not fit, if that is what ``exc`` says."""
    if _refusal(exc) != DEBIT_FULL_SQLSTATE:
        return None
    orig = exc.orig
    if getattr(orig, "sqlstate", None) == DEBIT_FULL_SQLSTATE:            # PostgreSQL: in DETAIL
        return int(orig.diag.message_detail)
    return int(str(orig.args[1]).split()[1])                           # MariaDB: "WMS01 <index>"


_DEBIT_ALL: dict[int, Any] = {}


def _debit_all_statement(count: int) -> Any:
    """``UPDATE .. SET used = used + CASE .. END WHERE (key and fits) OR ..``, built once per count."""
    stmt = _DEBIT_ALL.get(count)
    if stmt is None:
        cases = " ".join(f"WHEN scope = :s{i} AND resource = :r{i} THEN :a{i}" for i in range(count))
        fits = " OR ".join(f"(scope = :s{i} AND resource = :r{i} AND used + :a{i} <= :c{i})" for i in range(count))
        stmt = _DEBIT_ALL[count] = text(f"UPDATE resource_usage SET used = used + CASE {cases} ELSE 0 END "
                                        f"WHERE {fits} RETURNING scope, resource")
    return stmt


def debit_all(conn: Connection, debits: Sequence[tuple[str, str, float, float]]) -> int | None:
    """Debit every (scope, resource, amount, capacity) if each fits: None if all
    did, else the index of one that did not (the caller rolls back, undoing the others).

    One statement for all, the form SQLite's claim uses (it has no row locks
    and pays for every statement); PostgreSQL and MariaDB debit one row at a
    time, in key order, inside their claim function and procedure. The rows
    must exist (``ensure_usage_rows``) and be distinct.
    """
    if not debits:
        return None
    params: dict[str, object] = {}
    for i, (scope, resource, amount, capacity) in enumerate(debits):
        params.update({f"s{i}": scope, f"r{i}": resource, f"a{i}": amount, f"c{i}": capacity})
    done = {(scope, resource) for scope, resource in conn.execute(_debit_all_statement(len(debits)), params).all()}
    if len(done) == len(debits):
        return None
    return next(i for i, d in enumerate(debits) if (d[0], d[1]) not in done)


def record_debits(conn: Connection, job_id: int, debits: Sequence[tuple[str, str, float]]) -> None:
    if debits:
        conn.execute(insert(job_debits), [{"job_id": job_id, "scope": s, "resource": r, "amount": a} for s, r, a in debits])





def release_debits(conn: Connection, job_ids: Sequence[int]) -> int:
    """Give back everything these jobs hold; returns how many debits were returned."""
    ids = list(job_ids)
    if not ids:
        return 0
    guard_usage(conn)
    rows = conn.execute(
        select(job_debits.c.scope, job_debits.c.resource, job_debits.c.amount)
        .where(job_debits.c.job_id.in_(ids))
        .with_for_update()
        if conn.dialect.name != "sqlite"
        else select(job_debits.c.scope, job_debits.c.resource, job_debits.c.amount).where(job_debits.c.job_id.in_(ids))
    ).all()
    totals: dict[tuple[str, str], float] = {}
    for scope, resource, amount in rows:
        totals[(scope, resource)] = totals.get((scope, resource), 0.0) + float(amount)
    # In key order, so concurrent releasers lock usage rows in the same order.
    for (scope, resource), amount in sorted(totals.items()):
        conn.execute(
            update(resource_usage)
            .where(resource_usage.c.scope == scope, resource_usage.c.resource == resource)
            .values(used=resource_usage.c.used - amount)
        )
    conn.execute(delete(job_debits).where(job_debits.c.job_id.in_(ids)))
    return len(rows)


def job_placement(conn: Connection, job_id: int) -> dict[str, Any] | None:
    stmt = select(
        jobs.c.job_id, jobs.c.status, jobs.c.owner, jobs.c.pilot_id, jobs.c.queue, jobs.c.host, jobs.c.slots,
        jobs.c.lease_expires, jobs.c.reschedule_count, jobs.c.attempt,
    ).where(jobs.c.job_id == job_id)
    row = conn.execute(stmt).mappings().first()
    return dict(row) if row is not None else None


def set_pilot_status(
    conn: Connection, job_id: int, pilot_id: str, expect: Sequence[str], values: dict[str, Any],
    attempt: int | None = None,
) -> bool:
    """Change a job held by ``pilot_id`` (in ``attempt``, when given) whose status
    is in ``expect``; True if it changed."""
    where = [jobs.c.job_id == job_id, jobs.c.pilot_id == pilot_id, jobs.c.status.in_(list(expect))]
    if attempt is not None:
        where.append(jobs.c.attempt == attempt)
    return conn.execute(update(jobs).where(*where).values(**values)).rowcount == 1


def overdue_jobs(conn: Connection, status: str, deadline: Any, cut: datetime, limit: int = 1000) -> list[int]:
    """Jobs in ``status`` whose ``deadline`` column is before ``cut`` (leases, heartbeats)."""
    stmt = select(jobs.c.job_id).where(jobs.c.status == status, deadline < cut).order_by(jobs.c.job_id).limit(limit)
    return list(conn.execute(stmt).scalars().all())


def expired_leases(conn: Connection, now: datetime) -> list[int]:
    """Matched jobs whose lease has run out."""
    return overdue_jobs(conn, JobStatus.MATCHED.value, jobs.c.lease_expires, now)


CLEARED_PLACEMENT = dict(pilot_id=None, host=None, queue="", lease_expires=None, matched_time=None,
                          start_time=None, heartbeat_time=None)


def clear_placement(conn: Connection, job_ids: Sequence[int]) -> None:
    """Forget which pilot, queue and host these jobs were handed to (they are locked, and leave Matched)."""
    for chunk in chunked(sorted(set(job_ids))):
        conn.execute(update(jobs).where(jobs.c.job_id.in_(chunk)).values(**CLEARED_PLACEMENT))


def reschedule(
    conn: Connection, job_id: int, from_status: str, stale: Any, *, max_reschedule: int, minor_waiting: str,
    minor_failed: str, now: datetime,
) -> str | None:
    """``from_status`` -> Waiting (counting one more reschedule), or Failed
    once the job has been rescheduled ``max_reschedule`` times; only while
    ``stale`` (a condition on the job row) still holds. The new status, or
    None when nothing changed (another reaper was first, or the pilot came
    back). Two conditional updates, so concurrent reapers agree."""
    where = (jobs.c.job_id == job_id, jobs.c.status == from_status, stale)
    back = conn.execute(
        update(jobs)
        .where(*where, jobs.c.reschedule_count < max_reschedule)
        .values(status=WAITING, minor_status=minor_waiting, last_update_time=now,
                reschedule_count=jobs.c.reschedule_count + 1, **CLEARED_PLACEMENT)
    ).rowcount
    if back:
        return WAITING
    failed = conn.execute(
        update(jobs)
        .where(*where, jobs.c.reschedule_count >= max_reschedule)
        .values(status=JobStatus.FAILED.value, minor_status=minor_failed, last_update_time=now, end_time=now,
                lease_expires=None)
    ).rowcount
    return JobStatus.FAILED.value if failed else None


def mark_stalled(conn: Connection, job_id: int, stale: Any, minor_status: str, now: datetime) -> bool:
    """Running -> Stalled for a job while ``stale`` (a condition on its row) holds:
    its last heartbeat is too old, or it is still held by a pilot that ended."""
    stmt = (
        update(jobs)
        .where(jobs.c.job_id == job_id, jobs.c.status == JobStatus.RUNNING.value, stale)
        .values(status=JobStatus.STALLED.value, minor_status=minor_status, last_update_time=now)
    )
    return conn.execute(stmt).rowcount == 1


@dataclass(frozen=True)
class Orphan:
    """A Matched or Running job whose pilot has ended, as its batch system says."""

    job_id: int
    status: str
    pilot_id: str
    pilot_state: str


def jobs_of_ended_pilots(conn: Connection, limit: int = 1000) -> list[Orphan]:
    """Matched and Running jobs held by a pilot in a final state (Done,
    Failed, Aborted). Only pilots a SiteDirector started have a state; a
    pilot started by hand is never found here."""
    stmt = (
        select(jobs.c.job_id, jobs.c.status, jobs.c.pilot_id, pilots.c.state)
        .join(pilots, pilots.c.pilot_id == jobs.c.pilot_id)
        .where(jobs.c.status.in_((JobStatus.MATCHED.value, JobStatus.RUNNING.value)),
               pilots.c.state.in_(PILOT_FINAL_STATES))
        .order_by(jobs.c.job_id).limit(limit)
    )
    return [Orphan(*row) for row in conn.execute(stmt).all()]


def silent_running_jobs(conn: Connection, cut: datetime) -> list[int]:
    """Running jobs whose last heartbeat is older than ``cut``."""
    return overdue_jobs(conn, JobStatus.RUNNING.value, jobs.c.heartbeat_time, cut)


#: A Running job none of whose heartbeats has arrived yet: still in its start window.
NO_HEARTBEAT_YET = jobs.c.heartbeat_time.is_(None)


def unstarted_running_jobs(conn: Connection, cut: datetime, limit: int = 1000) -> list[int]:
    """Running jobs recorded before ``cut`` that have had no heartbeat since."""
    stmt = (select(jobs.c.job_id)
            .where(jobs.c.status == JobStatus.RUNNING.value, NO_HEARTBEAT_YET, jobs.c.start_time < cut)
            .order_by(jobs.c.job_id).limit(limit))
    return list(conn.execute(stmt).scalars().all())


def reopen_start_window(conn: Connection, job_id: int, pilot_id: str, attempt: int | None, now: datetime) -> bool:
    """A repeated Running report of the pilot that holds the job, before its
    first heartbeat: the start window opens again from ``now``; True if so."""
    where = [jobs.c.job_id == job_id, jobs.c.pilot_id == pilot_id, jobs.c.status == JobStatus.RUNNING.value,
             NO_HEARTBEAT_YET]
    if attempt is not None:
        where.append(jobs.c.attempt == attempt)
    return conn.execute(update(jobs).where(*where).values(start_time=now, last_update_time=now)).rowcount == 1


def store_output(conn: Connection, job_id: int, stdout: str, stderr: str, truncated: bool, now: datetime) -> None:
    store_outputs(conn, {job_id: (stdout, stderr, truncated)}, now)


def store_outputs(conn: Connection, outputs: dict[int, tuple[str, str, bool]], now: datetime) -> None:
    """Each job's output (stdout, stderr, truncated), in place of any it had: two statements for them all."""
    if not outputs:
        return
    for chunk in chunked(sorted(outputs)):
        conn.execute(delete(job_outputs).where(job_outputs.c.job_id.in_(chunk)))
    conn.execute(insert(job_outputs), [
        {"job_id": job_id, "stdout": stdout, "stderr": stderr, "truncated": truncated, "updated": now}
        for job_id, (stdout, stderr, truncated) in sorted(outputs.items())])


def get_output(conn: Connection, job_id: int) -> dict[str, Any] | None:
    row = conn.execute(select(job_outputs).where(job_outputs.c.job_id == job_id)).mappings().first()
    return dict(row) if row is not None else None


