"""Queries on bearer tokens, stored only as their SHA-256 digest.

Functions take the caller's connection and never commit. Whether a token
is still good (expired, revoked) is decided by wms.services.tokens, which
needs the row to say why not.

Every end of a token before its time (revoked) is also noted in
one shared row, the ``ended_tokens`` cluster object, in the same
transaction: each server process reads that row's version at most about
once a second and forgets exactly the tokens ended since it last looked
(services/tokens.py), so that a revocation counts everywhere at once
without a read of the token per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, or_, select, update

from wms.db import cluster_objects as objects_db
from wms.db.schema import cluster_objects, pilots, tokens

# The cluster object noting ended tokens: its version counts the
# transactions that ended one; its text holds one "<version> <digest>" line
# per ended token, the newest last, trimmed to about ENDED_KEPT lines (a
# process further behind than that forgets every token it holds).
ENDED_KIND = "ended_tokens"
ENDED_KEPT = 1000
ENDED_WRITER = "wms"


def add_token(
    conn: Connection,
    token_hash: str,
    user: str,
    group: str,
    vo: str,
    role: str,
    description: str,
    now: datetime,
    expires: datetime | None = None,
    pilot_id: str | None = None,
    slots: int | None = None,
) -> None:
    """Store a token (by its digest) for ``user`` in ``group`` with ``role``;
    ``expires`` None means never; ``pilot_id`` binds it to a pilot, ``slots``
    the most its pilot holds at once."""
    conn.execute(
        insert(tokens).values(
            token_hash=token_hash,
            user=user,
            user_group=group,
            vo=vo,
            role=role,
            description=description,
            created=now,
            expires=expires,
            pilot_id=pilot_id,
            revoked=None,
            slots=slots,
        )
    )


def get_token(conn: Connection, token_hash: str) -> dict[str, Any] | None:
    """The token's row (token_hash, user, user_group, vo, role, description,
    created, expires, pilot_id, revoked, slots, isolation, isolation_note),
    expired or revoked ones too; None if unknown."""
    row = conn.execute(select(tokens).where(tokens.c.token_hash == token_hash)).mappings().one_or_none()
    return dict(row) if row is not None else None


def list_tokens(conn: Connection) -> list[dict[str, Any]]:
    """Every token's row, oldest first."""
    stmt = select(tokens).order_by(tokens.c.created, tokens.c.token_hash)
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def tokens_with_prefix(conn: Connection, prefix: str) -> list[dict[str, Any]]:
    """The rows whose digest starts with ``prefix`` (hexadecimal digits only)."""
    stmt = select(tokens).where(tokens.c.token_hash.like(prefix + "%"))
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


def revoke(conn: Connection, token_hash: str, now: datetime) -> bool:
    """Mark a token revoked at ``now``; False if it already was (or is unknown)."""
    stmt = update(tokens).where(tokens.c.token_hash == token_hash, tokens.c.revoked.is_(None)).values(revoked=now)
    if conn.execute(stmt).rowcount != 1:
        return False
    note_ended(conn, [token_hash], now)
    return True


def revoke_pilot_tokens(conn: Connection, pilot_ids: Sequence[str], now: datetime) -> int:
    """Revoke every token bound to one of ``pilot_ids`` (the pilots ended); how many."""
    if not pilot_ids:
        return 0
    live = (tokens.c.pilot_id.in_(list(pilot_ids)), tokens.c.revoked.is_(None))
    digests = list(conn.execute(select(tokens.c.token_hash).where(*live)).scalars())
    if not digests:
        return 0
    count = conn.execute(update(tokens).where(tokens.c.token_hash.in_(digests), *live).values(revoked=now)).rowcount
    note_ended(conn, digests, now)
    return count


def extend_pilot_tokens(conn: Connection, pilot_ids: Sequence[str], expires: datetime) -> int:
    """Tokens of ``pilot_ids`` still good and ending before ``expires`` now end then; how many."""
    if not pilot_ids:
        return 0
    stmt = (update(tokens)
            .where(tokens.c.pilot_id.in_(list(pilot_ids)), tokens.c.revoked.is_(None),
                   tokens.c.expires.is_not(None), tokens.c.expires < expires)
            .values(expires=expires))
    return conn.execute(stmt).rowcount


def bind_pilot(conn: Connection, token_hash: str, pilot_id: str) -> bool:
    """Bind a token not bound yet to ``pilot_id``; False if it was bound meanwhile."""
    stmt = update(tokens).where(tokens.c.token_hash == token_hash, tokens.c.pilot_id.is_(None)).values(
        pilot_id=pilot_id)
    return conn.execute(stmt).rowcount == 1


def pilot_bound_elsewhere(conn: Connection, pilot_id: str, token_hash: str) -> bool:
    """Whether a token other than ``token_hash`` is (or was) bound to ``pilot_id``."""
    stmt = select(tokens.c.token_hash).where(tokens.c.pilot_id == pilot_id, tokens.c.token_hash != token_hash).limit(1)
    return conn.execute(stmt).first() is not None


def set_expiry(conn: Connection, token_hash: str, expires: datetime) -> bool:
    """A renewed token's new end; False if it is revoked (or unknown)."""
    stmt = update(tokens).where(tokens.c.token_hash == token_hash, tokens.c.revoked.is_(None)).values(expires=expires)
    return conn.execute(stmt).rowcount == 1


def declare_slots(conn: Connection, token_hash: str, slots: int) -> bool:
    """The token's pilot holds at most ``slots`` from now: the first
    declaration, or one no higher than the last. False (nothing changed)
    when it declared fewer before. One conditional update, so two
    declarations at once cannot raise it."""
    stmt = (update(tokens)
            .where(tokens.c.token_hash == token_hash, or_(tokens.c.slots.is_(None), tokens.c.slots >= slots))
            .values(slots=slots))
    return conn.execute(stmt).rowcount == 1


def set_isolation(conn: Connection, token_hash: str, isolation: str, note: str | None) -> None:
    """How the token's pilot isolates payloads, and why, as it says now."""
    conn.execute(update(tokens).where(tokens.c.token_hash == token_hash)
                 .values(isolation=isolation, isolation_note=note))


def live_pilots(conn: Connection, pilot_ids: Sequence[str], now: datetime) -> set[str]:
    """Those of ``pilot_ids`` whose token still opens the API (neither revoked nor
    expired). The others never speak again: no other token can bind to their ids."""
    live: set[str] = set()
    ids = sorted(set(pilot_ids))
    for start in range(0, len(ids), 500):
        stmt = select(tokens.c.pilot_id).where(
            tokens.c.pilot_id.in_(ids[start:start + 500]), tokens.c.revoked.is_(None),
            or_(tokens.c.expires.is_(None), tokens.c.expires > now))
        live.update(conn.execute(stmt).scalars().all())
    return live


def declared_hand_pilots(conn: Connection, now: datetime, *, after: str | None = None,
                         limit: int | None = None) -> list[dict[str, Any]]:
    """The token rows of pilots started by hand (bound, not a SiteDirector pilot's)
    that declared themselves and still open the API, oldest first; paged (``after``,
    ``limit``): by pilot id instead, on its index, those after ``after`` in the database's
    order of text."""
    paged = after is not None or limit is not None
    stmt = (select(tokens)
            .outerjoin(pilots, pilots.c.pilot_id == tokens.c.pilot_id)
            .where(pilots.c.pilot_id.is_(None), tokens.c.pilot_id.is_not(None), tokens.c.role == "pilot",
                   or_(tokens.c.slots.is_not(None), tokens.c.isolation.is_not(None)),
                   tokens.c.revoked.is_(None), or_(tokens.c.expires.is_(None), tokens.c.expires > now))
            .order_by(tokens.c.pilot_id if paged else tokens.c.created, tokens.c.pilot_id))
    if after is not None:
        stmt = stmt.where(tokens.c.pilot_id > after)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [dict(r) for r in conn.execute(stmt).mappings().all()]


# ---------------------------------------------------------------- ended tokens
def note_ended(conn: Connection, digests: Sequence[str], now: datetime) -> int:
    """Note that the tokens ``digests`` ended, in the caller's transaction; the new version.

    The version is raised first: that update locks the row, so the text
    read next is the latest and two transactions noting at once take turns
    (versions follow commits, which a reader relies on). This
    transaction's lines are all kept; older ones are trimmed whole
    versions at a time, so a version in the text is never partial."""
    if not digests:
        raise ValueError("no token to note")
    objects_db.ensure(conn, ENDED_KIND, ENDED_WRITER, now)
    kind = cluster_objects.c.kind == ENDED_KIND
    conn.execute(update(cluster_objects).where(kind).values(version=cluster_objects.c.version + 1, updated=now))
    row = conn.execute(select(cluster_objects.c.version, cluster_objects.c.text).where(kind)).one()
    old = row.text.splitlines()
    cut = max(len(old) + len(digests) - ENDED_KEPT, 0)
    while 0 < cut < len(old) and _version_of(old[cut]) == _version_of(old[cut - 1]):
        cut += 1
    lines = [*old[cut:], *(f"{row.version} {digest}" for digest in digests)]
    conn.execute(update(cluster_objects).where(kind).values(text="".join(line + "\n" for line in lines)))
    return int(row.version)


def ended_version(conn: Connection) -> int:
    """The version of the ended tokens' note (0: no token ever ended early); one row by its key."""
    return objects_db.version(conn, ENDED_KIND)


def ended_after(conn: Connection, version: int) -> tuple[int, list[str] | None]:
    """(the note's version now, the digests of the tokens ended after ``version``);
    None in place of the digests when the note no longer reaches back that
    far (trimmed, or made again)."""
    row = objects_db.get_object(conn, ENDED_KIND)
    current = int(row["version"]) if row is not None else 0
    lines = row["text"].splitlines() if row is not None else []
    if current < version or (current > version and (not lines or _version_of(lines[0]) > version + 1)):
        return current, None
    return current, [line.split(" ", 1)[1] for line in lines if _version_of(line) > version]


def _version_of(line: str) -> int:
    return int(line.split(" ", 1)[0])
