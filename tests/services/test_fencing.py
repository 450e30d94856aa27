"""Fencing, on SQLite, PostgreSQL and MariaDB: every hand-out of a job is an
attempt with its own number, and the reports, heartbeats and output of an
attempt that is over are refused, even from the same pilot, so a late or
revived pilot never overwrites the current attempt."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.helpers import ADMIN, as_pilot
from tests.services.test_matcher import HELLO, pilot, status, submit
from wms.core.errors import Conflict
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services import leases

pytestmark = pytest.mark.databases


def hand_out_twice(runtime, now):
    """Job handed to p1, its lease runs out, then handed to p1 again: attempts 1 and 2."""
    [job_id] = submit(runtime, now, HELLO)
    first = matcher.request_job(runtime, pilot("p1"), now).job
    later = now + timedelta(seconds=runtime.config.settings.match_lease + 1)
    assert leases.expire_leases(runtime, later) == 1
    second = matcher.request_job(runtime, pilot("p1"), later).job
    assert (first["JobID"], second["JobID"]) == (job_id, job_id)
    return job_id, first, second, later


def test_each_hand_out_is_a_new_attempt_and_the_history_shows_it(runtime, now):
    job_id, first, second, _ = hand_out_twice(runtime, now)
    assert (first["Attempt"], second["Attempt"]) == (1, 2)
    matched = [h["MinorStatus"] for h in jobs_service.history(runtime, ADMIN, job_id) if h["Status"] == "Matched"]
    assert matched == ["Assigned to pilot p1 (attempt 1)", "Assigned to pilot p1 (attempt 2)"]


def test_the_reports_of_an_attempt_that_is_over_are_refused(runtime, now):
    job_id, _, _, later = hand_out_twice(runtime, now)
    with pytest.raises(Conflict, match=f"job {job_id} was handed out again: attempt 1 is over, attempt 2 is Matched"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, later, attempt=1)
    assert leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", later, attempt=1)["Kill"] is True
    with pytest.raises(Conflict, match="attempt 1 is over"):
        leases.store_output(runtime, as_pilot("p1"), job_id, "p1", "old", "", False, later, attempt=1)
    # The current attempt goes on undisturbed.
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, later, attempt=2)
    assert leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", later, attempt=2)["Kill"] is False
    leases.store_output(runtime, as_pilot("p1"), job_id, "p1", "new", "", False, later, attempt=2)
    with pytest.raises(Conflict, match="attempt 1 is over, attempt 2 is Running"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Failed", "", 99, later, attempt=1)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Done", "", 0, later, attempt=2)
    assert status(runtime, job_id)["Status"] == "Done"
    assert leases.job_output(runtime, job_id)["stdout"] == "new"
