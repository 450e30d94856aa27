"""Several jobs' reports taken together (leases.pilot_statuses), on SQLite,
PostgreSQL and MariaDB: pilots reporting their slots' jobs at once, all of
them at the same time, lose no report, take nothing twice, and give back
every consumable their jobs held."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

from tests.helpers import ROLAND, as_pilot, run_concurrently
from tests.services.conftest import pilot
from wms.core.errors import Conflict, InvalidInput
from wms.db import matching as match_db
from wms.db.schema import job_debits, job_outputs
from wms.services import jobs as jobs_service
from wms.services import leases, matcher
from wms.services.leases import StatusReport
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

# The test configuration's queue has four slots: two pilots of two, four rounds.
PILOTS, SLOTS, ROUNDS = 2, 2, 4
JOBS = '[ Executable = "/bin/true"; CPUTime = 300; Parameters = 16; ]'


def claim(runtime, now, pilot_id: str, count: int = SLOTS) -> list[dict]:
    request = dataclasses.replace(pilot(pilot_id), slots=count, host=f"wn-{pilot_id}")
    return matcher.request_jobs(runtime, request, count, now).jobs


def test_pilots_reporting_their_slots_at_once_lose_nothing_and_return_every_debit(runtime, now):
    job_ids = submit_jobs(runtime, ROLAND, [("jobs.jdl", JOBS)], SubmitOptions(), now)
    ran: dict[int, str] = {}
    for _ in range(ROUNDS):
        held = {f"p{i}": claim(runtime, now, f"p{i}") for i in range(PILOTS)}
        assert [len(jobs) for jobs in held.values()] == [SLOTS] * PILOTS
        with runtime.engine.connect() as conn:
            assert any(match_db.all_usage(conn).values()), "the jobs hold consumables while they run"

        def report(i: int, status: str, **extra) -> list:
            name = f"p{i}"
            reports = [StatusReport(job["JobID"], name, status, attempt=job["Attempt"], **extra)
                       for job in held[name]]
            return leases.pilot_statuses(runtime, as_pilot(name), reports, now)

        running, errors = run_concurrently(lambda i: report(i, "Running"), PILOTS)
        assert errors == [] and all(a["Status"] == "Running" for answers in running for a in answers)
        done, errors = run_concurrently(lambda i: report(i, "Done", exit_code=0, ended_ago=0.1,
                                                         output=(f"out of p{i}\n", "", False)), PILOTS)
        assert errors == [] and all(a["Status"] == "Done" for answers in done for a in answers)
        with runtime.engine.connect() as conn:
            assert not any(match_db.all_usage(conn).values())
        ran.update({job["JobID"]: name for name, jobs in held.items() for job in jobs})

    assert sorted(ran) == sorted(job_ids)
    with runtime.engine.connect() as conn:
        assert conn.execute(select(job_debits.c.job_id).where(job_debits.c.job_id.in_(job_ids))).all() == []
        outputs = dict(conn.execute(select(job_outputs.c.job_id, job_outputs.c.stdout)).all())
    for job_id, name in ran.items():
        assert outputs[job_id] == f"out of {name}\n"
        steps = [e["Status"] for e in jobs_service.history(runtime, ROLAND, job_id)]
        assert steps[-3:] == ["Matched", "Running", "Done"] and steps.count("Done") == 1


def test_a_refused_report_refuses_only_itself(runtime, now):
    submit_jobs(runtime, ROLAND, [("jobs.jdl", JOBS.replace("16", "3"))], SubmitOptions(), now)
    first, second, third = claim(runtime, now, "p1", 3)
    answers = leases.pilot_statuses(runtime, as_pilot("p1"), [
        StatusReport(first["JobID"], "p1", "Running", attempt=first["Attempt"]),
        StatusReport(second["JobID"], "p1", "Running", attempt=second["Attempt"] + 1),     # an attempt not its own
        StatusReport(third["JobID"], "p1", "Done", exit_code=0, attempt=third["Attempt"]),
    ], now)
    assert answers[0] == {"JobID": first["JobID"], "Status": "Running"}
    assert isinstance(answers[1], Conflict) and "was handed out again" in str(answers[1])
    assert answers[2] == {"JobID": third["JobID"], "Status": "Done"}
    assert [e["Status"] for e in jobs_service.history(runtime, ROLAND, second["JobID"])][-1] == "Matched"
    # A call that names a job twice is refused whole: its reports would answer
    # otherwise than the same reports sent one after the other.
    with pytest.raises(InvalidInput, match=f"job {first['JobID']} is reported twice"):
        leases.pilot_statuses(runtime, as_pilot("p1"), [
            StatusReport(first["JobID"], "p1", "Done", exit_code=0, attempt=first["Attempt"]),
            StatusReport(second["JobID"], "p1", "Running", attempt=second["Attempt"]),
            StatusReport(first["JobID"], "p1", "Done", exit_code=0, attempt=first["Attempt"])], now)
    assert [e["Status"] for e in jobs_service.history(runtime, ROLAND, first["JobID"])][-1] == "Running"
    assert [e["Status"] for e in jobs_service.history(runtime, ROLAND, second["JobID"])][-1] == "Matched"
