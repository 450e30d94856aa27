"""Counts for the console's overview: jobs and pilots by state, recent matches.

Each is one grouped statement, so the overview costs the same whatever the
number of jobs. Functions take the caller's connection and never commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import Connection, func, select

from wms.db.jobs import any_column_holds
from wms.db.schema import jobs, pilots, status_history

MATCHED = "Matched"


def jobs_by_status(conn: Connection, any_of: Mapping[str, str] | None = None) -> dict[str, int]:
    """How many jobs are in each status (``any_of``: of the jobs where one of these columns holds its value)."""
    stmt = select(jobs.c.status, func.count()).group_by(jobs.c.status)
    if any_of:
        stmt = stmt.where(any_column_holds(any_of))
    return {status: int(n) for status, n in conn.execute(stmt).all()}


def matches_since(conn: Connection, since: datetime, any_of: Mapping[str, str] | None = None) -> int:
    """How many times a job was handed to a pilot (entered Matched) since ``since`` (``any_of``: as above)."""
    stmt = select(func.count()).select_from(status_history).where(
        status_history.c.status == MATCHED, status_history.c.time >= since)
    if any_of:
        stmt = stmt.select_from(status_history.join(jobs, jobs.c.job_id == status_history.c.job_id)) \
            .where(any_column_holds(any_of))
    return int(conn.execute(stmt).scalar_one())


def pilots_by_state(conn: Connection) -> dict[str, int]:
    """How many pilots are in each state."""
    stmt = select(pilots.c.state, func.count()).group_by(pilots.c.state)
    return {state: int(n) for state, n in conn.execute(stmt).all()}
