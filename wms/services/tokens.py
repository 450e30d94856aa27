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
its pilot runs (:func:`renew_pilot_token`), and its pilot declares there
its slots and how it isolates payloads: the token then never holds more
slots than declared (core/match/pilot_slots.py), and a later declaration
may lower them, never raise them.

Revocation (docs/security.md, "Tokens end"): each server process keeps
the tokens it verified (VerifiedTokens), so that a request needs no
database read to authenticate. A token ended early (revoked) is
noted in one shared row in the same transaction (db/tokens.py); a
process trusts what it keeps only while its last look at that row began
less than REVOCATION_WINDOW ago, and each look forgets exactly the tokens
ended since the one before. So a revoked token is refused by every
worker of every server within that window, and the request path still
reads nothing: under load the next look is made on a thread of its own
before the window runs out; after a quiet spell the first request makes
it (one read of one row by its key) before it trusts the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping

from sqlalchemy import Connection
from sqlalchemy.engine import Engine

from wms.core.durations import format_duration
from wms.core.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from wms.core.pilot_backends import ISOLATION_MODES
from wms.core.identity import Identity
from wms.core.match import pilot_slots
from wms.core.scopes import PILOT_PREFIX as PILOT_SCOPE
from wms.db.engine import reading
from wms.db import matching as match_db
from wms.db import pilots as pilots_db
from wms.db import tokens as tokens_db
from wms.services.access import PILOT, TOKEN_ROLES, may_act_for_pilot
from wms.services.caches import VerifiedTokens
from wms.services.retry import run_in_transaction

PREFIX = "wms_"
# Hex digits of the digest that name a token (48 bits: unique in practice;
# `revoke` refuses an ambiguous id anyway).
TOKEN_ID_LENGTH = 12
_TOKEN_ID = re.compile(r"^[0-9a-f]{4,64}$")

VALID, EXPIRED, REVOKED = "valid", "expired", "revoked"

# Seconds within which a token ended early in any process is refused by
# every server process: a look at the note of ended tokens older than
# this, and the verified tokens are not trusted.
REVOCATION_WINDOW = 1.0
# Age of the last look past which a request starts the next one on a
# thread of its own, so that under load no request waits for it.
LOOK_AHEAD = REVOCATION_WINDOW / 2

log = logging.getLogger(__name__)


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
    # Job tokens are not stored: the Matcher mints them (services/job_tokens.py).
    if identity.role not in TOKEN_ROLES:
        raise InvalidInput(f"unknown role {identity.role!r} (one of {', '.join(TOKEN_ROLES)})")
    for name, value in (("user", identity.user), ("group", identity.group), ("vo", identity.vo)):
        if not value or not value.strip():
            raise InvalidInput(f"{name} must not be empty")
    if identity.pilot_id is not None and identity.role != PILOT:
        raise InvalidInput("only a pilot-role token is bound to a pilot")
    if identity.slots is not None and (identity.role != PILOT or identity.slots < 1):
        raise InvalidInput("only a pilot-role token declares slots, at least 1")


def store_token(conn: Connection, identity: Identity, now: datetime, *, description: str = "",
                lifetime: timedelta | None = None) -> str:
    """A new token for ``identity`` (bound to ``identity.pilot_id`` if set, holding
    at most ``identity.slots``), stored on the caller's connection; the only
    time the token itself is seen."""
    _check_identity(identity)
    token = PREFIX + secrets.token_urlsafe(32)
    expires = now + lifetime if lifetime is not None else None
    tokens_db.add_token(conn, token_hash(token), identity.user, identity.group, identity.vo, identity.role,
                        description, now, expires, pilot_id=identity.pilot_id, slots=identity.slots)
    _open_pilot_slots(conn, identity.pilot_id, identity.slots)
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
                    pilot_id=row["pilot_id"], token_hash=row["token_hash"], slots=row.get("slots"))


def cached_identity(engine: Engine, token: str, now: datetime, cache: VerifiedTokens) -> Identity | None:
    """The identity behind ``token`` when ``cache`` holds it as valid now and
    may be trusted (no database read, so no thread needed), else None: ask
    ``authenticate``. Past LOOK_AHEAD it starts the next look at the ended
    tokens on a thread of its own."""
    if not token or cache.ttl <= 0:
        return None
    age = cache.age()
    if age > LOOK_AHEAD and cache.looking.acquire(blocking=False):
        threading.Thread(target=_look_aside, args=(engine, cache), name="wms-ended-tokens", daemon=True).start()
    if age > REVOCATION_WINDOW:
        return None
    row = cache.get(token_hash(token))
    return identity_of(row) if row is not None and refusal(row, now) is None else None


def authenticate(engine: Engine, token: str, now: datetime, cache: VerifiedTokens | None = None) -> Identity:
    """The identity behind a bearer token, or Unauthorized saying why not.

    With ``cache``, a token verified within its ttl needs no database read
    while the cache is trusted (a look at the ended tokens is made first
    if it is not); one that no longer looks valid there is read again
    before it is refused.
    """
    if not token:
        raise Unauthorized("no bearer token given")
    digest = token_hash(token)
    row, generation = None, None
    if cache is not None and cache.ttl > 0:
        if not cache.trusted(REVOCATION_WINDOW):
            with cache.looking:             # one look at a time: those waiting find it made
                if not cache.trusted(REVOCATION_WINDOW):
                    look_at_ended_tokens(engine, cache)
        generation = cache.generation       # before the read: a row read before a forget is not kept
        row = cache.get(digest)
    if row is None or refusal(row, now) is not None:
        with reading(engine) as conn:
            row = tokens_db.get_token(conn, digest)
        if row is not None and cache is not None and cache.ttl > 0 and refusal(row, now) is None:
            cache.put(digest, row, generation)
    if row is None:
        raise Unauthorized("invalid token (unknown to this server)")
    why = refusal(row, now)
    if why is not None:
        raise Unauthorized(why)
    return identity_of(row)


def look_at_ended_tokens(engine: Engine, cache: VerifiedTokens) -> None:
    """Read the note of ended tokens and make ``cache`` forget those ended since
    its last look: one read of one row by its key, a second one when it moved."""
    began = time.monotonic()
    known = cache.ended_version
    with reading(engine) as conn:
        version = tokens_db.ended_version(conn)
        ended: list[str] | None = []
        if known is not None and version != known:
            version, ended = tokens_db.ended_after(conn, known)
    cache.looked_at(began, version, ended)


def _look_aside(engine: Engine, cache: VerifiedTokens) -> None:
    """A look made on a thread of its own (``cache.looking`` is held for it)."""
    try:
        look_at_ended_tokens(engine, cache)
    except Exception:  # noqa: BLE001 - a thread of its own: say it; requests past the window read it themselves
        log.warning("reading the note of ended tokens failed", exc_info=True)
    finally:
        cache.looking.release()


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
        "Slots": row.get("slots"),
        "Isolation": row.get("isolation") or "",
    }


def list_tokens(engine: Engine, now: datetime) -> list[dict[str, Any]]:
    with reading(engine) as conn:
        rows = tokens_db.list_tokens(conn)
    return [token_view(row, now) for row in rows]


def revoke_token(engine: Engine, wanted: str, now: datetime, cache: VerifiedTokens | None = None) -> dict[str, Any]:
    """Revoke the token whose id (or a longer prefix of its digest) is ``wanted``; its view.

    ``cache``: this process's verified tokens, which forget it at once;
    every other server process refuses it within REVOCATION_WINDOW."""
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
        _open_pilot_slots(conn, pilot_id, row["slots"])     # declared before it was bound
        return pilot_id

    bound = run_in_transaction(engine, work)
    if cache is not None:
        cache.forget(identity.token_hash)     # the next request reads the bound row
    identity = dataclasses.replace(identity, pilot_id=bound)
    check_pilot(identity, pilot_id)
    return identity


def check_pilot(identity: Identity, pilot_id: str) -> None:
    """Forbidden unless the caller may speak for ``pilot_id`` (its own token, or an operator or manager)."""
    if not may_act_for_pilot(identity, pilot_id):
        held = f"pilot {identity.pilot_id!r}'s" if identity.pilot_id else "not bound to a pilot"
        raise Forbidden(f"this token is {held}: it cannot speak for pilot {pilot_id!r}")


def declared_slots(identity: Identity) -> int | None:
    """The most slots the caller may hold at once when it asks for jobs: its
    pilot's declaration for a pilot token; None (no cap) for operators and
    managers, and for a pilot token without a declaration (older pilots)."""
    return identity.slots if identity.role == PILOT else None


@dataclass(frozen=True)
class Declaration:
    """What a pilot says of itself when it renews its token (every part optional)."""

    slots: int | None = None
    isolation: str | None = None
    isolation_note: str | None = None


def renew_pilot_token(engine: Engine, identity: Identity, now: datetime, lifetime: timedelta,
                      declaration: Declaration = Declaration(), cache: VerifiedTokens | None = None,
                      ) -> dict[str, Any]:
    """Push the caller's pilot token's end to ``now + lifetime`` (never earlier
    than it was) and store what its pilot declares.

    Refused (Forbidden) when the token's pilot is a SiteDirector pilot that
    has ended (Done, Failed, Aborted): a pilot the director killed or gave
    up on cannot keep itself alive; and when it declares more slots than
    it (or the SiteDirector) declared before (:func:`_declare`). A refused
    renewal changes nothing. A token without an end stays so. ``cache``:
    this process's verified tokens, which read the declaration again at
    once (other server processes within their token_cache_seconds).
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
        pilot = pilots_db.get_pilot(conn, row["pilot_id"]) if row["pilot_id"] is not None else None
        if pilot is not None and pilot["state"] not in pilots_db.ACTIVE_STATES:
            raise Forbidden(f"pilot {row['pilot_id']} has ended ({pilot['state']}): its token is not renewed")
        row = _declare(conn, row, declaration, pilot is not None)
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
                "Lifetime": format_duration(lifetime), "Slots": row["slots"], "Isolation": row["isolation"]}

    answer = run_in_transaction(engine, work)
    if cache is not None and (declaration.slots is not None or declaration.isolation is not None):
        cache.forget(identity.token_hash)     # the next request reads the declaration
    return answer


def _declare(conn: Connection, row: dict[str, Any], declaration: Declaration, director_pilot: bool,
             ) -> dict[str, Any]:
    """Store the declaration on the token (and a SiteDirector pilot's isolation on
    its pilot row); the token's row as it is now.

    Slots: the first declaration fixes them; a later one may declare the
    same or fewer, never more (Forbidden): a stolen token cannot raise
    its own cap. One conditional update decides, so two renewals at once
    cannot either. Isolation is what the pilot does now: it may change.
    """
    if declaration.isolation_note is not None and declaration.isolation is None:
        raise InvalidInput("isolation_note goes with isolation")
    if declaration.isolation is not None and declaration.isolation not in ISOLATION_MODES:
        raise InvalidInput(f"isolation must be one of {', '.join(ISOLATION_MODES)}, got {declaration.isolation!r}")
    if declaration.slots is not None:
        if declaration.slots < 1:
            raise InvalidInput(f"slots must be at least 1, got {declaration.slots}")
        if not tokens_db.declare_slots(conn, row["token_hash"], declaration.slots):
            held = tokens_db.get_token(conn, row["token_hash"]) or row
            name = row["pilot_id"] or f"of token {token_id(row['token_hash'])}"
            raise Forbidden(f"pilot {name} declared {held['slots']} slots; it cannot take {declaration.slots} now")
        row = {**row, "slots": declaration.slots}
        _open_pilot_slots(conn, row["pilot_id"], row["slots"])
    if declaration.isolation is not None:
        tokens_db.set_isolation(conn, row["token_hash"], declaration.isolation, declaration.isolation_note)
        if director_pilot:
            pilots_db.set_isolation(conn, row["pilot_id"], declaration.isolation, declaration.isolation_note)
        row = {**row, "isolation": declaration.isolation, "isolation_note": declaration.isolation_note}
    return row


def _open_pilot_slots(conn: Connection, pilot_id: str | None, slots: int | None) -> None:
    """The usage row a pilot's claims debit (core/match/pilot_slots.py), made when
    its slots are known and it is bound, so that the Matcher never makes one."""
    if pilot_id is not None and slots is not None:
        match_db.ensure_usage_rows(conn, [pilot_slots.usage_key(pilot_id)])


def clean_pilot_slots(engine: Engine, now: datetime) -> int:
    """Delete the usage rows of pilots whose token has ended (revoked or
    expired) and that hold nothing; how many went.

    Each declaring pilot has its own row, so they would otherwise
    accumulate for ever. Such a pilot never asks again (no other token can
    bind to its id), and a claim that still came, from a server that kept
    a revoked token for up to REVOCATION_WINDOW, finds no row and is refused as
    if the pilot were full. Run by the submit_pool_cleaner agent."""
    def work(conn: Connection) -> int:
        scopes = match_db.idle_rows(conn, PILOT_SCOPE, pilot_slots.RESOURCE)
        by_pilot = {scope[len(PILOT_SCOPE):]: scope for scope in scopes}
        live = tokens_db.live_pilots(conn, list(by_pilot), now)
        return match_db.delete_idle_rows(conn, [s for p, s in by_pilot.items() if p not in live],
                                         pilot_slots.RESOURCE)

    return run_in_transaction(engine, work)


def _time(value: datetime) -> str:
    return value.isoformat(timespec="seconds")
