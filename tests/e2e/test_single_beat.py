"""Two `celery -A agents beat` processes at once: only the one holding the beat
lock dispatches (agents/beat.py), each agent once per period; when it is
SIGKILLed the standby takes over once the lock expires, going on from the
recorded last runs; when the active one stops cleanly, it frees the lock and
the standby takes over at once.

No worker is needed: what a beat dispatches is in its log ("Sending due
task"), with the time it was sent.

A loaded machine may delay a beat's ticks, never hasten them: the test
waits until every agent has been sent a few times (a deadline scaled by
WMS_TEST_PATIENCE), then checks what load cannot excuse: never two sends
of an agent within a period, no more sends than the periods in the
window allow, none at all from a standby, no take-over before the lock
expired, a lock freed at once by a clean stop.
"""

from __future__ import annotations

import re
import signal
import time
from datetime import datetime
from pathlib import Path

import redis

from agents.beat import LAST_RUN_KEY, LOCK_KEY, lock_intervals
from tests.e2e.processes import celery, stop, tail
from tests.e2e.scenario import environment, wait_until, write_config

PERIODS = {"lease_reaper": 1, "site_director": 2, "submit_pool_cleaner": 2, "submit_pool_refresher": 3,
           "task_queue_priorities": 3}
# Long enough that a tick delayed by a loaded machine does not lose the lock.
LOCK_TIMEOUT = 9
SENDS = 3        # sends of every agent each window waits for
SENT = re.compile(r"^\[(\S+ \S+): INFO/MainProcess\] Scheduler: Sending due task (\w+) ")
HOLDS = "holds the beat lock"


def sends(log: Path) -> list[tuple[float, str]]:
    """(time, agent) of every dispatch in a beat's log."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        match = SENT.match(line)
        if match:
            moment = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((moment, match.group(2)))
    return out


def in_window(events: list[tuple[float, str]], start: float, end: float) -> list[tuple[float, str]]:
    return [(t, name) for t, name in events if start <= t < end]


def sent_enough(log: Path, start: float) -> bool:
    """Every agent sent at least SENDS times since ``start``."""
    events = in_window(sends(log), start, float("inf"))
    return all(sum(1 for _, n in events if n == name) >= SENDS for name in PERIODS)


def check_once_per_period(events: list[tuple[float, str]], start: float, end: float) -> None:
    """Each agent sent SENDS times or more in the window (liveness, waited
    for), never twice in a period, never more often than its period allows."""
    for name, period in PERIODS.items():
        times = sorted(t for t, n in in_window(events, start, end) if n == name)
        assert len(times) >= SENDS, (name, times)
        assert len(times) <= (end - start) / period + 1, (name, len(times), (end - start) / period)
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert all(gap >= 0.8 * period for gap in gaps), (name, gaps)


def test_one_beat_dispatches_and_a_standby_takes_over(tmp_path, private_redis):
    config = write_config(tmp_path, broker_url=private_redis.url(0), beat_lock_timeout=str(LOCK_TIMEOUT),
                          agent_periods="{" + ", ".join(f"{k}: {v}" for k, v in PERIODS.items()) + "}")
    env = environment(tmp_path, config, "http://127.0.0.1:9")
    client = redis.Redis.from_url(private_redis.url(0))
    beats: list = []

    def start(name: str):
        process, log = celery(tmp_path, env, "beat", "-s", str(tmp_path / f"{name}-schedule"), "--loglevel", "info",
                              log_name=f"{name}.log")
        beats.append(process)
        return process, log

    try:
        first, first_log = start("first")
        wait_until("the first beat takes the lock", lambda: HOLDS in first_log.read_text(), 30, [first_log])
        second, second_log = start("second")
        wait_until("the second beat starts", lambda: "beat: Starting" in second_log.read_text(), 30, [second_log])
        logs = [first_log, second_log]

        # Both run; only the first dispatches, each agent once per period.
        window_start = time.time()
        wait_until(f"the first beat sends every agent {SENDS} times", lambda: sent_enough(first_log, window_start),
                   60, logs)
        window_end = time.time()
        assert in_window(sends(second_log), 0, window_end) == [], tail(second_log)
        check_once_per_period(sends(first_log), window_start, window_end)
        owner = client.get(LOCK_KEY)
        assert owner is not None and 0 < client.pttl(LOCK_KEY) <= LOCK_TIMEOUT * 1000
        assert set(k.decode() for k in client.hkeys(LAST_RUN_KEY)) == set(PERIODS)

        # The first dies without a word: the lock expires, the second takes over.
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed = time.time()
        left = client.pttl(LOCK_KEY) / 1000      # what the dead owner's lock had left (-2: none)
        wait_until("the standby takes over", lambda: HOLDS in second_log.read_text(),
                   LOCK_TIMEOUT + lock_intervals(LOCK_TIMEOUT) + 30, logs, every=0.1)
        taken = time.time()
        # Not before the dead owner's lock expired (the log's time has millisecond steps).
        [held_at] = [datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                     for line in second_log.read_text().splitlines() if HOLDS in line]
        assert held_at >= killed + left - 0.1, (held_at - killed, left)
        assert client.get(LOCK_KEY) != owner
        wait_until(f"the second beat sends every agent {SENDS} times", lambda: sent_enough(second_log, taken + 0.5),
                   60, logs)
        check_once_per_period(sends(second_log), taken + 0.5, time.time())
        # Across the take-over no agent is sent twice within a period: the
        # second went on from the first one's recorded runs.
        merged = sorted(sends(first_log) + sends(second_log))
        for name, period in PERIODS.items():
            times = [t for t, n in merged if n == name]
            assert all(b - a >= 0.8 * period for a, b in zip(times, times[1:])), (name, times)

        # A clean stop frees the lock at once: a new standby takes over without waiting for expiry.
        third, third_log = start("third")
        wait_until("the third beat starts", lambda: "beat: Starting" in third_log.read_text(), 30, [third_log])
        # It has tried the lock at least once (every LOCK_TIMEOUT / 3 s), in vain.
        time.sleep(lock_intervals(LOCK_TIMEOUT) + 1)
        assert HOLDS not in third_log.read_text() and sends(third_log) == []
        second_token = client.get(LOCK_KEY)
        assert second_token is not None and client.pttl(LOCK_KEY) > 0
        stop(second)
        assert "released the beat lock" in second_log.read_text()
        # Freed, not left to expire: the key is gone, or already the third's.
        assert client.get(LOCK_KEY) != second_token
        wait_until("the third beat takes over", lambda: HOLDS in third_log.read_text(), 30, [second_log, third_log],
                   every=0.1)
        wait_until("the third beat dispatches", lambda: sends(third_log), 30, [third_log], every=0.2)
    finally:
        for process in beats:
            stop(process)
        client.close()
