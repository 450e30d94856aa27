"""Verified tokens are kept for token_cache_seconds: no database read per
request, a revocation seen within that time, a renewed token never refused
for its old end."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from wms.core.errors import Unauthorized
from wms.core.identity import Identity
from wms.db import tokens as tokens_db
from wms.services.caches import VerifiedTokens
from wms.services.retry import run_in_transaction
from wms.services.tokens import authenticate, create_token, token_hash

pytestmark = pytest.mark.databases

PILOT = Identity(user="p", group="lhcb_pilot", vo="lhcb", role="pilot")


def revoke(engine, token, now):
    run_in_transaction(engine, lambda conn: tokens_db.revoke(conn, token_hash(token), now))


def test_a_revoked_token_is_refused_once_its_cache_time_is_over(engine, now):
    token = create_token(engine, PILOT, now, lifetime=timedelta(hours=1))
    cache = VerifiedTokens(ttl=0.5)
    assert authenticate(engine, token, now, cache).user == "p"
    revoke(engine, token, now)
    assert authenticate(engine, token, now, cache).user == "p"        # within the cache time: still known
    time.sleep(0.6)
    with pytest.raises(Unauthorized, match="was revoked"):
        authenticate(engine, token, now, cache)


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
    reads = []
    from sqlalchemy import event
    event.listen(engine, "before_cursor_execute", lambda *a: reads.append(a[2]))
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
