"""What the computing-element backend tests share: pilots that end at
once against no server, waiting for pilot states, and for jobs to end."""

from __future__ import annotations

import time

from tests.helpers import default_config, patience

# Pilots that find no server end at once: one empty answer, no retry.
QUICK_PILOT = ("--site", "S", "--ce", "C", "--queue", "Q", "--pools", "", "--max-empty", "1", "--poll", "0.1",
               "--retries", "0", "--http-timeout", "1")
NO_SERVER = "http://127.0.0.1:9"


def queue_ref():
    return default_config().make_resources(None).queues()[0]


def wait_for_states(backend, refs, final, timeout=60.0):
    """The backend's states of ``refs`` once all are in ``final`` (or at the timeout, scaled by patience)."""
    deadline = time.monotonic() + patience(timeout)
    states = backend.status(refs)
    while time.monotonic() < deadline and not set(states.values()) <= final:
        time.sleep(0.3)
        states = backend.status(refs)
    return states


def wait_jobs_done(server, ids, token, timeout=120.0):
    """The jobs' status rows once all are Done (or at the timeout, scaled by patience)."""
    deadline = time.monotonic() + patience(timeout)
    rows = []
    while time.monotonic() < deadline:
        rows = server.json("status", *map(str, ids), token=token)
        if all(r["Status"] == "Done" for r in rows):
            break
        time.sleep(0.3)
    return rows
