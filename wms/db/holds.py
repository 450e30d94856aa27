"""Queries on the holds of jobs (``jobs.hold_types`` and ``job_holds``).

Each function takes the caller's ``Connection`` and never commits. A hold
or release first locks the jobs it may change (``lock_jobs``), in id order
so that two controls over overlapping jobs queue rather than deadlock;
the Matcher's claim skips locked rows (SKIP LOCKED) and changes only a
Waiting job, so a job being held is either held or handed out, never both.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, tuple_, update

from wms.core.holds import Hold
from wms.core.states import HoldType
from wms.db.jobs import chunked
from wms.db.schema import job_holds, jobs


def lock_jobs(conn: Connection, job_ids: Sequence[int], statuses: Collection[str]) -> list[dict[str, Any]]:
    """The jobs of ``job_ids`` whose status is one of ``statuses``, locked for this transaction, by id."""
    rows: list[dict[str, Any]] = []
    for chunk in chunked(sorted(set(job_ids))):
        stmt = (select(jobs).where(jobs.c.job_id.in_(chunk), jobs.c.status.in_(list(statuses)))
                .order_by(jobs.c.job_id).with_for_update())
        rows.extend(dict(row) for row in conn.execute(stmt).mappings())
    return rows


def holds_of(conn: Connection, job_ids: Iterable[int]) -> dict[int, list[Hold]]:
    """The holds recorded on each of these jobs (jobs without any are left out)."""
    found: dict[int, list[Hold]] = {}
    for chunk in chunked(sorted(set(job_ids))):
        stmt = select(job_holds).where(job_holds.c.job_id.in_(chunk))
        for row in conn.execute(stmt).mappings():
            found.setdefault(row["job_id"], []).append(
                Hold(HoldType(row["hold_type"]), row["holder"], row["reason"], row["time"]))
    return found


def add_holds(conn: Connection, holds: list[tuple[int, Hold]]) -> None:
    """Record holds: (job id, hold) each; a job's hold of one type is recorded once."""
    if holds:
        conn.execute(insert(job_holds), [
            {"job_id": job_id, "hold_type": h.hold_type.value, "holder": h.holder, "reason": h.reason, "time": h.time}
            for job_id, h in holds])


def drop_holds(conn: Connection, holds: list[tuple[int, HoldType]]) -> None:
    """Forget holds: (job id, hold type) each."""
    for chunk in chunked(holds):
        conn.execute(delete(job_holds).where(
            tuple_(job_holds.c.job_id, job_holds.c.hold_type).in_([(j, t.value) for j, t in chunk])))


def set_holds(conn: Connection, changes: list[dict[str, Any]], now: datetime) -> None:
    """Write each job's new status, hold types and minor status: dicts with
    job_id, status, hold_types, minor_status (the rows are locked by ``lock_jobs``)."""
    if not changes:
        return
    stmt = (update(jobs).where(jobs.c.job_id == bindparam("b_job_id"))
            .values(status=bindparam("b_status"), hold_types=bindparam("b_hold_types"),
                    minor_status=bindparam("b_minor"), last_update_time=now))
    conn.execute(stmt, [{"b_job_id": c["job_id"], "b_status": c["status"], "b_hold_types": c["hold_types"],
                         "b_minor": c["minor_status"]} for c in changes])


def drop_holds_of_jobs(conn: Connection, job_ids: Iterable[int]) -> None:
    """Forget every hold of these jobs (they left Held otherwise: killed)."""
    for chunk in chunked(sorted(set(job_ids))):
        conn.execute(delete(job_holds).where(job_holds.c.job_id.in_(chunk)))
