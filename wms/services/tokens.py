"""Bearer tokens: created for a user, group, VO and role; stored hashed;
expiring, revocable, and for pilots bound to one pilot.

Only the SHA-256 of a token is kept, so a copy of the database grants
nothing. Tokens are random (256 bits), so a plain digest suffices: there
is nothing to brute-force as with passwords. A token's public id (what
`wms admin token list` shows and `revoke` takes) is the start of that
digest: it names the token without revealing it.

Pilots (docs/security.md, "Pilots and tokens"): a pilot-role token speaks
for one pilot. The SiteDirector issues each pilot its own, bound from the
start; a token made by hand (`wms admin token create --role pilot`) is
bound by its first request naming a pilot (:func:`bind_pilot`), to a
pilot id no other token holds. A bound pilot token renews itself while
its pilot runs (:func:`renew_pilot_token`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime, timedelta
from typing import Any, Mapping

from sqlalchemy import Connection
from sqlalchemy.engine import Engine

from wms.core.durations import format_duration
from wms.core.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from wms.core.identity import Identity
from wms.db.engine import reading
from wms.db import pilots as pilots_db
from wms.db import tokens as tokens_db
from wms.services.access import PILOT, ROLES, may_act_for_pilot
from wms.services.caches import VerifiedTokens
from wms.services.retry import run_in_transaction

PREFIX = "wms_"
# Hex digits of the digest that name a token (48 bits: unique in practice;
# `revoke` refuses an ambiguous id anyway).
TOKEN_ID_LENGTH = 12
_TOKEN_ID = re.compile(r"^[0-9a-f]{4,64}$")

VALID, EXPIRED, REVOKED = "valid", "expired", "revoked"


def default_lifetime(settings: Any, role: str) -> timedelta:
    """How long a new token of ``role`` lives unless told: wms.yaml
    ``pilot_token_lifetime`` for pilots, ``token_lifetime`` for the others."""
    return timedelta(seconds=settings.pilot_token_lifetime if role == PILOT else settings.token_lifetime)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_id(digest: str) -> str:
    """The public id of the token with this digest."""
    return digest[:TOKEN_ID_LENGTH]


def _check_identity(identity: Identity) -> None:
    if identity.role not in ROLES:
        raise InvalidInput(f"unknown role {identity.role!r} (one of {', '.join(ROLES)})")
    for name, value in (("user", identity.user), ("group", identity.group), ("vo", identity.vo)):
        if not value or not value.strip():
            raise InvalidInput(f"{name} must not be empty")
    if identity.pilot_id is not None and identity.role != PILOT:
        raise InvalidInput("only a pilot-role token is bound to a pilot")


def store_token(conn: Connection, identity: Identity, now: datetime, *, description: str = "",
                lifetime: timedelta | None = None) -> str:
    """A new token for ``identity`` (bound to ``identity.pilot_id`` if set),
    stored on the caller's connection; the only time the token itself is seen."""
    _check_identity(identity)
    token = PREFIX + secrets.token_urlsafe(32)
    expires = now + lifetime if lifetime is not None else None
    tokens_db.add_token(conn, token_hash(token), identity.user, identity.group, identity.vo, identity.role,
                        description, now, expires, pilot_id=identity.pilot_id)
    return token


def create_token(
    engine: Engine,
    identity: Identity,
    now: datetime,
    *,
    description: str = "",
    lifetime: timedelta | None = None,
) -> str:
    """A new token for ``identity``, in its own transaction; ``lifetime`` None: no expiry."""
    _check_identity(identity)
    return run_in_transaction(engine, lambda conn: store_token(conn, identity, now, description=description,
                                                                lifetime=lifetime))


# ---------------------------------------------------------------- checking
def state(row: Mapping[str, Any], now: datetime) -> str:
    """valid, expired or revoked."""
    if row["revoked"] is not None:
        return REVOKED
    if row["expires"] is not None and row["expires"] <= now:
        return EXPIRED
    return VALID


def refusal(row: Mapping[str, Any], now: datetime) -> str | None:
    """Why this token no longer opens the API (one line), or None."""
    name = token_id(row["token_hash"])
    kind = state(row, now)
    if kind == REVOKED:
        return f"token {name} was revoked at {_time(row['revoked'])}"
    if kind == EXPIRED:
        return f"token {name} expired at {_time(row['expires'])}; ask for a new one"
    return None


def identity_of(row: Mapping[str, Any]) -> Identity:
    return Identity(user=row["user"], group=row["user_group"], vo=row["vo"], role=row["role"],
                    pilot_id=row["pilot_id"], token_hash=row["token_hash"])


def cached_identity(token: str, now: datetime, cache: VerifiedTokens) -> Identity | None:
    """The identity behind ``token`` when ``cache`` holds it as valid now (no
    database read, so no thread needed), else None: ask ``authenticate``."""
    row = cache.get(token_hash(token)) if token else None
    return identity_of(row) if row is not None and refusal(row, now) is None else None


def authenticate(engine: Engine, token: str, now: datetime, cache: VerifiedTokens | None = None) -> Identity:
    """The identity behind a bearer token, or Unauthorized saying why not.

    With ``cache``, a token verified within its ttl needs no database read;
    one that no longer looks valid there is read again before it is refused.
    """
    if not token:
        raise Unauthorized("no bearer token given")
    digest = token_hash(token)
    row = cache.get(digest) if cache is not None else None
    if row is None or refusal(row, now) is not None:
        with reading(engine) as conn:
            row = tokens_db.get_token(conn, digest)
        if row is not None and cache is not None and refusal(row, now) is None:
            cache.put(digest, row)
    if row is None:
        raise Unauthorized("invalid token (unknown to this server)")
    why = refusal(row, now)
    if why is not None:
        raise Unauthorized(why)
    return identity_of(row)


# ---------------------------------------------------------------- administration
def token_view(row: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A token as `wms admin token list` shows it (never the token itself)."""
    return {
        "ID": token_id(row["token_hash"]),
        "User": row["user"],
        "Group": row["user_group"],
        "VO": row["vo"],
        "Role": row["role"],
        "Pilot": row["pilot_id"] or "",
        "Created": _time(row["created"]),
        "Expires": _time(row["expires"]) if row["expires"] is not None else "never",
        "State": state(row, now),
        "Description": row["description"],
    }


def list_tokens(engine: Engine, now: datetime) -> list[dict[str, Any]]:
    with reading(engine) as conn:
        rows = tokens_db.list_tokens(conn)
    return [token_view(row, now) for row in rows]


def revoke_token(engine: Engine, wanted: str, now: datetime, cache: VerifiedTokens | None = None) -> dict[str, Any]:
    """Revoke the token whose id (or a longer prefix of its digest) is ``wanted``; its view.

    ``cache``: this process's verified tokens, which forget it at once;
    other server processes refuse it within their token_cache_seconds."""
    prefix = wanted.strip().lower()
    if not _TOKEN_ID.match(prefix):
        raise InvalidInput(f"not a token id: {wanted!r} (the ID column of `wms admin token list`)")

    def work(conn: Connection) -> dict[str, Any]:
        rows = tokens_db.tokens_with_prefix(conn, prefix)
        if not rows:
            raise NotFound(f"no token with id {prefix}")
        if len(rows) > 1:
            raise InvalidInput(f"{len(rows)} tokens have ids starting with {prefix}: give more digits")
        [row] = rows
        if not tokens_db.revoke(conn, row["token_hash"], now):
            raise InvalidInput(f"token {token_id(row['token_hash'])} was already revoked at {_time(row['revoked'])}")
        if cache is not None:
            cache.forget(row["token_hash"])
        return token_view({**row, "revoked": now}, now)

    return run_in_transaction(engine, work)


# ---------------------------------------------------------------- pilots
def bind_pilot(engine: Engine, identity: Identity, pilot_id: str, cache: VerifiedTokens | None = None) -> Identity:
    """The caller as the pilot ``pilot_id``: a pilot token must speak for it.

    Operators and managers may speak for any pilot. A pilot token not yet
    bound (made by hand) is bound here to ``pilot_id``, unless that id is
    a SiteDirector pilot's or another token's: a new token can never take
    over a pilot that exists. Forbidden otherwise.
    """
    if identity.role != PILOT:
        return identity
    if not pilot_id:
        raise InvalidInput("pilot_id must be given")
    if identity.pilot_id is not None:
        check_pilot(identity, pilot_id)
        return identity
    if identity.token_hash is None:
        raise Forbidden("this pilot token is not bound to a pilot")

    def work(conn: Connection) -> str | None:
        row = tokens_db.get_token(conn, identity.token_hash or "")
        if row is None:
            raise Forbidden("this pilot token is unknown")
        if row["pilot_id"] is not None:
            return row["pilot_id"]
        if pilots_db.get_pilot(conn, pilot_id) is not None or tokens_db.pilot_bound_elsewhere(
                conn, pilot_id, row["token_hash"]):
            raise Forbidden(f"pilot id {pilot_id!r} belongs to another pilot's token: choose another --pilot-id")
        tokens_db.bind_pilot(conn, row["token_hash"], pilot_id)
        return pilot_id

    bound = run_in_transaction(engine, work)
    if cache is not None:
        cache.forget(identity.token_hash)     # the next request reads the bound row
    identity = Identity(user=identity.user, group=identity.group, vo=identity.vo, role=identity.role,
                        pilot_id=bound, token_hash=identity.token_hash)
    check_pilot(identity, pilot_id)
    return identity


def check_pilot(identity: Identity, pilot_id: str) -> None:
    """Forbidden unless the caller may speak for ``pilot_id`` (its own token, or an operator or manager)."""
    if not may_act_for_pilot(identity, pilot_id):
        held = f"pilot {identity.pilot_id!r}'s" if identity.pilot_id else "not bound to a pilot"
        raise Forbidden(f"this token is {held}: it cannot speak for pilot {pilot_id!r}")


def renew_pilot_token(engine: Engine, identity: Identity, now: datetime, lifetime: timedelta) -> dict[str, Any]:
    """Push the caller's pilot token's end to ``now + lifetime`` (never earlier than it was).

    Refused (Forbidden) when the token's pilot is a SiteDirector pilot that
    has ended (Done, Failed, Aborted): a pilot the director killed or gave
    up on cannot keep itself alive. A token without an end stays so.
    """
    if identity.role != PILOT or identity.token_hash is None:
        raise Forbidden("only a pilot renews its own token")

    def work(conn: Connection) -> dict[str, Any]:
        row = tokens_db.get_token(conn, identity.token_hash or "")
        if row is None:
            raise Forbidden("this pilot token is unknown")
        why = refusal(row, now)
        if why is not None:
            raise Unauthorized(why)
        if row["pilot_id"] is not None:
            pilot = pilots_db.get_pilot(conn, row["pilot_id"])
            if pilot is not None and pilot["state"] not in pilots_db.ACTIVE_STATES:
                raise Forbidden(f"pilot {row['pilot_id']} has ended ({pilot['state']}): its token is not renewed")
            if pilot is not None and pilot["state"] == pilots_db.SUBMITTED:
                # A pilot renews first thing when it starts: it runs now, whenever the SiteDirector next looks.
                pilots_db.set_state(conn, row["pilot_id"], pilots_db.RUNNING, now)
        expires = row["expires"]
        if expires is not None:
            expires = max(expires, now + lifetime)
            tokens_db.set_expiry(conn, row["token_hash"], expires)
        return {"TokenID": token_id(row["token_hash"]), "PilotID": row["pilot_id"],
                "Expires": _time(expires) if expires is not None else None,
                "ExpiresIn": int((expires - now).total_seconds()) if expires is not None else None,
                "Lifetime": format_duration(lifetime)}

    return run_in_transaction(engine, work)


def _time(value: datetime) -> str:
    return value.isoformat(timespec="seconds")
