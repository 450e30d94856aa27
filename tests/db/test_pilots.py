"""Pilot records and the SiteDirector's lock rows on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from tests.helpers import default_config
from tests.services.test_matcher import HELLO, submit
from wms.db.schema import jobs
from wms.services.runtime import Runtime

from wms.db import pilots as pilots_db
from wms.db.schema import pilot_director_queues

pytestmark = pytest.mark.databases

Q = dict(site="DIRAC.Local.ch", ce="localhost", queue="default")


def add(conn, pid, now, state="Submitted", **kw):
    pilots_db.add_pilots(conn, [{"pilot_id": pid, **Q, "backend": "local", "state": state, "submitted": now, **kw}])


def test_pilots_are_recorded_counted_and_only_move_forward(engine, now):
    with engine.begin() as conn:
        add(conn, "p1", now)
        add(conn, "p2", now)
        add(conn, "p3", now, state="Running")
        add(conn, "other", now, site="LCG.CERN.ch")
    with engine.begin() as conn:
        assert pilots_db.count_by_state(conn, **Q) == {"Submitted": 2, "Running": 1}
        assert pilots_db.set_backend_ref(conn, "p1", "vm:123:p1", now)
        later = now + timedelta(seconds=5)
        assert pilots_db.set_state(conn, "p1", "Running", later, jobs_run=2)
        assert pilots_db.set_state(conn, "p2", "Done", later)
        assert not pilots_db.set_state(conn, "p2", "Running", later)       # final stays final
        assert not pilots_db.set_backend_ref(conn, "p2", "x", later)
    with engine.connect() as conn:
        p1 = pilots_db.get_pilot(conn, "p1")
        assert (p1["state"], p1["backend_ref"], p1["jobs_run"], p1["last_update"]) == (
            "Running", "vm:123:p1", 2, now + timedelta(seconds=5))
        assert p1["submitted"] == now
        assert pilots_db.count_by_state(conn, **Q) == {"Submitted": 0, "Running": 2}
        assert [p["pilot_id"] for p in pilots_db.active_pilots(conn)] == ["other", "p1", "p3"]
        assert [p["pilot_id"] for p in pilots_db.list_pilots(conn, ["Done"])] == ["p2"]
        assert len(pilots_db.list_pilots(conn)) == 4
    with pytest.raises(ValueError):
        with engine.begin() as conn:
            pilots_db.set_state(conn, "p1", "Lost", now)


def test_the_queue_lock_row_is_created_once_and_stamped(engine, now):
    for i in range(2):
        with engine.begin() as conn:
            pilots_db.lock_queue(conn, **Q, now=now + timedelta(seconds=i))
    with engine.connect() as conn:
        rows = conn.execute(select(pilot_director_queues)).mappings().all()
    assert [(r["site"], r["last_submission"]) for r in rows] == [("DIRAC.Local.ch", now + timedelta(seconds=1))]


def test_jobs_run_and_waiting_jobs_by_task_queue(engine, now):
    runtime = Runtime.create(default_config(), engine)
    ids = submit(runtime, now, HELLO, HELLO, HELLO)
    with runtime.engine.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.job_id.in_(ids[:2])).values(pilot_id="p1", status="Done"))
    with runtime.engine.connect() as conn:
        assert pilots_db.jobs_run(conn, ["p1", "p2"]) == {"p1": 2}
        [(tq_id, pool, vo, count)] = pilots_db.waiting_jobs_by_task_queue(conn)
        assert (pool, vo, count) == (None, "lhcb", 1)
