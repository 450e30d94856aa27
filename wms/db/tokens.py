"""Queries on bearer tokens, stored only as their SHA-256 digest.

Functions take the caller's connection and never commit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select

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
) -> None:
    """Store a token (by its digest) for ``user`` in ``group`` with ``role``; ``expires`` None means never."""
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
        )
    )


def get_token(conn: Connection, token_hash: str, now: datetime) -> dict[str, Any] | None:
    """The token's row (token_hash, user, user_group, vo, role, description, created, expires); None if unknown or expired at ``now``."""
    stmt = select(tokens).where(
        tokens.c.token_hash == token_hash,
        tokens.c.expires.is_(None) | (tokens.c.expires > now),
    )
    row = conn.execute(stmt).mappings().one_or_none()
    return dict(row) if row is not None else None


def delete_token(conn: Connection, token_hash: str) -> bool:
    """Forget a token; True if it existed."""
    return conn.execute(delete(tokens).where(tokens.c.token_hash == token_hash)).rowcount > 0
