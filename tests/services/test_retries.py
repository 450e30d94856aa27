"""Retries a JDL asks for (MaxRetries, RetryOnExitCodes), in the service layer on
SQLite, PostgreSQL and MariaDB: a job its pilot reports Failed with a listed
exit code waits again as a new attempt, the reschedule's way, each retry in
its history with the reason, at most MaxRetries times; a reschedule meanwhile
wins; a JDL asking for more than max_reschedule is refused at submission."""

from __future__ import annotations

import threading

import pytest

from tests.helpers import ROLAND, as_pilot, run_concurrently
from wms.core.errors import InvalidInput
from wms.services import leases
from wms.services import matcher, rescheduling
from wms.services import jobs as jobs_service
from wms.services.jobs import Selection
from wms.services.submission import SubmitOptions, submit_jobs
from tests.services.conftest import pilot, row

pytestmark = pytest.mark.databases

RETRIED = '[ Executable = "/bin/false"; CPUTime = 300; MaxRetries = 2; RetryOnExitCodes = {3, 75}; ]'


def run_and_fail(runtime, now, job_id: int, exit_code: int, pilot_id: str) -> str | None:
    """A pilot takes the job, runs it, reports it Failed with ``exit_code``; what the retry recorded."""
    result = matcher.request_job(runtime, pilot(pilot_id), now)
    assert result.job is not None and result.job["JobID"] == job_id
    attempt = result.job["Attempt"]
    leases.pilot_status(runtime, as_pilot(pilot_id), job_id, pilot_id, "Running", "", None, now, attempt=attempt)
    leases.pilot_status(runtime, as_pilot(pilot_id), job_id, pilot_id, "Failed", "Application failed", exit_code, now,
                         attempt=attempt)
    return rescheduling.retry_failed(runtime, job_id, now)


def test_a_listed_exit_code_runs_the_job_again_at_most_max_retries_times(runtime, now):
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RETRIED)], SubmitOptions(), now)

    assert run_and_fail(runtime, now, job, 3, "p1") == "Retry 1 of 2: exit code 3"
    after = row(runtime, job)
    assert (after["status"], after["minor_status"], after["reschedule_count"], after["exit_code"]) == (
        "Waiting", "Retry 1 of 2: exit code 3", 1, None)
    assert run_and_fail(runtime, now, job, 75, "p2") == "Retry 2 of 2: exit code 75"
    assert run_and_fail(runtime, now, job, 75, "p3") is None
    after = row(runtime, job)
    assert (after["status"], after["exit_code"], after["reschedule_count"]) == ("Failed", 75, 2)

    history = [(e["Status"], e["MinorStatus"], e["Source"]) for e in jobs_service.history(runtime, ROLAND, job)]
    assert [h for h in history if h[0] in ("Failed", "Waiting")][-5:] == [
        ("Failed", "Application failed", "Pilot p1"),
        ("Waiting", "Retry 1 of 2: exit code 3", "Retry"),
        ("Failed", "Application failed", "Pilot p2"),
        ("Waiting", "Retry 2 of 2: exit code 75", "Retry"),
        ("Failed", "Application failed", "Pilot p3"),
    ]


def test_an_exit_code_not_listed_leaves_the_job_failed(runtime, now):
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RETRIED)], SubmitOptions(), now)
    assert run_and_fail(runtime, now, job, 1, "p1") is None
    assert (row(runtime, job)["status"], row(runtime, job)["reschedule_count"]) == ("Failed", 0)


def test_a_reschedule_and_a_retry_at_once_make_one_attempt(runtime, now):
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RETRIED)], SubmitOptions(), now)
    result = matcher.request_job(runtime, pilot("p1"), now)
    assert result.job is not None
    leases.pilot_status(runtime, as_pilot("p1"), job, "p1", "Failed", "", 3, now, attempt=result.job["Attempt"])
    start = threading.Barrier(2)

    def work(i: int):
        start.wait()
        if i == 0:
            return rescheduling.retry_failed(runtime, job, now)
        return rescheduling.reschedule_jobs(runtime, ROLAND, Selection(job_ids=[job]), False, None, now)

    results, errors = run_concurrently(work, 2)
    assert errors == []
    retried = [r for r in results if isinstance(r, str)]          # retry_failed's reason, None when not
    rescheduled = [j for r in results if isinstance(r, dict) for j in r["rescheduled"]]
    assert len(retried) + len(rescheduled) == 1
    assert row(runtime, job)["reschedule_count"] == 1
    waiting = [e for e in jobs_service.history(runtime, ROLAND, job) if e["Status"] == "Waiting"]
    assert len(waiting) == 2       # the submission's, and one of the two


def test_more_retries_than_max_reschedule_are_refused_at_submission(runtime, now):
    most = runtime.config.settings.max_reschedule
    text = f'[ Executable = "/bin/false"; MaxRetries = {most + 1}; ]'
    with pytest.raises(InvalidInput, match=rf"job.jdl: MaxRetries = {most + 1} is more than this server allows "
                                           rf"\(max_reschedule: {most}\)"):
        submit_jobs(runtime, ROLAND, [("job.jdl", text)], SubmitOptions(), now)
