"""Bearer tokens: created for a user, group, VO and role; stored hashed.

Only the SHA-256 of a token is kept, so a copy of the database grants
nothing. Tokens are random (256 bits), so a plain digest suffices: there
is nothing to brute-force as with passwords.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from wms.core.errors import InvalidInput, Unauthorized
from wms.core.identity import Identity
from wms.db.engine import reading
from wms.db import tokens as tokens_db
from wms.services.access import ROLES
from wms.services.retry import run_in_transaction

PREFIX = "wms_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(
    engine: Engine,
    identity: Identity,
    now: datetime,
    *,
    description: str = "",
    lifetime: timedelta | None = None,
) -> str:
    """A new token for ``identity``; the only time the token itself is seen."""
    if identity.role not in ROLES:
        raise InvalidInput(f"unknown role {identity.role!r} (one of {', '.join(ROLES)})")
    for name, value in (("user", identity.user), ("group", identity.group), ("vo", identity.vo)):
        if not value or not value.strip():
            raise InvalidInput(f"{name} must not be empty")
    token = PREFIX + secrets.token_urlsafe(32)
    expires = now + lifetime if lifetime is not None else None

    def store(conn) -> None:
        tokens_db.add_token(
            conn, token_hash(token), identity.user, identity.group, identity.vo, identity.role, description, now, expires
        )

    run_in_transaction(engine, store)
    return token


def authenticate(engine: Engine, token: str, now: datetime) -> Identity:
    """The identity behind a bearer token, or Unauthorized."""
    if not token:
        raise Unauthorized("no bearer token given")
    with reading(engine) as conn:
        row = tokens_db.get_token(conn, token_hash(token), now)
    if row is None:
        raise Unauthorized("invalid or expired token")
    return Identity(user=row["user"], group=row["user_group"], vo=row["vo"], role=row["role"])
