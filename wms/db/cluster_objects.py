"""Grid Engine objects stored by qconf: read the current one, replace it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update

from wms.db.engine import insert_ignoring_duplicates
from wms.db.schema import cluster_objects


def get_object(conn: Connection, kind: str) -> dict[str, Any] | None:
    row = conn.execute(select(cluster_objects).where(cluster_objects.c.kind == kind)).mappings().first()
    return dict(row) if row is not None else None


def version(conn: Connection, kind: str) -> int:
    """0 when the object was never stored (the configuration file's applies)."""
    value = conn.execute(select(cluster_objects.c.version).where(cluster_objects.c.kind == kind)).scalar()
    return int(value or 0)


def put_object(conn: Connection, kind: str, text: str, user: str, now: datetime) -> int:
    """Store a new text for ``kind``; returns its version (1, 2, ...)."""
    inserted = insert_ignoring_duplicates(
        conn, cluster_objects, [{"kind": kind, "text": text, "version": 1, "updated": now, "updated_by": user}],
        ["kind"],
    )
    if inserted:
        return 1
    conn.execute(
        update(cluster_objects)
        .where(cluster_objects.c.kind == kind)
        .values(text=text, version=cluster_objects.c.version + 1, updated=now, updated_by=user)
    )
    return version(conn, kind)


def add_if_missing(conn: Connection, kind: str, text: str, user: str, now: datetime) -> bool:
    """Store ``text`` as version 1 of ``kind`` unless a row exists; True if this call stored it.

    Two processes racing to create the same object agree: one insert wins,
    the other is skipped, and both read the winner's text afterwards."""
    return bool(insert_ignoring_duplicates(
        conn, cluster_objects, [{"kind": kind, "text": text, "version": 1, "updated": now, "updated_by": user}],
        ["kind"],
    ))


def ensure(conn: Connection, kind: str, user: str, now: datetime) -> None:
    """A row for ``kind`` exists: at version 0, never stored, if it is new."""
    insert_ignoring_duplicates(
        conn, cluster_objects, [{"kind": kind, "text": "", "version": 0, "updated": now, "updated_by": user}],
        ["kind"],
    )


def replace_if_version(conn: Connection, kind: str, text: str, expected: int, user: str, now: datetime) -> bool:
    """Store ``text`` only if the stored version is still ``expected`` (0: never stored); True if stored.

    Read-modify-write of a whole object by two administrators at once: the
    second one's write fails and is redone on the new text, so neither
    change is lost.
    """
    if expected == 0:
        ensure(conn, kind, user, now)
    result = conn.execute(
        update(cluster_objects)
        .where(cluster_objects.c.kind == kind, cluster_objects.c.version == expected)
        .values(text=text, version=expected + 1, updated=now, updated_by=user)
    )
    return result.rowcount == 1
