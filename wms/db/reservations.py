"""Queries on advance reservations, their bookings and the grant's lock rows.

Functions take the caller's connection and never commit (the service owns
the transaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, delete, func, insert, select, update

from wms.core.states import JobStatus
from wms.db.engine import insert_ignoring_duplicates
from wms.db.jobs import any_column_holds, chunked
from wms.db.schema import (
    cluster_objects, job_debits, jobs, reservation_bookings, reservation_locks, reservations, resource_usage, task_queues,
)

# Jobs that hold resources now (their debits are in resource_usage).
HOLDING = (JobStatus.MATCHED.value, JobStatus.RUNNING.value, JobStatus.STALLED.value)


def lock_scopes(conn: Connection, scopes: Iterable[str], table: Table = reservation_locks) -> None:
    """Hold the grant lock of every scope until the transaction ends, in sorted order (no deadlock);
    ``table``: the lock rows (one ``scope`` column), those of the grants unless another is named.

    A row lock on PostgreSQL and MariaDB; SQLite's writer lock (BEGIN
    IMMEDIATE) already serialises every grant.
    """
    wanted = sorted(set(scopes))
    if not wanted:
        return
    if conn.dialect.name == "sqlite":
        insert_ignoring_duplicates(conn, table, [{"scope": s} for s in wanted], ["scope"])
        return
    # Lock rows that exist first; create only the missing ones. An INSERT
    # that ignores a duplicate takes a shared lock on the existing row on
    # MariaDB, and two grants each holding it then both asking for the
    # exclusive lock deadlock.
    locked = _lock_existing(conn, wanted, table)
    missing = [s for s in wanted if s not in locked]
    if missing:
        insert_ignoring_duplicates(conn, table, [{"scope": s} for s in missing], ["scope"])
        _lock_existing(conn, missing, table)


def _lock_existing(conn: Connection, scopes: list[str], table: Table) -> set[str]:
    locked: set[str] = set()
    for chunk in chunked(scopes):
        stmt = select(table.c.scope).where(table.c.scope.in_(chunk)).order_by(table.c.scope).with_for_update()
        locked.update(conn.execute(stmt).scalars().all())
    return locked


# The last id qrsub handed out, kept as a cluster object so the sequence
# survives the wraparound (the highest id in the table no longer tells).
SEQUENCE_KIND = "ar_sequence"


def last_ar_id(conn: Connection) -> int:
    text = conn.execute(select(cluster_objects.c.text).where(cluster_objects.c.kind == SEQUENCE_KIND)).scalar()
    if text is not None:
        return int(text)
    return int(conn.execute(select(func.max(reservations.c.ar_id))).scalar() or 0)


def store_last_ar_id(conn: Connection, ar_id: int, now: datetime, user: str) -> None:
    inserted = insert_ignoring_duplicates(conn, cluster_objects, [
        {"kind": SEQUENCE_KIND, "text": str(ar_id), "version": 1, "updated": now, "updated_by": user}], ["kind"])
    if not inserted:
        conn.execute(update(cluster_objects).where(cluster_objects.c.kind == SEQUENCE_KIND)
                     .values(text=str(ar_id), version=cluster_objects.c.version + 1, updated=now, updated_by=user))


def ids_in_use(conn: Connection, states: Iterable[str], holding_key: str) -> set[int]:
    """Ids of reservations in ``states`` and of deleted ones still holding their resources."""
    stmt = select(reservations.c.ar_id).where(
        reservations.c.state.in_(list(states))
        | ((reservations.c.state == "d") & reservations.c.request.like(f'%"{holding_key}"%')))
    return {int(i) for i in conn.execute(stmt).scalars().all()}


def drop_finished(conn: Connection, ar_id: int, final_states: Iterable[str]) -> None:
    """Forget a finished reservation whose id is handed out again (its bookings with it)."""
    finished = select(reservations.c.ar_id).where(reservations.c.ar_id == ar_id,
                                                  reservations.c.state.in_(list(final_states)))
    if conn.execute(finished).first() is None:
        return
    conn.execute(delete(reservation_bookings).where(reservation_bookings.c.ar_id == ar_id))
    conn.execute(delete(reservations).where(reservations.c.ar_id == ar_id))


def insert_reservation(conn: Connection, row: dict[str, Any]) -> int:
    result = conn.execute(insert(reservations).values(**row))
    return int(result.inserted_primary_key[0])


def insert_bookings(conn: Connection, ar_id: int, bookings: Sequence[dict[str, Any]]) -> None:
    if bookings:
        conn.execute(insert(reservation_bookings), [{**b, "ar_id": ar_id} for b in bookings])


def replace_bookings(conn: Connection, ar_id: int, bookings: Sequence[dict[str, Any]]) -> None:
    conn.execute(delete(reservation_bookings).where(reservation_bookings.c.ar_id == ar_id))
    insert_bookings(conn, ar_id, bookings)


def count_in_states(conn: Connection, states: Iterable[str]) -> int:
    stmt = select(func.count()).select_from(reservations).where(reservations.c.state.in_(list(states)))
    return int(conn.execute(stmt).scalar() or 0)


def get(conn: Connection, ar_id: int, *, lock: bool = False) -> dict[str, Any] | None:
    stmt = select(reservations).where(reservations.c.ar_id == ar_id)
    if lock and conn.dialect.name != "sqlite":
        stmt = stmt.with_for_update()
    row = conn.execute(stmt).mappings().first()
    return dict(row) if row is not None else None


def list_reservations(conn: Connection, states: Iterable[str] | None = None,
                      ids: Iterable[int] | None = None, *, after: int | None = None,
                      limit: int | None = None) -> list[dict[str, Any]]:
    """Reservations by id (in ``states``, of ``ids``), after the id ``after``, at most ``limit``."""
    stmt = select(reservations).order_by(reservations.c.ar_id)
    if states is not None:
        stmt = stmt.where(reservations.c.state.in_(list(states)))
    if ids is not None:
        stmt = stmt.where(reservations.c.ar_id.in_(list(ids)))
    if after is not None:
        stmt = stmt.where(reservations.c.ar_id > after)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def deleted_holding(conn: Connection, key: str) -> list[dict[str, Any]]:
    """Deleted reservations whose request still names ``key`` (a release time: qrdel without -f)."""
    stmt = (select(reservations).where(reservations.c.state == "d", reservations.c.request.like(f'%"{key}"%'))
            .order_by(reservations.c.ar_id))
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def bookings_of(conn: Connection, ar_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    ids = sorted(set(ar_ids))
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
    for chunk in chunked(ids):
        stmt = (select(reservation_bookings).where(reservation_bookings.c.ar_id.in_(chunk))
                .order_by(reservation_bookings.c.booking_id))
        for row in conn.execute(stmt).mappings().all():
            out[row["ar_id"]].append(dict(row))
    return out


def active_bookings(conn: Connection, states: Iterable[str], exclude: int | None = None) -> list[dict[str, Any]]:
    """Every booking of reservations in ``states``, with the reservation's window."""
    stmt = (select(reservation_bookings.c.ar_id, reservation_bookings.c.scope, reservation_bookings.c.resource,
                   reservation_bookings.c.amount, reservations.c.start_time, reservations.c.end_time)
            .join(reservations, reservations.c.ar_id == reservation_bookings.c.ar_id)
            .where(reservations.c.state.in_(list(states))))
    if exclude is not None:
        stmt = stmt.where(reservations.c.ar_id != exclude)
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def holding_jobs(conn: Connection) -> list[dict[str, Any]]:
    """Jobs that hold resources now: where they run, since when, their task queue's definition and reservation."""
    stmt = (select(jobs.c.job_id, jobs.c.queue, jobs.c.host, jobs.c.matched_time, jobs.c.start_time,
                   task_queues.c.definition, task_queues.c.reservation_id)
            .join(task_queues, task_queues.c.tq_id == jobs.c.task_queue_id)
            .where(jobs.c.status.in_(HOLDING)))
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def debits_of(conn: Connection, job_ids: Sequence[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for chunk in chunked(sorted(job_ids)):
        stmt = select(job_debits).where(job_debits.c.job_id.in_(chunk))
        out.extend(dict(r) for r in conn.execute(stmt).mappings().all())
    return out


def set_state(conn: Connection, ar_id: int, from_states: Iterable[str], state: str, now: datetime,
              message: str | None = None) -> bool:
    """Move the reservation to ``state`` if it is in one of ``from_states``; True if it moved."""
    values: dict[str, Any] = {"state": state, "updated": now}
    if message is not None:
        values["message"] = message
    stmt = (update(reservations)
            .where(reservations.c.ar_id == ar_id, reservations.c.state.in_(list(from_states)))
            .values(**values))
    return conn.execute(stmt).rowcount == 1


def update_fields(conn: Connection, ar_id: int, values: dict[str, Any]) -> None:
    conn.execute(update(reservations).where(reservations.c.ar_id == ar_id).values(**values))


def change_usage(conn: Connection, amounts: dict[tuple[str, str], float]) -> None:
    """Add (or, negative, give back) amounts to the usage rows, unconditionally, in key order.

    A starting reservation takes what it booked even if a job overran its
    h_rt: the usage may exceed the capacity for a moment, which only keeps
    new jobs out until the overrunning one ends.
    """
    keys = sorted(amounts)
    if not keys:
        return
    insert_ignoring_duplicates(conn, resource_usage, [{"scope": s, "resource": r, "used": 0.0} for s, r in keys],
                               ["scope", "resource"])
    for scope, resource in keys:
        conn.execute(update(resource_usage)
                     .where(resource_usage.c.scope == scope, resource_usage.c.resource == resource)
                     .values(used=resource_usage.c.used + amounts[(scope, resource)]))


def jobs_of_reservation(conn: Connection, ar_id: int, statuses: Iterable[str] | None = None) -> list[dict[str, Any]]:
    stmt = (select(jobs.c.job_id, jobs.c.status, jobs.c.owner, jobs.c.slots, jobs.c.start_time, jobs.c.end_time,
                   jobs.c.last_update_time, jobs.c.queue, jobs.c.host)
            .join(task_queues, task_queues.c.tq_id == jobs.c.task_queue_id)
            .where(task_queues.c.reservation_id == ar_id).order_by(jobs.c.job_id))
    if statuses is not None:
        stmt = stmt.where(jobs.c.status.in_(list(statuses)))
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def reservations_of_task_queues(conn: Connection, tq_ids: Sequence[int]) -> dict[int, int]:
    """The advance reservation of each task queue that has one."""
    out: dict[int, int] = {}
    for chunk in chunked(sorted(set(tq_ids))):
        stmt = (select(task_queues.c.tq_id, task_queues.c.reservation_id)
                .where(task_queues.c.tq_id.in_(chunk), task_queues.c.reservation_id.is_not(None)))
        out.update({int(t): int(r) for t, r in conn.execute(stmt).all()})
    return out


def finished_jobs(conn: Connection, any_of: Mapping[str, str] | None = None, *, before: int | None = None,
                  limit: int = 10000) -> list[dict[str, Any]]:
    """Accounting records: finished jobs with the reservation they ran in, newest first (ids
    below ``before``, the keyset of a page); ``any_of`` (column -> value): only jobs where at
    least one of these columns holds its value."""
    final = [JobStatus.DONE.value, JobStatus.FAILED.value, JobStatus.KILLED.value]
    stmt = (select(jobs.c.job_id, jobs.c.owner, jobs.c.owner_group, jobs.c.status, jobs.c.queue, jobs.c.host,
                   jobs.c.slots, jobs.c.start_time, jobs.c.end_time, jobs.c.last_update_time, jobs.c.exit_code,
                   task_queues.c.reservation_id)
            .join(task_queues, task_queues.c.tq_id == jobs.c.task_queue_id)
            .where(jobs.c.status.in_(final)).order_by(jobs.c.job_id.desc()).limit(limit))
    if before is not None:
        stmt = stmt.where(jobs.c.job_id < before)
    if any_of:
        stmt = stmt.where(any_column_holds(any_of))
    return [dict(r) for r in conn.execute(stmt).mappings().all()]
