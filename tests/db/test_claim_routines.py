"""The claim, one set of cases on SQLite, PostgreSQL and MariaDB.

The claim exists in three forms (a PostgreSQL function, a MariaDB
procedure, SQLite's statements in wms/db/matching.py); ``match_db.claim``
is their one entry point and these cases hold for each: no job, every
debit fitting, the k-th debit full (named by the same 0-based index
everywhere, nothing written), priority order, the rows written, a stale
version of the quota sets. And the routine installed in the database is
the current text of wms/db/sql/.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text

from wms.db import matching as match_db
from wms.db.schema import job_debits, job_jdls, jobs, resource_usage, status_history, task_queues
from wms.services.retry import run_in_transaction

pytestmark = pytest.mark.databases

SQL = Path(match_db.__file__).parent / "sql"
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
KEYS = [("global", "compiler_lic"), ("queue:A/B/c", "slots"), ("rqs:set/1:*", "slots")]


def placement() -> match_db.Placement:
    return match_db.Placement(pilot_id="p1", site="A", queue="A/B/c", host="wn1", slots=1,
                              lease_expires=NOW + timedelta(minutes=5), minor_status="Assigned to pilot p1", now=NOW)


@pytest.fixture
def filled(engine):
    """One task queue with three waiting jobs: 1 and 3 of priority 1, 2 of priority 5."""
    with engine.begin() as conn:
        conn.execute(insert(task_queues).values(tq_id=1, owner="u", owner_group="g", vo="v", priority=1,
                                                cpu_time=300, definition="{}", tq_key="tq1", created=NOW))
        for job_id, priority in ((1, 1), (2, 5), (3, 1)):
            conn.execute(insert(jobs).values(job_id=job_id, owner="u", owner_group="g", vo="v", status="Waiting",
                                             task_queue_id=1, priority=priority, cpu_time=300,
                                             submission_time=NOW, last_update_time=NOW))
            conn.execute(insert(job_jdls).values(job_id=job_id, jdl=f"[ JobID = {job_id}; ]", original_jdl=""))
        match_db.ensure_usage_rows(conn, KEYS)
        conn.execute(resource_usage.update().where(resource_usage.c.scope == "rqs:set/1:*").values(used=3.0))
    return engine


def claim(engine, debits, tq_id=1, rules_version=0):
    return run_in_transaction(engine, lambda conn: match_db.claim(
        conn, tq_id, placement(), source="Matcher", debits=debits, rules_version=rules_version))


def rows(engine):
    with engine.connect() as conn:
        return {
            "usage": {(s, r): u for s, r, u in conn.execute(select(resource_usage.c.scope, resource_usage.c.resource,
                                                                    resource_usage.c.used)).all()},
            "debits": sorted(tuple(r) for r in conn.execute(select(job_debits)).all()),
            "history": [tuple(r) for r in conn.execute(select(status_history.c.job_id, status_history.c.status,
                                                              status_history.c.minor_status)).all()],
            "jobs": {r.job_id: (r.status, r.attempt, r.pilot_id) for r in conn.execute(select(jobs)).all()},
        }


def test_no_waiting_job_claims_nothing(filled):
    assert claim(filled, [], tq_id=99) is None
    assert rows(filled)["history"] == []


def test_every_debit_fits_and_everything_is_written(filled):
    debits = [("global", "compiler_lic", 1.0, 20.0), ("queue:A/B/c", "slots", 1.0, 4.0)]
    job = claim(filled, debits)
    assert (job["job_id"], job["cpu_time"], job["attempt"], job["jdl"]) == (2, 300, 1, "[ JobID = 2; ]")
    after = rows(filled)
    assert after["jobs"][2] == ("Matched", 1, "p1") and after["jobs"][1][0] == "Waiting"
    assert after["debits"] == [(2, "global", "compiler_lic", 1.0), (2, "queue:A/B/c", "slots", 1.0)]
    assert after["usage"][("global", "compiler_lic")] == 1.0
    assert after["history"] == [(2, "Matched", "Assigned to pilot p1 (attempt 1)")]


def test_priority_then_age_decides_the_order(filled):
    assert [claim(filled, [])["job_id"] for _ in range(3)] == [2, 1, 3]
    assert claim(filled, []) is None


@pytest.mark.parametrize("full_at", [0, 1, 2])
def test_the_debit_that_does_not_fit_is_named_and_nothing_is_written(filled, full_at):
    # Row full_at holds 3 of 3; the others have room.
    with filled.begin() as conn:
        for i, (scope, _) in enumerate(KEYS):
            conn.execute(resource_usage.update().where(resource_usage.c.scope == scope)
                         .values(used=3.0 if i == full_at else 0.0))
    debits = [(s, r, 1.0, 3.0 if i == full_at else 10.0) for i, (s, r) in enumerate(KEYS)]
    before = rows(filled)
    with pytest.raises(match_db.DebitDoesNotFit) as refused:
        claim(filled, debits)
    assert refused.value.index == full_at
    assert rows(filled) == before


def test_a_claim_with_quota_sets_that_changed_is_refused(filled):
    with pytest.raises(match_db.QuotaSetsChanged):
        claim(filled, [], rules_version=7)
    assert rows(filled)["jobs"][2][0] == "Waiting"


def claim_several(engine, debits, count):
    if not match_db.claims_in_one_call(engine):
        pytest.skip(f"{engine.dialect.name} claims one job a call; the Matcher repeats the claim there")
    return run_in_transaction(engine, lambda conn: match_db.claim_several(
        conn, 1, placement(), count, source="Matcher", debits=debits, rules_version=0))


def test_several_jobs_in_one_call_are_taken_as_one_claim_after_the_other_would(filled):
    debits = [("global", "compiler_lic", 1.0, 20.0)]
    assert [job["job_id"] for job in claim_several(filled, debits, 2)] == [2, 1]
    after = rows(filled)
    assert after["usage"][("global", "compiler_lic")] == 2.0
    assert after["debits"] == [(1, "global", "compiler_lic", 1.0), (2, "global", "compiler_lic", 1.0)]
    assert sorted(after["history"]) == [(1, "Matched", "Assigned to pilot p1 (attempt 1)"),
                                        (2, "Matched", "Assigned to pilot p1 (attempt 1)")]
    # More asked for than wait: what waits.
    assert [job["job_id"] for job in claim_several(filled, debits, 5)] == [3]
    assert claim_several(filled, debits, 5) == []


def test_a_later_job_that_does_not_fit_ends_the_list_and_the_first_is_refused(filled):
    # Two of three licences free: the third job's debit would not fit.
    with filled.begin() as conn:
        conn.execute(resource_usage.update().where(resource_usage.c.scope == "global").values(used=1.0))
    debits = [("global", "compiler_lic", 1.0, 3.0), ("queue:A/B/c", "slots", 1.0, 10.0)]
    assert [job["job_id"] for job in claim_several(filled, debits, 3)] == [2, 1]
    after = rows(filled)
    assert after["usage"][("global", "compiler_lic")] == 3.0 and after["jobs"][3][0] == "Waiting"
    before = rows(filled)
    with pytest.raises(match_db.DebitDoesNotFit) as refused:
        claim_several(filled, debits, 3)
    assert refused.value.index == 0 and rows(filled) == before


def routine_text(conn) -> str | None:
    """The body of the installed claim routine, as the database keeps it."""
    if conn.dialect.name == "postgresql":
        return conn.execute(text("SELECT prosrc FROM pg_proc WHERE proname = 'wms_claim_jobs'")).scalar_one()
    return conn.execute(text("SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES "
                             "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'wms_claim_jobs'")).scalar_one()


def current_body(dialect: str) -> str:
    """The body in wms/db/sql/: between the $fn$ quotes, or from BEGIN on."""
    if dialect == "postgresql":
        return re.search(r"\$fn\$(.*)\$fn\$", (SQL / "claim_postgresql.sql").read_text(), re.S).group(1)
    source = (SQL / "claim_mariadb.sql").read_text()
    return source[source.index("\nBEGIN") + 1:].rstrip()


def test_the_installed_routine_is_the_current_text(engine):
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite has no stored routine: its claim is the statements of wms/db/matching.py")
    with engine.connect() as conn:
        installed = routine_text(conn)
    assert installed.strip() == current_body(engine.dialect.name).strip()
