"""Counting a user's and a VO's jobs for wms.yaml ``caps``, under the lock
that keeps two submissions from both passing a cap (wms/core/caps.py).

Functions take the caller's connection and never commit: the submission
locks, counts and inserts in one transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy import Connection, func, select

from wms.db.reservations import lock_scopes
from wms.db.schema import jobs, submission_locks


def lock_submitters(conn: Connection, scopes: Iterable[str]) -> None:
    """Hold the submission lock of each scope (``user:NAME``, ``vo:NAME``) until the
    transaction ends: a later submission of the same user or VO waits for this one
    to commit, then counts its jobs. In sorted order, so two never deadlock."""
    lock_scopes(conn, scopes, table=submission_locks)


def count_jobs(conn: Connection, column: str, value: str, statuses: Collection[str]) -> int:
    """How many jobs whose ``column`` (owner or vo) is ``value`` are in one of ``statuses``
    (an index-only count on (owner, status) or (vo, status))."""
    stmt = select(func.count()).select_from(jobs).where(jobs.c[column] == value, jobs.c.status.in_(list(statuses)))
    return int(conn.execute(stmt).scalar_one())
