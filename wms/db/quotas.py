"""Usage of resource quota rule instances (debit scopes ``rqs:set/rule:instance``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from wms.core.states import JobStatus
from wms.db.engine import insert_ignoring_duplicates
from wms.db.schema import job_debits, jobs, resource_usage

_INSTANCES = "rqs:%"
# The states in which a job holds what it was debited (its debits go back when it leaves them).
HOLDING = (JobStatus.MATCHED.value, JobStatus.RUNNING.value)


def quota_usage(conn: Connection) -> list[tuple[str, str, float]]:
    """(scope, resource, used) of every rule instance in use."""
    stmt = select(resource_usage.c.scope, resource_usage.c.resource, resource_usage.c.used).where(
        resource_usage.c.scope.like(_INSTANCES), resource_usage.c.used > 0)
    return [(s, r, float(u)) for s, r, u in conn.execute(stmt).all()]


def holding_jobs(conn: Connection) -> list[dict[str, Any]]:
    """The jobs that hold resources now (Matched, Running): id, task queue, queue and host."""
    stmt = (select(jobs.c.job_id, jobs.c.task_queue_id, jobs.c.queue, jobs.c.host)
            .where(jobs.c.status.in_(HOLDING)).order_by(jobs.c.job_id))
    return [dict(row) for row in conn.execute(stmt).mappings().all()]


def replace_instance_debits(conn: Connection, held: Sequence[tuple[int, str, str, float]]) -> None:
    """What jobs hold of rule instances becomes ``held`` (job_id, scope, resource, amount),
    and each instance's usage the sum of it. Rows are zeroed, never deleted:
    Matcher processes remember which usage rows exist."""
    conn.execute(delete(job_debits).where(job_debits.c.scope.like(_INSTANCES)))
    if held:
        conn.execute(insert(job_debits), [{"job_id": j, "scope": s, "resource": r, "amount": a} for j, s, r, a in held])
    totals: dict[tuple[str, str], float] = {}
    for _, scope, resource, amount in held:
        totals[(scope, resource)] = totals.get((scope, resource), 0.0) + amount
    conn.execute(update(resource_usage)
                 .where(resource_usage.c.scope.like(_INSTANCES), resource_usage.c.used != 0).values(used=0.0))
    if not totals:
        return
    keys = sorted(totals)
    insert_ignoring_duplicates(conn, resource_usage, [{"scope": s, "resource": r, "used": 0.0} for s, r in keys],
                               ["scope", "resource"])
    conn.execute(
        update(resource_usage)
        .where(resource_usage.c.scope == bindparam("k_scope"), resource_usage.c.resource == bindparam("k_resource"))
        .values(used=bindparam("k_used")),
        [{"k_scope": s, "k_resource": r, "k_used": totals[(s, r)]} for s, r in keys],
    )
