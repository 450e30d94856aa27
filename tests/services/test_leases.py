"""The job's leases on SQLite, PostgreSQL and MariaDB: the match answer
carries them, a heartbeat renews the running lease or is told to kill, a
Running job none of whose heartbeats came goes back after its start window
(``match_lease``) rather than the heartbeat timeout, and a repeated Running
report (its answer was lost) tells the pilot the job is still its own."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.helpers import ADMIN, as_pilot, run_concurrently
from tests.services.test_matcher import HELLO, pilot, status, submit, usage
from wms.core.errors import Conflict, NotFound
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services import leases

pytestmark = pytest.mark.databases


def running(runtime, now, pilot_id="p1"):
    """A job handed to ``pilot_id`` and reported Running at ``now``: (job id, its answer)."""
    [job_id] = submit(runtime, now, HELLO)
    job = matcher.request_job(runtime, pilot(pilot_id), now).job
    leases.pilot_status(runtime, as_pilot(pilot_id), job_id, pilot_id, "Running", "", None, now, job["Attempt"])
    return job_id, job


def seconds(n):
    return timedelta(seconds=n)


def test_the_match_answer_carries_both_leases(runtime, now):
    submit(runtime, now, HELLO)
    job = matcher.request_job(runtime, pilot(), now).job
    settings = runtime.config.settings
    assert (job["Lease"], job["RunLease"]) == (settings.match_lease, settings.heartbeat_timeout)


def test_a_running_job_without_a_first_heartbeat_goes_back_after_its_start_window(runtime, now):
    job_id, _ = running(runtime, now)
    window = runtime.config.settings.match_lease
    assert window < runtime.config.settings.heartbeat_timeout
    assert leases.reap_stalled(runtime, now + seconds(window - 1)) == 0
    assert leases.reap_stalled(runtime, now + seconds(window + 1)) == 1
    row = status(runtime, job_id)
    assert (row["Status"], row["MinorStatus"]) == ("Waiting", leases.STALLED[0])
    history = jobs_service.history(runtime, ADMIN, job_id)
    assert [(h["Status"], h["MinorStatus"]) for h in history[-2:]] == [
        ("Stalled", leases.NOT_STARTED), ("Waiting", leases.STALLED[0])]
    assert usage(runtime) == {}


def test_a_first_heartbeat_turns_the_start_window_into_the_running_lease(runtime, now):
    job_id, job = running(runtime, now)
    settings = runtime.config.settings
    beat = leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", now + seconds(1), job["Attempt"])
    assert beat["Kill"] is False
    assert leases.reap_stalled(runtime, now + seconds(settings.match_lease + 1)) == 0
    assert leases.reap_stalled(runtime, now + seconds(1 + settings.heartbeat_timeout - 1)) == 0
    assert leases.reap_stalled(runtime, now + seconds(1 + settings.heartbeat_timeout + 1)) == 1
    assert status(runtime, job_id)["Status"] == "Waiting"


def test_a_heartbeat_after_the_lease_was_taken_back_is_told_to_kill_and_renews_nothing(runtime, now):
    job_id, job = running(runtime, now)
    later = now + seconds(runtime.config.settings.match_lease + 1)
    assert leases.reap_stalled(runtime, later) == 1
    assert leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", later, job["Attempt"])["Kill"] is True
    assert status(runtime, job_id)["Status"] == "Waiting"


def test_a_repeated_running_report_before_the_first_heartbeat_is_answered_again(runtime, now):
    job_id, job = running(runtime, now)
    window = runtime.config.settings.match_lease
    again = now + seconds(window - 1)
    answer = leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, again, job["Attempt"])
    assert answer == {"JobID": job_id, "Status": "Running"}
    # The start window runs from the repeated report, and the history has one Running.
    assert leases.reap_stalled(runtime, now + seconds(window + 1)) == 0
    assert leases.reap_stalled(runtime, again + seconds(window + 1)) == 1
    statuses = [h["Status"] for h in jobs_service.history(runtime, ADMIN, job_id)]
    assert statuses.count("Running") == 1


def test_a_repeated_running_report_after_a_heartbeat_or_of_another_attempt_is_refused(runtime, now):
    job_id, job = running(runtime, now)
    leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", now, job["Attempt"])
    with pytest.raises(Conflict, match="it is Running"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now, job["Attempt"])
    with pytest.raises(Conflict, match="attempt 7 is over"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now, 7)


def test_a_repeated_running_report_after_the_start_window_closed_is_refused(runtime, now):
    job_id, job = running(runtime, now)
    later = now + seconds(runtime.config.settings.match_lease + 1)
    assert leases.reap_stalled(runtime, later) == 1
    with pytest.raises(Conflict, match="it is Waiting"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, later, job["Attempt"])


def test_two_reapers_at_once_give_an_unstarted_job_back_once(runtime, now):
    job_id, _ = running(runtime, now)
    later = now + seconds(runtime.config.settings.match_lease + 1)
    counts, errors = run_concurrently(lambda i: leases.reap_stalled(runtime, later), 4)
    assert errors == [] and sum(counts) == 1
    statuses = [h["Status"] for h in jobs_service.history(runtime, ADMIN, job_id)]
    assert statuses.count("Stalled") == 1 and statuses[-1] == "Waiting"


def placed(pilot_id, attempt=1, status="Running"):
    return {"pilot_id": pilot_id, "attempt": attempt, "status": status}


@pytest.mark.parametrize("placement, pilot_id, attempt, refusal, message", [
    (placed("p1"), "p1", 1, None, None),
    (placed("p1"), "p1", None, None, None),
    (None, "p1", 1, NotFound, "no such job: 7"),
    # Another pilot holds the attempt quoted: as if there were no such job.
    (placed("p2"), "p1", 1, NotFound, "no such job: 7"),
    (placed("p2", attempt=2, status="Matched"), "p1", 1, Conflict,
     "job 7 was handed out again: attempt 1 is over, attempt 2 is Matched"),
    (placed(None, status="Waiting"), "p1", 1, Conflict, "job 7 is not held by pilot p1 (it is Waiting)"),
    (placed("p2"), "p1", None, Conflict, "job 7 is not held by pilot p1 (it is Running)"),
])
def test_one_holder_check_answers_every_report_of_a_pilot(placement, pilot_id, attempt, refusal, message):
    found = leases.holder_refusal(7, placement, pilot_id, attempt)
    assert type(found) is (refusal or type(None))
    assert (found.message if found is not None else None) == message
