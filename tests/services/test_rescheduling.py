"""wms reschedule in the service layer, on SQLite, PostgreSQL and MariaDB:
an ended job waits again as a new attempt, filed afresh by the optimizers,
within max_reschedule (reset by operators), recorded in the history; two
reschedules of one job at once make one attempt."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, update

from tests.helpers import OPERATOR, ROLAND, as_pilot, run_concurrently
from wms.core.errors import Conflict, Forbidden, InvalidInput
from wms.db.schema import jobs, task_queues
from wms.db import task_queues as tq_db
from wms.services import leases
from wms.services import matcher, rescheduling
from wms.services import jobs as jobs_service
from wms.services.jobs import Selection
from wms.services.submission import SubmitOptions, submit_jobs
from tests.services.conftest import pilot, row

pytestmark = pytest.mark.databases

RUNNABLE = '[ Executable = "/bin/true"; CPUTime = 300; ]'


def ids(*job_ids: int) -> Selection:
    return Selection(job_ids=list(job_ids))


def killed_job(runtime, now) -> int:
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE)], SubmitOptions(), now)
    jobs_service.kill_jobs(runtime, ROLAND, [job], now)
    return job


def test_a_killed_job_waits_again_in_a_task_queue_filed_afresh(runtime, now):
    job = killed_job(runtime, now)
    with runtime.engine.begin() as conn:       # the clean-up agent took its task queue away
        assert tq_db.delete_empty_task_queues(conn) == 1
    assert row(runtime, job)["task_queue_id"] is None

    answer = rescheduling.reschedule_jobs(runtime, ROLAND, ids(job), False, "input fixed", now)
    assert answer == {"rescheduled": [job], "not_rescheduled": {}, "next_after": None}
    after = row(runtime, job)
    assert (after["status"], after["minor_status"], after["reschedule_count"]) == (
        "Waiting", "Rescheduled by roland: input fixed", 1)
    with runtime.engine.connect() as conn:
        assert conn.execute(select(task_queues.c.tq_id).where(task_queues.c.tq_id == after["task_queue_id"])).all()
    result = matcher.request_job(runtime, pilot("p1"), now)
    assert result.job is not None and result.job["JobID"] == job
    history = jobs_service.history(runtime, ROLAND, job)
    assert [(e["Status"], e["Source"]) for e in history[-3:]] == [
        ("Killed", "User"), ("Waiting", "User roland"), ("Matched", history[-1]["Source"])]


def test_max_reschedule_bounds_it_and_an_operator_resets_the_count(runtime, now):
    job = killed_job(runtime, now)
    most = runtime.config.settings.max_reschedule
    with runtime.engine.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.job_id == job).values(reschedule_count=most))
    answer = rescheduling.reschedule_jobs(runtime, ROLAND, ids(job), False, None, now)
    assert answer["rescheduled"] == []
    assert answer["not_rescheduled"] == {str(job): f"rescheduled {most} times already, as many as max_reschedule "
                                                   f"allows ({most}); an operator may start the count again (--reset)"}
    with pytest.raises(Forbidden, match=r"a user may not reset the reschedule count \(--reset\): only operators"):
        rescheduling.reschedule_jobs(runtime, ROLAND, ids(job), True, None, now)
    assert rescheduling.reschedule_jobs(runtime, OPERATOR, ids(job), True, "new input", now)["rescheduled"] == [job]
    assert row(runtime, job)["reschedule_count"] == 0


def test_a_job_that_has_not_ended_is_not_rescheduled(runtime, now):
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE)], SubmitOptions(), now)
    answer = rescheduling.reschedule_jobs(runtime, ROLAND, ids(job), False, None, now)
    assert answer["not_rescheduled"] == {str(job): "it is Waiting: only a Done, Failed, Killed or Stalled job is "
                                                   "rescheduled"}
    with pytest.raises(InvalidInput, match="status Waiting: only jobs that are Done or Failed or Killed or Stalled"):
        rescheduling.reschedule_jobs(runtime, ROLAND, Selection(status="Waiting"), False, None, now)


def test_two_reschedules_of_one_job_at_once_make_one_attempt(runtime, now):
    job = killed_job(runtime, now)
    start = threading.Barrier(3)

    def work(i: int):
        start.wait()
        return rescheduling.reschedule_jobs(runtime, ROLAND, ids(job), False, f"try {i}", now)

    results, errors = run_concurrently(work, 3)
    assert errors == []
    assert sum(len(r["rescheduled"]) for r in results) == 1
    assert row(runtime, job)["reschedule_count"] == 1
    entries = [e for e in jobs_service.history(runtime, ROLAND, job) if e["Source"] == "User roland"]
    assert len(entries) == 1


def test_a_running_job_is_rescheduled_only_when_asked_and_its_pilot_is_told_to_stop(runtime, now):
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE)], SubmitOptions(), now)
    result = matcher.request_job(runtime, pilot("p1"), now)
    assert result.job is not None and result.job["JobID"] == job
    attempt = result.job["Attempt"]
    leases.pilot_status(runtime, as_pilot("p1"), job, "p1", "Running", "", None, now, attempt=attempt)

    answer = rescheduling.reschedule_jobs(runtime, ROLAND, ids(job), False, None, now)
    assert answer["not_rescheduled"] == {str(job): "it is Running: only a Done, Failed, Killed or Stalled job is "
                                                   "rescheduled (a Matched or Running one with qmod -rj, wms "
                                                   "reschedule --running)"}
    answer = rescheduling.reschedule_jobs(runtime, ROLAND, ids(job), False, "node draining", now, running=True)
    assert answer["rescheduled"] == [job]
    assert (row(runtime, job)["status"], row(runtime, job)["reschedule_count"]) == ("Waiting", 1)
    assert leases.heartbeat(runtime, as_pilot("p1"), job, "p1", now, attempt=attempt)["Kill"] is True
    with pytest.raises(Conflict):
        leases.pilot_status(runtime, as_pilot("p1"), job, "p1", "Done", "", 0, now, attempt=attempt)
    again = matcher.request_job(runtime, pilot("p2"), now)
    assert again.job is not None and (again.job["JobID"], again.job["Attempt"]) == (job, attempt + 1)
