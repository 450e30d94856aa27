"""Queries on task queues: the job categories the Matcher works on.

Jobs whose scheduling-relevant content is the same share one task queue,
found by its ``tq_key`` (a digest). Creation is get-or-create in at most
three statements and safe against concurrent submitters. Functions take
the caller's connection and never commit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, func, or_, select, update

from wms.core.states import FINAL_STATES, JobStatus
from wms.db.engine import insert_ignoring_duplicates
from wms.db.jobs import chunked
from wms.db.schema import jobs, task_queues

_DEF_COLUMNS = ("tq_key", "owner", "owner_group", "vo", "submit_pool", "cpu_time", "definition", "priority",
                "reservation_id")


def _find(conn: Connection, keys: Collection[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for chunk in chunked(sorted(keys)):
        stmt = select(task_queues.c.tq_key, task_queues.c.tq_id).where(task_queues.c.tq_key.in_(chunk))
        found.update({key: tq_id for key, tq_id in conn.execute(stmt).all()})
    return found


def get_or_create_task_queues(
    conn: Connection, defs: list[dict[str, Any]], now: datetime
) -> dict[str, int]:
    """The id of each definition's task queue, created when missing: ``{tq_key: tq_id}``.

    Each definition carries tq_key, owner, owner_group, vo, submit_pool,
    cpu_time, definition (JSON text) and priority. An existing task queue
    is used as it is. Concurrent callers creating the same key all get the
    one row: the insert skips keys another transaction holds, and the final
    read (READ COMMITTED on the server databases) sees its commit.
    """
    wanted = {d["tq_key"]: d for d in defs}
    if not wanted:
        return {}
    found = _find(conn, wanted)
    missing = [
        {**{name: wanted[key].get(name) for name in _DEF_COLUMNS}, "created": now}
        for key in wanted
        if key not in found
    ]
    if missing:
        for row in missing:
            if row["priority"] is None:
                row["priority"] = 1
        insert_ignoring_duplicates(conn, task_queues, missing, ["tq_key"])
        found.update(_find(conn, [row["tq_key"] for row in missing]))
    return {key: found[key] for key in wanted}


def list_task_queues(conn: Connection, *, any_of: Mapping[str, str] | None = None, after: int | None = None,
                     limit: int | None = None) -> list[dict[str, Any]]:
    """Task queues by id, with ``waiting_jobs``: how many of its jobs are Waiting. ``any_of``
    (column -> value): only those where at least one of these columns holds its value;
    ``after``: ids after it; ``limit``: at most that many.

    The waiting jobs are counted for these task queues only, on the claim index (task queue,
    status, ...): a page costs the index entries of its own waiting jobs, not a pass over the
    jobs table."""
    stmt = select(task_queues).order_by(task_queues.c.tq_id)
    if any_of:
        stmt = stmt.where(or_(*(task_queues.c[column] == value for column, value in any_of.items())))
    if after is not None:
        stmt = stmt.where(task_queues.c.tq_id > after)
    if limit is not None:
        stmt = stmt.limit(limit)
    rows = {row["tq_id"]: {**row, "waiting_jobs": 0} for row in conn.execute(stmt).mappings().all()}
    for chunk in chunked(list(rows)):
        waiting = (select(jobs.c.task_queue_id, func.count())
                   .where(jobs.c.task_queue_id.in_(chunk), jobs.c.status == JobStatus.WAITING.value)
                   .group_by(jobs.c.task_queue_id))
        for tq_id, count in conn.execute(waiting).all():
            rows[tq_id]["waiting_jobs"] = int(count)
    return list(rows.values())


def delete_empty_task_queues(conn: Connection) -> int:
    """Delete the task queues no unfinished job belongs to; how many went.

    A Matched or Running job may still come back to Waiting, so only jobs
    in a final state (Done, Failed, Killed) leave a task queue empty; they
    are detached from it (task_queue_id set to NULL) before it is deleted.
    """
    final = [str(s) for s in FINAL_STATES]
    unfinished = exists().where(
        jobs.c.task_queue_id == task_queues.c.tq_id, jobs.c.status.not_in(final)
    )
    empty = conn.execute(select(task_queues.c.tq_id).where(~unfinished)).scalars().all()
    count = 0
    for chunk in chunked(empty):
        conn.execute(
            update(jobs)
            .where(jobs.c.task_queue_id.in_(chunk), jobs.c.status.in_(final))
            .values(task_queue_id=None)
        )
        # Checked again: a job may have joined the queue since it was listed.
        still_empty = task_queues.c.tq_id.in_(chunk) & ~exists().where(jobs.c.task_queue_id == task_queues.c.tq_id)
        count += conn.execute(delete(task_queues).where(still_empty)).rowcount
    return count


def waiting_per_task_queue(conn: Connection) -> list[tuple[int, str, int]]:
    """(tq_id, owner_group, waiting jobs) of every task queue with waiting jobs."""
    stmt = (
        select(task_queues.c.tq_id, task_queues.c.owner_group, func.count())
        .join(jobs, jobs.c.task_queue_id == task_queues.c.tq_id)
        .where(jobs.c.status == "Waiting")
        .group_by(task_queues.c.tq_id, task_queues.c.owner_group)
    )
    return [(row[0], row[1], int(row[2])) for row in conn.execute(stmt).all()]


def set_priorities(conn: Connection, priorities: dict[int, int]) -> int:
    """Store new task-queue priorities; how many changed."""
    changed = 0
    for tq_id, priority in sorted(priorities.items()):
        changed += conn.execute(
            update(task_queues)
            .where(task_queues.c.tq_id == tq_id, task_queues.c.priority != priority)
            .values(priority=priority)
        ).rowcount
    return changed
