"""Queries on sandboxes: uploads, the files of each job, and the database
store's content in pieces.

Each function takes the caller's ``Connection`` and never commits.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, func, insert, select, union, update

from wms.db.engine import insert_ignoring_duplicates
from wms.db.jobs import chunked
from wms.db.schema import jobs, sandbox_chunks, sandbox_files, sandbox_uploads


# -- uploads ---------------------------------------------------------------------
def record_upload(conn: Connection, owner: str, sha256: str, size: int, now: datetime) -> None:
    """``owner`` uploaded this content now (again: the time moves on); safe
    against the same upload made at the same moment."""
    row = {"owner": owner, "sha256": sha256, "size": size, "uploaded": now}
    if not insert_ignoring_duplicates(conn, sandbox_uploads, [row], ["owner", "sha256"]):
        conn.execute(update(sandbox_uploads)
                     .where(sandbox_uploads.c.owner == owner, sandbox_uploads.c.sha256 == sha256)
                     .values(uploaded=now, size=size))


def uploads_of(conn: Connection, owner: str, digests: Collection[str]) -> dict[str, int]:
    """``{sha256: size}`` of the ``digests`` that ``owner`` uploaded."""
    out: dict[str, int] = {}
    for part in chunked(sorted(digests)):
        stmt = select(sandbox_uploads.c.sha256, sandbox_uploads.c.size).where(
            sandbox_uploads.c.owner == owner, sandbox_uploads.c.sha256.in_(list(part)))
        out.update({row.sha256: row.size for row in conn.execute(stmt)})
    return out


def forget_uploads(conn: Connection, before: datetime) -> int:
    """Upload records older than ``before``: their content stays while a job names it."""
    return conn.execute(delete(sandbox_uploads).where(sandbox_uploads.c.uploaded < before)).rowcount


def bytes_held(conn: Connection, owner: str | None = None, but: Collection[str] = ()) -> int:
    """Bytes of the distinct contents ``owner`` uploaded or their jobs name (every user's,
    when ``owner`` is None), leaving out the contents ``but``: one indexed read of the owner's
    uploads and of their jobs' files (of every file for the total)."""
    uploads = select(sandbox_uploads.c.sha256, sandbox_uploads.c.size)
    files = select(sandbox_files.c.sha256, sandbox_files.c.size)
    if owner is not None:
        uploads = uploads.where(sandbox_uploads.c.owner == owner)
        files = files.join(jobs, jobs.c.job_id == sandbox_files.c.job_id).where(jobs.c.owner == owner)
    if but:
        uploads = uploads.where(sandbox_uploads.c.sha256.not_in(list(but)))
        files = files.where(sandbox_files.c.sha256.not_in(list(but)))
    held = union(uploads, files).subquery()          # UNION, not UNION ALL: each content once
    return int(conn.execute(select(func.coalesce(func.sum(held.c.size), 0))).scalar_one())


# -- the files of jobs --------------------------------------------------------
def add_files(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Rows of ``sandbox_files`` (job_id, kind, name, sha256, size, created)."""
    if rows:
        conn.execute(insert(sandbox_files), rows)


def put_file(conn: Connection, row: dict[str, Any]) -> None:
    """One file of a job's sandbox, replacing one of that name (a pilot's upload sent twice)
    and every file of the same kind an earlier attempt of the job sent."""
    same = [sandbox_files.c.job_id == row["job_id"], sandbox_files.c.kind == row["kind"]]
    conn.execute(delete(sandbox_files).where(
        *same, (sandbox_files.c.name == row["name"]) | (sandbox_files.c.attempt < row.get("attempt", 0))))
    conn.execute(insert(sandbox_files).values(**row))


def _files(job_id: int, kind: str, attempt: int | None) -> Any:
    stmt = select(sandbox_files.c.name, sandbox_files.c.size, sandbox_files.c.sha256).where(
        sandbox_files.c.job_id == job_id, sandbox_files.c.kind == kind)
    return stmt if attempt is None else stmt.where(sandbox_files.c.attempt == attempt)


def files_of(conn: Connection, job_id: int, kind: str, attempt: int | None = None) -> list[dict[str, Any]]:
    """The job's files of ``kind`` (those ``attempt`` sent, when given), by name."""
    stmt = _files(job_id, kind, attempt).order_by(sandbox_files.c.name)
    return [dict(row) for row in conn.execute(stmt).mappings()]


def file_of(conn: Connection, job_id: int, kind: str, name: str, attempt: int | None = None
            ) -> dict[str, Any] | None:
    row = conn.execute(_files(job_id, kind, attempt).where(sandbox_files.c.name == name)).mappings().first()
    return dict(row) if row is not None else None


def drop_files_of_finished_jobs(conn: Connection, final_states: Collection[str], before: datetime) -> int:
    """The sandbox files of jobs in ``final_states`` that ended (or last changed) before ``before``."""
    ended = func.coalesce(jobs.c.end_time, jobs.c.last_update_time)
    old = select(jobs.c.job_id).where(jobs.c.status.in_(list(final_states)), ended < before)
    ids = [row.job_id for row in conn.execute(
        select(sandbox_files.c.job_id).distinct().where(sandbox_files.c.job_id.in_(old)))]
    removed = 0
    for part in chunked(ids):
        removed += conn.execute(delete(sandbox_files).where(sandbox_files.c.job_id.in_(list(part)))).rowcount
    return removed


def unreferenced(conn: Connection, digests: Iterable[str]) -> list[str]:
    """Those of ``digests`` that no job's file and no upload record names."""
    digests = sorted(set(digests))
    named: set[str] = set()
    for part in chunked(digests):
        for table in (sandbox_files, sandbox_uploads):
            named.update(conn.execute(select(table.c.sha256).distinct().where(table.c.sha256.in_(list(part))))
                         .scalars())
    return [d for d in digests if d not in named]


# -- the database store's content -------------------------------------------------
def has_content(conn: Connection, sha256: str) -> bool:
    return conn.execute(select(exists().where(sandbox_chunks.c.sha256 == sha256, sandbox_chunks.c.seq == 0))
                        ).scalar_one()


def touch_content(conn: Connection, sha256: str, now: datetime) -> bool:
    """Mark stored content fresh; False when there is none (any more)."""
    return conn.execute(update(sandbox_chunks).where(sandbox_chunks.c.sha256 == sha256, sandbox_chunks.c.seq == 0)
                        .values(stored=now)).rowcount == 1


def add_piece(conn: Connection, sha256: str, seq: int, data: bytes, now: datetime) -> None:
    """One piece per statement: each stays under MariaDB's max_allowed_packet. The
    same content stored at the same moment by another upload is the same piece: skipped."""
    insert_ignoring_duplicates(conn, sandbox_chunks, [{"sha256": sha256, "seq": seq, "data": data, "stored": now}],
                               ["sha256", "seq"])


def piece(conn: Connection, sha256: str, seq: int) -> bytes | None:
    return conn.execute(select(sandbox_chunks.c.data).where(
        sandbox_chunks.c.sha256 == sha256, sandbox_chunks.c.seq == seq)).scalar_one_or_none()


def stored_before(conn: Connection, before: datetime) -> list[str]:
    """The digests whose content was last stored (or stored again) before ``before``."""
    stmt = select(sandbox_chunks.c.sha256).where(sandbox_chunks.c.seq == 0, sandbox_chunks.c.stored < before)
    return list(conn.execute(stmt).scalars())


def drop_content(conn: Connection, sha256: str, stored_before: datetime) -> bool:
    """Remove the content unless it was stored again since ``stored_before``.

    The first piece is read FOR UPDATE: an upload marking it fresh at the
    same moment waits for this transaction, then finds it gone and stores
    it again."""
    first = select(sandbox_chunks.c.stored).where(sandbox_chunks.c.sha256 == sha256, sandbox_chunks.c.seq == 0)
    stored = conn.execute(first.with_for_update()).scalar_one_or_none()
    if stored is None or stored >= stored_before:
        return False
    conn.execute(delete(sandbox_chunks).where(sandbox_chunks.c.sha256 == sha256))
    return True
