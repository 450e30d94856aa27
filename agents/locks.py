"""Redis locks: one per agent, so that two runs of one agent at once (a slow
run overlapping the next, a message delivered twice) do not both do the
work; and the beat lock (agents/beat.py), so that one beat dispatches.

The lock only saves wasted work: correctness comes from the agents'
conditional updates (``... WHERE lease_expires < :now``, pool deletes that
re-check, the SiteDirector's per-queue row lock), so a run without the lock
(Redis down, lock expired mid-run) is still safe.

The locks are redis-py's own (``redis.lock.Lock``): acquisition is one
atomic ``SET key token NX PX ttl`` with a random token per acquisition,
and release and extension are compare-and-act Lua scripts, so a run whose
lock expired and was taken by another never deletes or extends the
other's. Renewal (the beat's, every tick) adds one thing: a key that is
gone (a restarted Redis without persistence lost it) is taken again with
the same token, since no one else holds it.
The TTL must exceed the longest expected run (agents.celery_app.AgentTiming).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from redis.exceptions import LockNotOwnedError
from redis.lock import Lock

log = logging.getLogger("wms.agents.locks")

KEY_PREFIX = "wms:agent-lock:"


def lock_key(name: str) -> str:
    return KEY_PREFIX + name


def _lock(client: redis.Redis, key: str, ttl: float, token: str | None = None) -> Lock:
    """redis-py's lock on ``key`` (never waiting for it), as held by ``token`` when given."""
    lock = Lock(client, key, timeout=ttl, blocking=False)
    if token is not None:
        lock.local.token = token.encode()
    return lock


def acquire_key(client: redis.Redis, key: str, ttl: float) -> str | None:
    """Take the lock ``key`` for ``ttl`` seconds: its owner token, or None if held."""
    token = uuid.uuid4().hex
    return token if _lock(client, key, ttl).acquire(token=token) else None


def renew_key(client: redis.Redis, key: str, token: str, ttl: float) -> bool:
    """Keep holding ``key`` for ``ttl`` more seconds; False if another holds it now."""
    try:
        return bool(_lock(client, key, ttl, token).extend(ttl, replace_ttl=True))
    except LockNotOwnedError:
        # Gone, or another's: take it again if gone (NX), with the same token.
        return bool(_lock(client, key, ttl).acquire(token=token))


def release_key(client: redis.Redis, key: str, token: str) -> bool:
    """Release ``key`` if ``token`` still owns it; False if it expired or belongs to another."""
    try:
        _lock(client, key, 1, token).release()
    except LockNotOwnedError:
        return False
    return True


def acquire(client: redis.Redis, name: str, ttl: float) -> str | None:
    """Take the lock of agent ``name`` for ``ttl`` seconds: its owner token, or None if held."""
    return acquire_key(client, lock_key(name), ttl)


def release(client: redis.Redis, name: str, token: str) -> bool:
    """Release the lock if ``token`` still owns it; False if it expired or belongs to another."""
    return release_key(client, lock_key(name), token)


@contextmanager
def agent_lock(client: redis.Redis, name: str, ttl: float) -> Iterator[bool]:
    """Hold the lock of agent ``name`` for the block; yields whether it was acquired.

    Released on exit by its owner only; a release that fails (Redis gone)
    is logged, and the lock then expires after ``ttl``.
    """
    token = acquire(client, name, ttl)
    try:
        yield token is not None
    finally:
        if token is not None:
            try:
                if not release(client, name, token):
                    log.warning("lock of agent %s expired before the run ended (ttl %ss)", name, ttl)
            except redis.RedisError as exc:
                log.warning("could not release the lock of agent %s: %s", name, exc)
