"""Queries on pilot records and the SiteDirector's per-queue lock rows.

Functions take the caller's connection and never commit. A pilot's state
only moves forward: ``Submitted`` -> ``Running`` -> ``Done``/``Failed``, or
``Aborted`` (killed, or never accepted by its backend); a final state is
never changed again (the updates are conditional on the pilot being
active).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, or_, select, update

from wms.db.engine import insert_ignoring_duplicates
from wms.db.schema import jobs, pilot_director_queues, pilots, task_queues

SUBMITTED, RUNNING, DONE, FAILED, ABORTED = "Submitted", "Running", "Done", "Failed", "Aborted"
PILOT_STATES = (SUBMITTED, RUNNING, DONE, FAILED, ABORTED)
ACTIVE_STATES = (SUBMITTED, RUNNING)
FINAL_STATES = (DONE, FAILED, ABORTED)
WAITING = "Waiting"


def add_pilots(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Record new pilots; each row has pilot_id, site, ce, queue, backend, state, submitted.

    ``backend_ref`` defaults to "" (not yet accepted by the backend),
    ``jobs_run`` to 0, ``last_update`` to ``submitted`` and ``vo`` to None.
    """
    if not rows:
        return
    full = [
        {"backend_ref": "", "jobs_run": 0, "last_update": row["submitted"], "vo": None, **row}
        for row in rows
    ]
    conn.execute(insert(pilots), full)


def set_backend_ref(conn: Connection, pilot_id: str, backend_ref: str, now: datetime) -> bool:
    """The backend accepted the pilot under ``backend_ref``; False if the pilot is no longer active."""
    stmt = (
        update(pilots)
        .where(pilots.c.pilot_id == pilot_id, pilots.c.state.in_(ACTIVE_STATES))
        .values(backend_ref=backend_ref, last_update=now)
    )
    return conn.execute(stmt).rowcount == 1


def set_state(conn: Connection, pilot_id: str, state: str, now: datetime, jobs_run: int | None = None) -> bool:
    """Move an active pilot to ``state`` (and ``jobs_run`` if given); False if it is already final."""
    if state not in PILOT_STATES:
        raise ValueError(f"unknown pilot state {state!r}")
    values: dict[str, Any] = {"state": state, "last_update": now}
    if jobs_run is not None:
        values["jobs_run"] = jobs_run
    stmt = update(pilots).where(pilots.c.pilot_id == pilot_id, pilots.c.state.in_(ACTIVE_STATES)).values(**values)
    return conn.execute(stmt).rowcount == 1


def set_isolation(conn: Connection, pilot_id: str, isolation: str, note: str | None) -> bool:
    """How the pilot isolates payloads, and why, as it says now; False if no such pilot."""
    stmt = update(pilots).where(pilots.c.pilot_id == pilot_id).values(isolation=isolation, isolation_note=note)
    return conn.execute(stmt).rowcount == 1


def get_pilot(conn: Connection, pilot_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(pilots).where(pilots.c.pilot_id == pilot_id)).mappings().one_or_none()
    return dict(row) if row is not None else None


def active_pilots(conn: Connection) -> list[dict[str, Any]]:
    """Every pilot in Submitted or Running, oldest first."""
    stmt = select(pilots).where(pilots.c.state.in_(ACTIVE_STATES)).order_by(pilots.c.submitted, pilots.c.pilot_id)
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def list_pilots(conn: Connection, states: Iterable[str] | None = None, *, after: str | None = None,
                limit: int | None = None) -> list[dict[str, Any]]:
    """Every pilot (or those in ``states``), oldest first; paged (``after``, ``limit``): by pilot
    id instead, on the primary key, those after ``after`` in the database's order of text."""
    paged = after is not None or limit is not None
    stmt = select(pilots).order_by(pilots.c.pilot_id if paged else pilots.c.submitted, pilots.c.pilot_id)
    if states is not None:
        stmt = stmt.where(pilots.c.state.in_(list(states)))
    if after is not None:
        stmt = stmt.where(pilots.c.pilot_id > after)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def count_by_state(conn: Connection, site: str, ce: str, queue: str, vo: str | None = None) -> dict[str, int]:
    """Pilots of Site/CE/Queue (of one VO, when given) by state (active states only; the index covers it)."""
    stmt = (
        select(pilots.c.state, func.count())
        .where(pilots.c.site == site, pilots.c.ce == ce, pilots.c.queue == queue,
               pilots.c.state.in_(ACTIVE_STATES))
        .group_by(pilots.c.state)
    )
    if vo is not None:
        stmt = stmt.where(pilots.c.vo == vo)
    counts = dict.fromkeys(ACTIVE_STATES, 0)
    counts.update({state: int(n) for state, n in conn.execute(stmt).all()})
    return counts


def recent_outcomes(conn: Connection, site: str, ce: str, queue: str, vo: str | None,
                    limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` pilots of Site/CE/Queue and VO that ended or ran a job,
    newest first: ``submitted``, ``last_update``, ``jobs_run``, ``state``."""
    stmt = (
        select(pilots.c.submitted, pilots.c.last_update, pilots.c.jobs_run, pilots.c.state)
        .where(pilots.c.site == site, pilots.c.ce == ce, pilots.c.queue == queue,
               (pilots.c.vo == vo) if vo is not None else pilots.c.vo.is_(None),
               or_(pilots.c.state.in_(FINAL_STATES), pilots.c.jobs_run > 0))
        .order_by(pilots.c.last_update.desc(), pilots.c.pilot_id.desc())
        .limit(limit)
    )
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def count_ran_nothing(conn: Connection) -> int:
    """Pilots that ended without running a job."""
    stmt = select(func.count()).select_from(pilots).where(pilots.c.state.in_(FINAL_STATES), pilots.c.jobs_run == 0)
    return int(conn.execute(stmt).scalar_one())


def lock_queue(conn: Connection, site: str, ce: str, queue: str, now: datetime) -> None:
    """Take the SiteDirector's lock on Site/CE/Queue until the transaction ends.

    An UPDATE of the queue's row: a row lock on PostgreSQL and MariaDB,
    the database's writer lock on SQLite (BEGIN IMMEDIATE). The row is
    created the first time (concurrent creators: one inserts, both update).
    """
    where = (pilot_director_queues.c.site == site, pilot_director_queues.c.ce == ce,
             pilot_director_queues.c.queue == queue)
    stmt = update(pilot_director_queues).where(*where).values(last_submission=now)
    if conn.execute(stmt).rowcount == 1:
        return
    insert_ignoring_duplicates(conn, pilot_director_queues,
                               [{"site": site, "ce": ce, "queue": queue, "last_submission": now}],
                               ["site", "ce", "queue"])
    conn.execute(stmt)


def jobs_run(conn: Connection, pilot_ids: Sequence[str]) -> dict[str, int]:
    """How many jobs each pilot has taken (jobs whose pilot_id is the pilot's)."""
    counts: dict[str, int] = {}
    ids = list(pilot_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        stmt = select(jobs.c.pilot_id, func.count()).where(jobs.c.pilot_id.in_(chunk)).group_by(jobs.c.pilot_id)
        counts.update({pid: int(n) for pid, n in conn.execute(stmt).all()})
    return counts


def waiting_jobs_by_task_queue(conn: Connection) -> list[tuple[int, str | None, str, int]]:
    """(tq_id, submit_pool, vo, waiting jobs) of every task queue with waiting jobs: one grouped query."""
    counted = (
        select(jobs.c.task_queue_id.label("tq_id"), func.count().label("n"))
        .where(jobs.c.status == WAITING, jobs.c.task_queue_id.is_not(None))
        .group_by(jobs.c.task_queue_id)
        .subquery()
    )
    stmt = (
        select(task_queues.c.tq_id, task_queues.c.submit_pool, task_queues.c.vo, counted.c.n)
        .join(counted, counted.c.tq_id == task_queues.c.tq_id)
        .order_by(task_queues.c.tq_id)
    )
    return [(int(t), p, vo, int(n)) for t, p, vo, n in conn.execute(stmt).all()]


def count_all_by_state(conn: Connection) -> dict[str, int]:
    """Every pilot by state (one grouped query on the state index)."""
    stmt = select(pilots.c.state, func.count()).group_by(pilots.c.state)
    return {state: int(n) for state, n in conn.execute(stmt).all()}
