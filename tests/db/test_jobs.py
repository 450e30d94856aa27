"""Job queries on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select

from wms.core.errors import NotFound
from wms.core.states import JobStatus
from wms.db import jobs as jobs_db
from wms.db import task_queues as tq_db
from wms.db.schema import job_jdls, status_history

pytestmark = pytest.mark.databases

W, R, C, M, K = (JobStatus.WAITING, JobStatus.RECEIVED, JobStatus.CHECKING, JobStatus.MATCHED, JobStatus.KILLED)


def job(n: int = 0, **extra: Any) -> dict[str, Any]:
    row = {
        "job_name": f"job{n}",
        "owner": "roland",
        "owner_group": "lhcb_user",
        "vo": "lhcb",
        "status": R.value,
        "original_jdl": f'[Executable = "/bin/echo"; Arguments = "{n}";]',
        "jdl": f'[Executable = "/bin/echo"; Arguments = "{n}"; Owner = "roland";]',
    }
    row.update(extra)
    return row


@contextlib.contextmanager
def counting_statements(engine: Engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def insert(engine: Engine, rows: list[dict[str, Any]], now: datetime) -> list[int]:
    with engine.begin() as conn:
        return jobs_db.insert_jobs(conn, rows, now)


def test_insert_and_get_jobs(engine: Engine, now: datetime) -> None:
    ids = insert(engine, [job(1), job(2, site="LCG.CERN.ch", priority=5, cpu_time=3600, submit_pool="p" * 64)], now)
    with engine.connect() as conn:
        rows = jobs_db.get_jobs(conn, [ids[1], 999_999_999, ids[0]])
    assert [r["job_id"] for r in rows] == [ids[1], ids[0]]
    second, first = rows
    assert first["job_name"] == "job1" and first["site"] == "ANY" and first["minor_status"] == ""
    assert first["queue"] == "" and first["submit_pool"] is None and first["task_queue_id"] is None
    assert second["site"] == "LCG.CERN.ch" and second["priority"] == 5 and second["cpu_time"] == 3600
    # Aware UTC, microseconds kept on every backend.
    assert first["submission_time"] == now and first["last_update_time"] == now
    assert first["submission_time"].tzinfo is not None


def test_insert_requires_the_owner_columns(engine: Engine, now: datetime) -> None:
    row = job(1)
    del row["owner"]
    with pytest.raises(ValueError, match="owner"):
        insert(engine, [row], now)


def test_insert_nothing(engine: Engine, now: datetime) -> None:
    assert insert(engine, [], now) == []


def test_bulk_insert_returns_ids_in_input_order(engine: Engine, now: datetime) -> None:
    n = 5_000
    rows = [job(i, priority=i % 7) for i in range(n)]
    with counting_statements(engine) as statements:
        started = time.perf_counter()
        ids = insert(engine, rows, now)
        elapsed = time.perf_counter() - started
    print(f"\n{engine.dialect.name}: {n} jobs in {elapsed * 1000:.0f} ms, {len(statements)} statements")
    assert len(ids) == n and len(set(ids)) == n
    assert ids == sorted(ids)  # one submission gets consecutive-looking ids
    with engine.connect() as conn:
        names = dict(conn.execute(select(jobs_db.jobs.c.job_id, jobs_db.jobs.c.job_name)).all())
        jdl_args = dict(conn.execute(select(job_jdls.c.job_id, job_jdls.c.original_jdl)).all())
    assert [names[i] for i in ids] == [f"job{i}" for i in range(n)]
    assert all(f'"{i}"' in jdl_args[job_id] for i, job_id in enumerate(ids))
    # A handful of statements, not one per job (BEGIN/COMMIT included).
    assert len(statements) <= 20, statements[:5]


def test_jdls(engine: Engine, now: datetime) -> None:
    a, b = insert(engine, [job(1), job(2)], now)
    with engine.begin() as conn:
        jobs_db.update_jdls(conn, {a: "[A]", b: "[B]" * 40_000})
    with engine.connect() as conn:
        assert jobs_db.get_jdl(conn, a) == ('[Executable = "/bin/echo"; Arguments = "1";]', "[A]")
        assert jobs_db.get_jdl(conn, b)[1] == "[B]" * 40_000  # longer than 64 KiB
        with pytest.raises(NotFound):
            jobs_db.get_jdl(conn, 999_999_999)


def test_history_in_recorded_order(engine: Engine, now: datetime) -> None:
    [a] = insert(engine, [job(1)], now)
    later = now + timedelta(seconds=1)
    with engine.begin() as conn:
        jobs_db.add_history(
            conn,
            [
                {"job_id": a, "status": R.value, "minor_status": "Job accepted", "source": "JobManager", "time": now},
                {"job_id": a, "status": C.value, "minor_status": "", "source": "Optimizer", "time": later},
                {"job_id": a, "status": W.value, "minor_status": None, "source": "Optimizer", "time": later},
            ],
        )
    with engine.connect() as conn:
        history = jobs_db.get_history(conn, a)
        assert jobs_db.get_history(conn, 999_999_999) == []
    assert [(h["status"], h["minor_status"], h["source"]) for h in history] == [
        ("Received", "Job accepted", "JobManager"),
        ("Checking", "", "Optimizer"),
        ("Waiting", "", "Optimizer"),
    ]
    assert [h["time"] for h in history] == [now, later, later]


def test_set_status_changes_only_expected_jobs(engine: Engine, now: datetime) -> None:
    ids = insert(engine, [job(0, status=W.value), job(1, status=M.value), job(2, status=JobStatus.DONE.value), job(3, status=W.value)], now)
    later = now + timedelta(minutes=1)
    with engine.begin() as conn:
        changed = jobs_db.set_status(
            conn, [ids[3], ids[2], ids[1], ids[0], 999_999_999], K.value, "Killed by roland", "User", later,
            expect={W.value, M.value},
        )
    assert changed == [ids[3], ids[1], ids[0]]  # input order; the Done job is left alone
    with engine.connect() as conn:
        rows = {r["job_id"]: r for r in jobs_db.get_jobs(conn, ids)}
        history = conn.execute(select(status_history.c.job_id, status_history.c.status)).all()
    assert {i: rows[i]["status"] for i in ids} == {ids[0]: "Killed", ids[1]: "Killed", ids[2]: "Done", ids[3]: "Killed"}
    assert rows[ids[0]]["minor_status"] == "Killed by roland" and rows[ids[0]]["last_update_time"] == later
    assert rows[ids[2]]["last_update_time"] == now
    assert sorted(history) == sorted((i, "Killed") for i in (ids[0], ids[1], ids[3]))


def test_set_status_unconditional_and_repeated(engine: Engine, now: datetime) -> None:
    ids = insert(engine, [job(0), job(1)], now)
    with engine.begin() as conn:
        assert jobs_db.set_status(conn, ids + ids, C.value, "", "Optimizer", now) == ids
        # Only jobs still Received would move: none are.
        assert jobs_db.set_status(conn, ids, C.value, "", "Optimizer", now, expect={R.value}) == []
    with engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(status_history)).scalar()
    assert count == 2


def test_set_status_in_bulk(engine: Engine, now: datetime) -> None:
    ids = insert(engine, [job(i) for i in range(6_000)], now)
    with counting_statements(engine) as statements, engine.begin() as conn:
        changed = jobs_db.set_status(conn, ids, C.value, "", "Optimizer", now, expect={R.value})
    assert changed == ids
    assert len(statements) <= 20


def test_list_jobs(engine: Engine, now: datetime) -> None:
    ids = insert(
        engine,
        [job(0), job(1, owner="andre"), job(2, status=W.value), job(3, status=M.value), job(4, owner="andre", status=W.value)],
        now,
    )
    with engine.connect() as conn:
        def listed(**kw: Any) -> list[int]:
            return [r["job_id"] for r in jobs_db.list_jobs(conn, **kw)]

        assert listed() == ids
        assert listed(owner="andre") == [ids[1], ids[4]]
        assert listed(status="Waiting") == [ids[2], ids[4]]
        assert listed(status=["Waiting", "Matched"]) == [ids[2], ids[3], ids[4]]
        assert listed(owner="roland", status="Waiting") == [ids[2]]
        assert listed(limit=2) == ids[:2]
        assert listed(owner="nobody") == []


def test_set_task_queue_minor_status(engine: Engine, now: datetime) -> None:
    definition = {"tq_key": "k" * 64, "owner": "roland", "owner_group": "lhcb_user", "vo": "lhcb",
                  "submit_pool": None, "cpu_time": 86400, "definition": "{}", "priority": 1}
    with engine.begin() as conn:
        tq = tq_db.get_or_create_task_queues(conn, [definition], now)["k" * 64]
    ids = insert(engine, [job(0, task_queue_id=tq, status=W.value),
                          job(1, task_queue_id=tq, status=W.value, minor_status="No eligible queue"),
                          job(2, task_queue_id=tq, status=M.value)], now)
    with engine.begin() as conn:
        assert jobs_db.set_task_queue_minor_status(conn, tq, W.value, "No eligible queue", now) == 1
        assert jobs_db.set_task_queue_minor_status(conn, tq, W.value, "No eligible queue", now) == 0
    with engine.connect() as conn:
        minors = [r["minor_status"] for r in jobs_db.get_jobs(conn, ids)]
    assert minors == ["No eligible queue", "No eligible queue", ""]


def test_job_ids_are_never_reused(engine: Engine, now: datetime) -> None:
    ids = insert(engine, [job(0), job(1), job(2)], now)
    with engine.begin() as conn:
        conn.execute(jobs_db.jobs.delete().where(jobs_db.jobs.c.job_id == ids[-1]))
    [new] = insert(engine, [job(3)], now)
    assert new > ids[-1]
