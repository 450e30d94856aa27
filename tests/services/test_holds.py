"""The system's hold at match time (services/holds.py): several Matchers
that find the same failing task queue at once hold each of its waiting
jobs once, fail nothing, and record one history entry a job; a held job
is never drawn and can still be killed."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from tests.helpers import ADMIN, ROLAND, run_concurrently
from wms.db.schema import jobs, status_history
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services.submission import SubmitOptions, submit_jobs
from tests.services.conftest import pilot

pytestmark = pytest.mark.databases

# true on every queue's ad (no FreeSlots there); random(0) raises on a one-slot pilot
RAISING = ('[ Executable = "/bin/true"; Parameters = 20; '
           "Requirements = other.FreeSlots is undefined || random(other.FreeSlots - 1) >= 0; ]")


def test_matchers_holding_one_task_queue_at_once_hold_each_job_once(runtime, now):
    ids = submit_jobs(runtime, ROLAND, [("raising.jdl", RAISING)], SubmitOptions(), now)
    results, errors = run_concurrently(lambda i: matcher.request_job(runtime, pilot(f"p{i}"), now), 4)
    assert errors == []
    assert all(result.job is None for result in results)
    with runtime.engine.connect() as conn:
        states = dict(conn.execute(select(jobs.c.job_id, jobs.c.status).where(jobs.c.job_id.in_(ids))).all())
        holds = dict(conn.execute(select(jobs.c.job_id, jobs.c.hold_types).where(jobs.c.job_id.in_(ids))).all())
        entries = conn.execute(select(status_history.c.job_id).where(
            status_history.c.job_id.in_(ids), status_history.c.status == "Held")).scalars().all()
    assert set(states.values()) == {"Held"}
    assert set(holds.values()) == {"s"}
    assert sorted(entries) == sorted(ids)          # one entry a job, whoever held it

    later = matcher.request_job(runtime, pilot("p9"), now)
    assert later.job is None and later.reason == matcher.NO_WAITING
    killed = jobs_service.kill_jobs(runtime, ADMIN, ids[:1], now)
    assert killed["killed"] == ids[:1]
