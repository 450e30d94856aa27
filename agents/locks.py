"""Redis locks: one per agent, so that two runs of one agent at once (a slow
run overlapping the next, a message delivered twice) do not both do the
work; and the beat lock (agents/beat.py), so that one beat dispatches.

The lock only saves wasted work: correctness comes from the agents'
conditional updates (``... WHERE lease_expires < :now``, pool deletes that
re-check, the SiteDirector's per-queue row lock), so a run without the lock
(Redis down, lock expired mid-run) is still safe.

Acquisition is one atomic ``SET key token NX PX ttl``; the token is random
per acquisition, and release is a compare-and-delete in a Lua script, so a
run whose lock expired and was taken by another never deletes the other's.
The TTL must exceed the longest expected run (agents.celery_app.AgentTiming).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis

log = logging.getLogger("wms.agents.locks")

KEY_PREFIX = "wms:agent-lock:"

# Delete the key only if it still holds our token.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

# Extend the key's expiry only if it still holds our token; take it again if
# it is gone (a restarted Redis without persistence lost it): 1 = held.
_RENEW = """
local owner = redis.call('get', KEYS[1])
if owner == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
if not owner then
    if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
        return 1
    end
end
return 0
"""


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def lock_key(name: str) -> str:
    return KEY_PREFIX + name


def acquire_key(client: redis.Redis, key: str, ttl: float) -> str | None:
    """Take the lock ``key`` for ``ttl`` seconds: its owner token, or None if held."""
    token = uuid.uuid4().hex
    if client.set(key, token, nx=True, px=_ms(ttl)):
        return token
    return None


def renew_key(client: redis.Redis, key: str, token: str, ttl: float) -> bool:
    """Keep holding ``key`` for ``ttl`` more seconds; False if another holds it now."""
    return bool(client.eval(_RENEW, 1, key, token, _ms(ttl)))


def release_key(client: redis.Redis, key: str, token: str) -> bool:
    """Release ``key`` if ``token`` still owns it; False if it expired or belongs to another."""
    return bool(client.eval(_RELEASE, 1, key, token))


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
