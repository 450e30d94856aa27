"""Queries on bearer tokens, stored only as their SHA-256 digest.

Functions take the caller's connection and never commit. Whether a token
is still good (expired, revoked) is decided by wms.services.tokens, which
needs the row to say why not.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from wms.db.schema import tokens


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
) -> None:
    """Store a token (by its digest) for ``user`` in ``group`` with ``role``;
    ``expires`` None means never; ``pilot_id`` binds it to a pilot."""
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
        )
    )


def get_token(conn: Connection, token_hash: str) -> dict[str, Any] | None:
    """The token's row (token_hash, user, user_group, vo, role, description,
    created, expires, pilot_id, revoked), expired or revoked ones too; None if unknown."""
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
    return conn.execute(stmt).rowcount == 1


def revoke_pilot_tokens(conn: Connection, pilot_ids: Sequence[str], now: datetime) -> int:
    """Revoke every token bound to one of ``pilot_ids`` (the pilots ended); how many."""
    if not pilot_ids:
        return 0
    stmt = (update(tokens).where(tokens.c.pilot_id.in_(list(pilot_ids)), tokens.c.revoked.is_(None))
            .values(revoked=now))
    return conn.execute(stmt).rowcount


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


def delete_token(conn: Connection, token_hash: str) -> bool:
    """Forget a token; True if it existed."""
    return conn.execute(delete(tokens).where(tokens.c.token_hash == token_hash)).rowcount > 0
