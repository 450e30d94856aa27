"""wms alter (qalter) in the service layer, on SQLite, PostgreSQL and
MariaDB: a Waiting or Held job's priority, requests, queues and name
change, and the job is filed again into its new task queue and pool in
one transaction; an alter racing the pilots' claims never changes a job
already handed out."""

from __future__ import annotations

import threading

import pytest

from tests.helpers import ROLAND, run_concurrently
from wms.core.errors import InvalidInput
from wms.core.holds import parse_types
from wms.db import jobs as jobs_db
from wms.services import altering, holds, matcher
from wms.services import jobs as jobs_service
from wms.services.jobs import Selection
from wms.services.submission import SubmitOptions, submit_jobs
from tests.services.conftest import pilot, row

pytestmark = pytest.mark.databases

RUNNABLE = '[ Executable = "/bin/true"; CPUTime = 300; ]'


def test_an_altered_job_is_filed_into_the_task_queue_and_pool_of_its_new_description(runtime, now):
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE)], SubmitOptions(), now)
    before = row(runtime, job)
    answer = altering.alter_jobs(runtime, ROLAND, Selection(job_ids=[job]),
                                 {"Priority": 7, "ResourceRequests": {"h_rt": "0:30:00", "qname": "DIRAC.Local.ch/*"},
                                  "JobName": "renamed"}, "shorter", now)
    assert answer == {"altered": [job], "not_altered": {}, "next_after": None}
    after = row(runtime, job)
    assert (after["priority"], after["job_name"], after["status"]) == (7, "renamed", "Waiting")
    assert after["task_queue_id"] != before["task_queue_id"]
    with runtime.engine.connect() as conn:
        original, processed = jobs_db.get_jdl(conn, job)
    assert 'h_rt = "0:30:00"' in original and "Priority = 7" in original and 'JobName = "renamed"' in original
    assert jobs_service.history(runtime, ROLAND, job)[-1]["MinorStatus"] == (
        "Altered by roland: priority 7, -l h_rt=0:30:00, -q DIRAC.Local.ch/*, -N renamed (shorter)")
    result = matcher.request_job(runtime, pilot("p1"), now)
    assert result.job is not None and result.job["JobID"] == job


def test_a_held_job_is_altered_and_stays_held(runtime, now):
    [job] = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE)], SubmitOptions(), now)
    holds.hold_jobs(runtime, ROLAND, Selection(job_ids=[job]), parse_types("u"), "wait", now)
    assert altering.alter_jobs(runtime, ROLAND, Selection(job_ids=[job]), {"Priority": 2}, None, now)["altered"] == [job]
    after = row(runtime, job)
    assert (after["status"], after["minor_status"], after["priority"]) == ("Held", "Held by the user roland: wait", 2)


def test_refusals(runtime, now):
    first, second = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE.replace("CPUTime", "Parameters = 2; CPUTime"))],
                                SubmitOptions(), now)
    taken = matcher.request_job(runtime, pilot("p1"), now).job["JobID"]
    answer = altering.alter_jobs(runtime, ROLAND, Selection(job_ids=[taken]), {"Priority": 3}, None, now)
    assert answer["not_altered"] == {str(taken): "it is Matched on DIRAC.Local.ch/localhost/default: only a Waiting "
                                                 "or Held job is altered"}
    with pytest.raises(InvalidInput, match="nothing to alter"):
        altering.alter_jobs(runtime, ROLAND, Selection(job_ids=[first]), {}, None, now)
    other = second if taken == first else first
    answer = altering.alter_jobs(runtime, ROLAND, Selection(job_ids=[other]),
                                 {"ResourceRequests": {"no_such_complex": "1"}}, None, now)
    assert answer["altered"] == [] and answer["not_altered"][str(other)].startswith("the optimizers refuse it now: ")


def test_an_alter_racing_the_pilots_claims_never_changes_a_job_handed_out(runtime, now):
    job_ids = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE.replace("CPUTime", "Parameters = 30; CPUTime"))],
                          SubmitOptions(), now)
    start = threading.Barrier(4)
    answers: dict[str, dict] = {}

    def work(i: int):
        start.wait()
        if i == 0:
            answers["alter"] = altering.alter_jobs(runtime, ROLAND, Selection(job_ids=job_ids), {"Priority": 9},
                                                   None, now)
            return []
        return [r.job["JobID"] for n in range(10) if (r := matcher.request_job(runtime, pilot(f"r{i}-{n}"), now)).job]

    results, errors = run_concurrently(work, 4)
    assert errors == []
    handed_out = {j for taken in results for j in taken}
    altered = set(answers["alter"]["altered"])
    refused = {int(i): why for i, why in answers["alter"]["not_altered"].items()}
    assert altered | set(refused) == set(job_ids) and altered.isdisjoint(refused)
    for job_id, why in refused.items():      # claimed first: handed out as submitted
        assert job_id in handed_out and why.startswith("it is Matched on ")
        assert row(runtime, job_id)["priority"] == 0
    for job_id in altered:                   # altered first (a pilot may take it afterwards, altered)
        assert row(runtime, job_id)["priority"] == 9
