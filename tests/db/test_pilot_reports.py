"""A pilot's reports as the database takes them, one set of cases on SQLite,
PostgreSQL and MariaDB.

The reports exist in two forms (a PostgreSQL function, the statements of
wms/db/pilot_reports.py elsewhere); ``reports_db.take`` is their one entry
point and these cases hold for each: a report taken only from the pilot
holding the job, in its attempt and in a state it may leave; the columns a
start and an end set; the history, the output in place of the old one,
what an ended job held given back; nothing written for a report refused.
And the function installed in PostgreSQL is the current text of wms/db/sql/.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text

from wms.db import matching as match_db
from wms.db import pilot_reports as reports_db
from wms.db.schema import job_debits, job_outputs, jobs, resource_usage, status_history
from wms.services.retry import run_in_transaction

pytestmark = pytest.mark.databases

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
MATCHED_AT = NOW - timedelta(seconds=30)
LEASE = NOW + timedelta(minutes=5)
SLOTS = ("queue:A/B/c", "slots")
START = ("Matched",)
END = ("Running", "Matched")


@pytest.fixture
def held(engine):
    """Jobs 1 and 2 Matched to p1 (attempt 1), 3 Running on p1 (attempt 2,
    an old exit code), 4 Matched to p2; 1 and 3 hold a slot each of a
    queue whose usage is 2."""
    with engine.begin() as conn:
        for job_id, status, pilot, attempt in ((1, "Matched", "p1", 1), (2, "Matched", "p1", 1),
                                               (3, "Running", "p1", 2), (4, "Matched", "p2", 1)):
            conn.execute(insert(jobs).values(
                job_id=job_id, owner="u", owner_group="g", vo="v", status=status, minor_status="before",
                pilot_id=pilot, attempt=attempt, cpu_time=300, submission_time=MATCHED_AT,
                matched_time=MATCHED_AT, last_update_time=MATCHED_AT, lease_expires=LEASE,
                start_time=MATCHED_AT if status == "Running" else None,
                heartbeat_time=MATCHED_AT if status == "Running" else None, exit_code=7 if job_id == 3 else None))
        match_db.ensure_usage_rows(conn, [SLOTS])
        conn.execute(resource_usage.update().values(used=2.0))
        conn.execute(insert(job_debits), [{"job_id": j, "scope": SLOTS[0], "resource": SLOTS[1], "amount": 1.0}
                                          for j in (1, 3)])
        conn.execute(insert(job_outputs).values(job_id=3, stdout="old", stderr="", truncated=False, updated=MATCHED_AT))
    return engine


def running(job_id, pilot="p1", attempt=1):
    return reports_db.Report(job_id, pilot, attempt, "Running", START, "Application", f"Pilot {pilot}")


def ended(job_id, status="Done", pilot="p1", attempt=1, exit_code=0, output=None, ago=2.0):
    return reports_db.Report(job_id, pilot, attempt, status, END, "Execution complete", f"Pilot {pilot}",
                             end_time=NOW - timedelta(seconds=ago), exit_code=exit_code, output=output)


def take(engine, *reports):
    return run_in_transaction(engine, lambda conn: reports_db.take(conn, list(reports), NOW),
                              single_statement=reports_db.takes_in_one_call(engine))


def rows(engine):
    with engine.connect() as conn:
        return {
            "jobs": {r.job_id: r._asdict() for r in conn.execute(select(
                jobs.c.job_id, jobs.c.status, jobs.c.minor_status, jobs.c.start_time, jobs.c.end_time,
                jobs.c.heartbeat_time, jobs.c.lease_expires, jobs.c.exit_code, jobs.c.last_update_time)).all()},
            "history": [tuple(r) for r in conn.execute(select(
                status_history.c.job_id, status_history.c.status, status_history.c.minor_status,
                status_history.c.source, status_history.c.time).order_by(status_history.c.entry_id)).all()],
            "outputs": {r.job_id: (r.stdout, r.stderr, r.truncated)
                        for r in conn.execute(select(job_outputs)).all()},
            "debits": sorted(tuple(r) for r in conn.execute(select(job_debits)).all()),
            "used": conn.execute(select(resource_usage.c.used)).scalar_one(),
        }


def test_a_start_opens_the_start_window_and_is_recorded(held):
    assert take(held, running(2)) == {2}
    job = rows(held)["jobs"][2]
    assert (job["status"], job["minor_status"], job["start_time"], job["heartbeat_time"], job["lease_expires"],
            job["last_update_time"]) == ("Running", "Application", NOW, None, None, NOW)
    assert rows(held)["history"] == [(2, "Running", "Application", "Pilot p1", NOW)]


def test_an_end_stores_how_it_ended_its_output_and_gives_back_what_the_job_held(held):
    assert take(held, ended(3, attempt=2, exit_code=None, output=("out", "err", True))) == {3}
    after = rows(held)
    job = after["jobs"][3]
    # exit_code None is stored as None, not the old 7: the end says how it ended.
    assert (job["status"], job["end_time"], job["exit_code"], job["lease_expires"], job["start_time"]) == (
        "Done", NOW - timedelta(seconds=2), None, None, MATCHED_AT)
    assert after["outputs"] == {3: ("out", "err", True)}
    assert after["debits"] == [(1, *SLOTS, 1.0)] and after["used"] == 1.0
    assert after["history"] == [(3, "Done", "Execution complete", "Pilot p1", NOW)]


def test_a_matched_job_may_end_at_once_and_several_reports_go_together(held):
    assert take(held, ended(1, "Failed", exit_code=3), running(2), ended(3, attempt=2)) == {1, 2, 3}
    after = rows(held)
    assert [after["jobs"][j]["status"] for j in (1, 2, 3)] == ["Failed", "Running", "Done"]
    assert after["debits"] == [] and after["used"] == 0.0
    assert after["outputs"] == {3: ("old", "", False)}          # no output sent: the old one stays
    assert [h[:2] for h in after["history"]] == [(1, "Failed"), (2, "Running"), (3, "Done")]


@pytest.mark.parametrize("report", [
    running(4),                          # another pilot's job
    running(1, attempt=2),               # an attempt that is not the job's
    running(3, attempt=2),               # a start of a job already running
    running(99),                         # no such job
    ended(4),
    ended(1, attempt=0),
], ids=["other-pilot", "other-attempt", "not-a-state-it-may-leave", "no-such-job", "end-other-pilot",
        "end-old-attempt"])
def test_a_refused_report_changes_nothing(held, report):
    before = rows(held)
    assert take(held, report) == set()
    assert rows(held) == before


def test_a_refused_report_does_not_stop_the_others(held):
    assert take(held, running(4), running(2), ended(1, attempt=5)) == {2}
    after = rows(held)
    assert [after["jobs"][j]["status"] for j in (1, 2, 4)] == ["Matched", "Running", "Matched"]
    assert after["used"] == 2.0


def test_no_attempt_quoted_means_any(held):
    assert take(held, ended(3, attempt=None)) == {3}


def test_the_installed_function_is_the_current_text(held):
    if held.dialect.name != "postgresql":
        pytest.skip("only PostgreSQL takes the reports in a stored function; the others run the statements")
    with held.connect() as conn:
        installed = conn.execute(text("SELECT prosrc FROM pg_proc WHERE proname = 'wms_pilot_reports'")).scalar_one()
    source = (Path(reports_db.__file__).parent / "sql" / "pilot_reports_postgresql.sql").read_text()
    assert installed.strip() == re.search(r"\$fn\$(.*)\$fn\$", source, re.S).group(1).strip()
