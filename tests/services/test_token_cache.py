"""Verified tokens are kept for token_cache_seconds: no database read per
request, a token ended in another process refused within the revocation
window (one look at the note of ended tokens, which forgets exactly
those), a renewed token never refused for its old end."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from wms.core.errors import Unauthorized
from wms.core.identity import Identity
from wms.db import tokens as tokens_db
from wms.services.caches import VerifiedTokens
from wms.services.retry import run_in_transaction
from wms.services.tokens import (
    LOOK_AHEAD, REVOCATION_WINDOW, authenticate, cached_identity, create_token, look_at_ended_tokens, token_hash,
)

pytestmark = pytest.mark.databases

PILOT = Identity(user="p", group="lhcb_pilot", vo="lhcb", role="pilot")


def revoke(engine, token, now):
    run_in_transaction(engine, lambda conn: tokens_db.revoke(conn, token_hash(token), now))


def statements(engine) -> list[str]:
    """The statements ``engine`` sends from now on (a list that grows), but
    the BEGIN DEFERRED that starts a read on SQLite (db/engine.py), which
    goes with the read that follows."""
    from sqlalchemy import event

    sent: list[str] = []
    event.listen(engine, "before_cursor_execute",
                 lambda *a: None if a[2].startswith("BEGIN") else sent.append(a[2]))
    return sent


def test_a_token_revoked_elsewhere_is_refused_within_the_revocation_window(engine, now):
    token = create_token(engine, PILOT, now, lifetime=timedelta(hours=1))
    cache = VerifiedTokens(ttl=3600)
    assert authenticate(engine, token, now, cache).user == "p"
    revoke(engine, token, now)                                         # as another process would
    assert authenticate(engine, token, now, cache).user == "p"        # the last look was just now: kept
    time.sleep(REVOCATION_WINDOW + 0.05)
    with pytest.raises(Unauthorized, match="was revoked"):
        authenticate(engine, token, now, cache)


def test_a_look_forgets_exactly_the_tokens_ended_since_the_last_one(engine, now):
    kept, revoked = (create_token(engine, PILOT, now, lifetime=timedelta(hours=1)) for _ in range(2))
    cache = VerifiedTokens(ttl=3600)
    for token in (kept, revoked):
        authenticate(engine, token, now, cache)
    revoke(engine, revoked, now)
    look_at_ended_tokens(engine, cache)
    assert cache.get(token_hash(kept)) is not None
    assert cache.get(token_hash(revoked)) is None
    sent = statements(engine)
    look_at_ended_tokens(engine, cache)                                # nothing ended since: one read of one row
    assert len(sent) == 1 and "cluster_objects" in sent[0]
    with pytest.raises(Unauthorized, match="was revoked"):
        authenticate(engine, revoked, now, cache)


def test_a_process_further_behind_than_the_note_reaches_forgets_every_token(engine, now, monkeypatch):
    monkeypatch.setattr(tokens_db, "ENDED_KEPT", 2)
    kept = create_token(engine, PILOT, now, lifetime=timedelta(hours=1))
    cache = VerifiedTokens(ttl=3600)
    authenticate(engine, kept, now, cache)
    for n in range(3):                                                 # three other tokens end: the note keeps two
        run_in_transaction(engine, lambda conn, n=n: tokens_db.note_ended(conn, [f"{n:064x}"], now))
    look_at_ended_tokens(engine, cache)
    assert cache.get(token_hash(kept)) is None                         # it cannot tell which: every row goes
    assert authenticate(engine, kept, now, cache).user == "p"


def test_a_row_read_before_a_forget_is_not_kept():
    cache = VerifiedTokens(ttl=3600)
    generation = cache.generation                                      # a request starts reading the row...
    cache.forget("a")                                                  # ...the token ends meanwhile
    cache.put("a", {"x": 1}, generation)
    assert cache.get("a") is None
    cache.put("a", {"x": 1}, cache.generation)
    assert cache.get("a") == {"x": 1}


def test_past_the_window_the_cache_is_not_trusted_and_past_look_ahead_a_look_starts_aside(engine, now):
    token = create_token(engine, PILOT, now, lifetime=timedelta(hours=1))
    cache = VerifiedTokens(ttl=3600)
    authenticate(engine, token, now, cache)
    assert cached_identity(engine, token, now, cache).user == "p"
    cache.looked -= REVOCATION_WINDOW + 0.1                            # a quiet spell
    assert cached_identity(engine, token, now, cache) is None          # ask authenticate, which looks first
    cache.looking.acquire()                                            # the look started aside: wait for it
    cache.looking.release()
    assert cache.trusted(REVOCATION_WINDOW)
    cache.looked -= LOOK_AHEAD + 0.1                                   # under load: still trusted, looked at aside
    before = cache.looked
    assert cached_identity(engine, token, now, cache).user == "p"
    cache.looking.acquire()
    cache.looking.release()
    assert cache.looked > before


def test_without_a_cache_time_a_revocation_counts_at_once(engine, now):
    token = create_token(engine, PILOT, now, lifetime=timedelta(hours=1))
    cache = VerifiedTokens(ttl=0)
    authenticate(engine, token, now, cache)
    revoke(engine, token, now)
    with pytest.raises(Unauthorized, match="was revoked"):
        authenticate(engine, token, now, cache)


def test_a_kept_token_past_its_old_end_is_read_again_not_refused(engine, now):
    token = create_token(engine, PILOT, now, lifetime=timedelta(seconds=60))
    cache = VerifiedTokens(ttl=3600)
    authenticate(engine, token, now, cache)
    run_in_transaction(engine, lambda conn: tokens_db.set_expiry(conn, token_hash(token), now + timedelta(hours=2)))
    later = now + timedelta(minutes=5)                                 # past the end the cache holds
    assert authenticate(engine, token, later, cache).user == "p"
    with pytest.raises(Unauthorized, match="expired"):
        authenticate(engine, token, now + timedelta(hours=3), cache)


def test_a_verified_token_needs_no_database_read(engine, now):
    token = create_token(engine, PILOT, now, lifetime=timedelta(hours=1))
    cache = VerifiedTokens(ttl=3600)
    authenticate(engine, token, now, cache)
    engine.dispose()
    reads = statements(engine)
    for _ in range(5):
        authenticate(engine, token, now, cache)
    assert reads == []


def test_the_cache_keeps_forgets_and_bounds_its_rows():
    cache = VerifiedTokens(ttl=3600)
    cache.put("a", {"x": 1})
    assert cache.get("a") == {"x": 1} and cache.get("b") is None
    cache.forget("a")
    assert cache.get("a") is None
    cache.LIMIT = 3
    for key in "wxyz":
        cache.put(key, {})
    assert cache.get("w") is None and cache.get("z") == {}           # a flood of tokens empties it, no growth
