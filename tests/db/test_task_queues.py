"""Task-queue queries on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from tests.helpers import patience
from wms.db import jobs as jobs_db
from wms.db import task_queues as tq_db
from wms.db.schema import task_queues

pytestmark = pytest.mark.databases


def tq(key: str, **extra: Any) -> dict[str, Any]:
    d = {"tq_key": key.ljust(64, "0"), "owner": "roland", "owner_group": "lhcb_user", "vo": "lhcb",
         "submit_pool": "p" * 64, "cpu_time": 86400, "definition": '{"Sites": ["LCG.CERN.ch"]}', "priority": 5}
    d.update(extra)
    return d


def add_jobs(engine: Engine, tq_id: int, statuses: list[str], now: datetime) -> list[int]:
    rows = [{"owner": "roland", "owner_group": "lhcb_user", "vo": "lhcb", "status": s, "task_queue_id": tq_id,
             "original_jdl": "[]", "jdl": "[]"} for s in statuses]
    with engine.begin() as conn:
        return jobs_db.insert_jobs(conn, rows, now)


def test_get_or_create_creates_then_reuses(engine: Engine, now: datetime) -> None:
    a, b, c = tq("a"), tq("b", priority=None), tq("c")
    with engine.begin() as conn:
        first = tq_db.get_or_create_task_queues(conn, [a, b], now)
    assert set(first) == {a["tq_key"], b["tq_key"]} and len(set(first.values())) == 2
    with engine.begin() as conn:
        # An existing task queue is used as it is, whatever the new definition says.
        second = tq_db.get_or_create_task_queues(conn, [c, {**a, "priority": 99}, a], now)
        assert tq_db.get_or_create_task_queues(conn, [], now) == {}
    assert second[a["tq_key"]] == first[a["tq_key"]]
    assert list(second) == [c["tq_key"], a["tq_key"]]
    with engine.connect() as conn:
        listed = tq_db.list_task_queues(conn)
    assert [t["tq_key"] for t in listed] == [a["tq_key"], b["tq_key"], c["tq_key"]]
    row_a, row_b, _ = listed
    assert row_a["priority"] == 5 and row_b["priority"] == 1  # the default
    assert row_a["definition"] == '{"Sites": ["LCG.CERN.ch"]}' and row_a["created"] == now
    assert row_a["cpu_time"] == 86400 and row_a["submit_pool"] == "p" * 64


def test_list_task_queues_counts_waiting_jobs(engine: Engine, now: datetime) -> None:
    with engine.begin() as conn:
        ids = tq_db.get_or_create_task_queues(conn, [tq("a"), tq("b")], now)
    a, b = ids[tq("a")["tq_key"]], ids[tq("b")["tq_key"]]
    add_jobs(engine, a, ["Waiting", "Waiting", "Matched", "Running", "Done"], now)
    with engine.connect() as conn:
        counts = {t["tq_id"]: t["waiting_jobs"] for t in tq_db.list_task_queues(conn)}
    assert counts == {a: 2, b: 0}


def test_delete_empty_task_queues(engine: Engine, now: datetime) -> None:
    keys = {name: tq(name)["tq_key"] for name in "abcd"}
    with engine.begin() as conn:
        ids = tq_db.get_or_create_task_queues(conn, [tq(name) for name in "abcd"], now)
    add_jobs(engine, ids[keys["a"]], ["Waiting"], now)
    add_jobs(engine, ids[keys["b"]], ["Matched", "Done"], now)  # Matched may come back to Waiting
    finished = add_jobs(engine, ids[keys["c"]], ["Done", "Killed", "Failed"], now)
    # d has no job at all.
    with engine.begin() as conn:
        assert tq_db.delete_empty_task_queues(conn) == 2
    with engine.connect() as conn:
        left = {t["tq_key"] for t in tq_db.list_task_queues(conn)}
        detached = {j["task_queue_id"] for j in jobs_db.get_jobs(conn, finished)}
    assert left == {keys["a"], keys["b"]}
    assert detached == {None}
    with engine.begin() as conn:
        assert tq_db.delete_empty_task_queues(conn) == 0


@pytest.mark.parametrize("rounds", [3])
def test_concurrent_get_or_create(engine: Engine, now: datetime, rounds: int) -> None:
    """8 submitters with their own connections create the same task queues at once."""
    threads = 8
    for round_ in range(rounds):
        shared = [tq(f"{round_}s{i}") for i in range(5)]
        barrier = threading.Barrier(threads)
        results: list[dict[str, int]] = []
        errors: list[BaseException] = []

        def submit(n: int) -> None:
            # Each asks for the shared keys in its own order, plus one of its own.
            defs = shared[n % 5:] + shared[: n % 5] + [tq(f"{round_}own{n}")]
            try:
                with engine.connect() as conn:
                    barrier.wait(timeout=patience(60))
                    with conn.begin():
                        results.append(tq_db.get_or_create_task_queues(conn, defs, now))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=submit, args=(n,)) for n in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=patience(120))
        assert errors == []
        assert len(results) == threads
        for d in shared:
            assert len({r[d["tq_key"]] for r in results}) == 1
        with engine.connect() as conn:
            stored = conn.execute(select(func.count()).select_from(task_queues)).scalar()
        assert stored == (round_ + 1) * (5 + threads)
