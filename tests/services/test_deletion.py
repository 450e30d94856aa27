"""wms delete and the job_purger agent in the service layer, on SQLite,
PostgreSQL and MariaDB: a deleted job leaves every list, a running one is
killed first (its debits returned, its pilot told to stop), and after the
retention everything of it is purged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from tests.helpers import ADMIN, OPERATOR, ROLAND
from wms.core.errors import InvalidInput
from wms.db.schema import job_debits, job_jdls, jobs, status_history
from wms.services import leases
from wms.services import deletion, matcher
from wms.services import jobs as jobs_service
from wms.services.jobs import Selection
from wms.services.submission import SubmitOptions, submit_jobs
from tests.services.conftest import pilot

pytestmark = pytest.mark.databases

RUNNABLE = '[ Executable = "/bin/true"; CPUTime = 300; Parameters = 2; ]'


def count(runtime, table, job_ids) -> int:
    with runtime.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table).where(table.c.job_id.in_(job_ids))).scalar()


def test_deleted_jobs_leave_the_lists_and_a_matched_one_is_killed_first(runtime, now):
    waiting, matched = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE)], SubmitOptions(), now)
    taken = matcher.request_job(runtime, pilot("p1"), now).job["JobID"]
    waiting, matched = (matched, taken) if taken == waiting else (waiting, taken)
    answer = deletion.delete_jobs(runtime, ROLAND, Selection(job_ids=[waiting, matched]), "wrong input", now)
    assert answer == {"deleted": [waiting, matched], "not_deleted": {}, "next_after": None}
    assert jobs_service.list_jobs(runtime, ROLAND) == []
    assert [j["JobID"] for j in jobs_service.list_jobs(runtime, ROLAND, status="Deleted")] == sorted([waiting, matched])
    [row] = jobs_service.job_status(runtime, ROLAND, [matched])
    assert (row["Status"], row["MinorStatus"]) == ("Deleted", "Deleted by roland: wrong input")
    assert [(e["Status"], e["Source"]) for e in jobs_service.history(runtime, ROLAND, matched)[-2:]] == [
        ("Killed", "User roland"), ("Deleted", "User roland")]
    assert count(runtime, job_debits, [matched]) == 0
    beat = leases.heartbeat(runtime, ADMIN, matched, "p1", now)
    assert beat["Kill"] is True

    again = deletion.delete_jobs(runtime, OPERATOR, Selection(job_ids=[waiting]), None, now)
    assert again["not_deleted"] == {str(waiting): "it was deleted already"}
    with pytest.raises(InvalidInput, match="status Deleted: only jobs that are"):
        deletion.delete_jobs(runtime, ROLAND, Selection(status="Deleted"), None, now)


def test_the_purger_removes_deleted_jobs_after_the_retention_only(runtime, now):
    gone, kept = submit_jobs(runtime, ROLAND, [("job.jdl", RUNNABLE)], SubmitOptions(), now)
    retention = timedelta(seconds=runtime.config.settings.deleted_job_retention)
    deletion.delete_jobs(runtime, ROLAND, Selection(job_ids=[gone]), None, now - retention - timedelta(seconds=1))
    deletion.delete_jobs(runtime, ROLAND, Selection(job_ids=[kept]), None, now)
    assert deletion.purge_deleted_jobs(runtime, now) == {"purged": 1}
    assert deletion.purge_deleted_jobs(runtime, now) == {"purged": 0}     # a second run finds nothing
    for table in (jobs, job_jdls, status_history):
        assert count(runtime, table, [gone]) == 0 and count(runtime, table, [kept]) > 0
