"""The beat scheduler of `celery -A agents beat`: only one beat dispatches.

Stock Celery beat has no notion of another beat: two of them send every
agent twice per period. Here a beat dispatches only while it holds the beat
lock, a Redis key (``wms:beat-lock``, on the broker's Redis) set with an
expiry of wms.yaml ``beat_lock_timeout`` and renewed on every tick by its
owner (redis-py's lock, extended each tick: agents/locks.py). A second beat finds the key
held and stays idle, trying again every third of the timeout; when the
first one stops it frees the key at once, when it dies the key expires,
and the standby takes over. The idea is RedBeat's (a lock extended every
tick, whose timeout exceeds the tick interval); the schedule itself stays
Celery's own (wms.yaml ``agent_periods``, built in agents/celery_app.py).

So that a take-over does not send every agent again at once, the beat that
dispatches writes each agent's last run time to the Redis hash
``wms:beat:last-run``; a beat that takes the lock adopts those times and
goes on with the same rhythm.

The per-agent task lock (agents/locks.py, taken by the worker) stays: it
keeps a slow run and the next one from overlapping, which no beat can see.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timezone
from typing import Any

import redis
from celery.beat import PersistentScheduler

from agents.locks import acquire_key, release_key, renew_key

log = logging.getLogger("wms.agents.beat")

LOCK_KEY = "wms:beat-lock"
LAST_RUN_KEY = "wms:beat:last-run"
DEFAULT_LOCK_TIMEOUT = 60


def lock_intervals(timeout: float) -> float:
    """How often the owner renews the lock and a standby tries it: a third of the timeout,
    so two renewals may fail (a slow tick, a Redis hiccup) before the lock is lost."""
    return max(0.5, timeout / 3)


class SingleBeatScheduler(PersistentScheduler):
    """Celery's persistent scheduler, dispatching only while it holds the beat lock.

    Not Redis (the broker is something else): it dispatches unconditionally,
    like stock beat, and says so once.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client: redis.Redis | None = None
        self._token: str | None = None
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._redis_down = False
        super().__init__(*args, **kwargs)

    # -- the lock ------------------------------------------------------------------
    @property
    def lock_timeout(self) -> float:
        config = getattr(self.app, "wms_config", None)
        return float(config.settings.beat_lock_timeout) if config is not None else DEFAULT_LOCK_TIMEOUT

    def lock_client(self) -> redis.Redis | None:
        url = str(self.app.conf.broker_url or "")
        if not url.startswith(("redis://", "rediss://", "unix://")):
            return None
        if self._client is None:
            self._client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
        return self._client

    def holds_lock(self) -> bool:
        """Take or renew the beat lock; whether this beat may dispatch now."""
        client = self.lock_client()
        if client is None:
            return True
        timeout = self.lock_timeout
        try:
            if self._token is not None:
                if renew_key(client, LOCK_KEY, self._token, timeout):
                    held = True
                else:
                    log.warning("beat %s: lost the beat lock to another beat; standing by", self._owner)
                    self._token = None
                    held = False
            else:
                self._token = acquire_key(client, LOCK_KEY, timeout)
                held = self._token is not None
                if held:
                    log.info("beat %s: holds the beat lock; dispatching", self._owner)
                    self.adopt_last_runs(client)
            if self._redis_down:
                log.info("beat %s: Redis is back", self._owner)
                self._redis_down = False
            return held
        except redis.RedisError as exc:
            # Without Redis nothing can be sent anyway (it is the broker), and
            # another beat may take the lock once it expires: stand by.
            if not self._redis_down:
                log.warning("beat %s: Redis unreachable for the beat lock (%s); not dispatching", self._owner, exc)
                self._redis_down = True
            return False

    def adopt_last_runs(self, client: redis.Redis) -> None:
        """Go on from the last runs the previous owner recorded, not from this beat's own."""
        runs = {key.decode(): float(value) for key, value in client.hgetall(LAST_RUN_KEY).items()}
        changed = False
        for name, entry in self.schedule.items():
            stamp = runs.get(name)
            if stamp is None:
                continue
            last = datetime.fromtimestamp(stamp, tz=timezone.utc)
            if entry.last_run_at is None or last > _aware(entry.last_run_at):
                entry.last_run_at = last
                changed = True
        if changed:
            self._heap = None  # rebuilt from the adopted times on this tick

    # -- Celery's scheduler hooks ------------------------------------------------------
    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval = lock_intervals(self.lock_timeout)
        if not self.holds_lock():
            return interval
        # Come back before the lock needs renewing even when nothing is due.
        return min(super().tick(*args, **kwargs), interval)

    def reserve(self, entry: Any) -> Any:
        new_entry = super().reserve(entry)
        client = self.lock_client()
        if client is not None:
            try:
                client.hset(LAST_RUN_KEY, entry.name, _aware(new_entry.last_run_at).timestamp())
            except redis.RedisError as exc:
                log.warning("beat %s: could not record the run of %s: %s", self._owner, entry.name, exc)
        return new_entry

    def close(self) -> None:
        try:
            if self._token is not None and self._client is not None:
                try:
                    release_key(self._client, LOCK_KEY, self._token)
                    log.info("beat %s: released the beat lock", self._owner)
                except redis.RedisError as exc:
                    log.warning("beat %s: could not release the beat lock (it expires): %s", self._owner, exc)
                self._token = None
        finally:
            super().close()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
