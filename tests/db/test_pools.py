"""Submit-pool queries on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, bindparam, func, select, text

from tests.helpers import patience
from wms.core.errors import NotFound
from wms.db import jobs as jobs_db
from wms.db import pools as pools_db
from wms.db.engine import GROUP_CONCAT_MAX_LEN
from wms.db.schema import UtcDateTime, pool_queues, submit_pools

pytestmark = pytest.mark.databases

P1, P2, P3 = "1" * 64, "2" * 64, "3" * 64
CERN_LONG = ("LCG.CERN.ch", "ce01.cern.ch", "long")
CERN_SHORT = ("LCG.CERN.ch", "ce01.cern.ch", "short")
RAL_LONG = ("LCG.RAL.uk", "ce.ral.ac.uk", "long")


def in_transaction(engine: Engine, fn: Callable[[Connection], Any]) -> Any:
    with engine.begin() as conn:
        return fn(conn)


def add_pool(engine: Engine, pool_id: str, queues: list[tuple[str, str, str]], now: datetime) -> None:
    with engine.begin() as conn:
        pools_db.upsert_pool(conn, pool_id, '{"Requirements": {}}', "lhcb", now)
        pools_db.replace_pool_queues(conn, pool_id, queues, now)


def add_jobs(engine: Engine, pool_id: str, statuses: list[str], now: datetime) -> list[int]:
    rows = [
        {"owner": "roland", "owner_group": "lhcb_user", "vo": "lhcb", "status": s, "submit_pool": pool_id,
         "original_jdl": "[]", "jdl": "[]"}
        for s in statuses
    ]
    return in_transaction(engine, lambda conn: jobs_db.insert_jobs(conn, rows, now))


def test_upsert_pool_creates_once_and_leaves_existing(engine: Engine, now: datetime) -> None:
    later = now + timedelta(hours=1)
    assert in_transaction(engine, lambda c: pools_db.upsert_pool(c, P1, '{"a": 1}', "lhcb", now)) is True
    assert in_transaction(engine, lambda c: pools_db.upsert_pool(c, P1, '{"a": 2}', "other", later)) is False
    with engine.connect() as conn:
        pool = pools_db.get_pool(conn, P1)
    assert pool == {
        "pool_id": P1, "requirements": '{"a": 1}', "vo": "lhcb",
        "created": now, "last_update": now, "last_used": now, "queues": [],
    }


def test_replace_pool_queues(engine: Engine, now: datetime) -> None:
    add_pool(engine, P1, [CERN_LONG, RAL_LONG, CERN_LONG], now)
    later = now + timedelta(minutes=15)
    with engine.connect() as conn:
        assert pools_db.get_pool(conn, P1)["queues"] == [CERN_LONG, RAL_LONG]
    in_transaction(engine, lambda c: pools_db.replace_pool_queues(c, P1, [CERN_SHORT], later))
    with engine.connect() as conn:
        pool = pools_db.get_pool(conn, P1)
        updated = conn.execute(select(pool_queues.c.updated)).scalars().all()
    assert pool["queues"] == [CERN_SHORT]
    assert pool["last_update"] == later and pool["created"] == now
    assert updated == [later]
    in_transaction(engine, lambda c: pools_db.replace_pool_queues(c, P1, [], later))
    with engine.connect() as conn:
        assert pools_db.get_pool(conn, P1)["queues"] == []
        assert pools_db.get_pool(conn, P2) is None
    with pytest.raises(NotFound):
        in_transaction(engine, lambda c: pools_db.replace_pool_queues(c, P2, [CERN_LONG], later))


def test_get_pools_for_queue(engine: Engine, now: datetime) -> None:
    add_pool(engine, P3, [CERN_LONG], now)
    add_pool(engine, P1, [CERN_LONG, RAL_LONG], now)
    add_pool(engine, P2, [CERN_SHORT], now)
    with engine.connect() as conn:
        assert pools_db.get_pools_for_queue(conn, *CERN_LONG) == [P1, P3]
        assert pools_db.get_pools_for_queue(conn, *RAL_LONG) == [P1]
        assert pools_db.get_pools_for_queue(conn, *CERN_SHORT) == [P2]
        assert pools_db.get_pools_for_queue(conn, "LCG.CERN.ch", "ce01.cern.ch", "nope") == []
        if conn.dialect.name == "mysql":
            # A GROUP_CONCAT cut short by the session limit: the plain query answers.
            conn.exec_driver_sql("SET SESSION group_concat_max_len = 100")
            try:
                assert pools_db.get_pools_for_queue(conn, *CERN_LONG) == [P1, P3]
            finally:
                conn.exec_driver_sql(f"SET SESSION group_concat_max_len = {GROUP_CONCAT_MAX_LEN}")


def test_list_pools_counts_jobs_and_queues(engine: Engine, now: datetime) -> None:
    add_pool(engine, P1, [CERN_LONG, RAL_LONG], now)
    add_pool(engine, P2, [], now)
    add_jobs(engine, P1, ["Waiting", "Waiting", "Running", "Done"], now)
    add_jobs(engine, P3, ["Waiting"], now)  # a pool that has no row: not listed
    with engine.connect() as conn:
        listed = pools_db.list_pools(conn)
    assert [p["pool_id"] for p in listed] == [P1, P2]
    assert listed[0]["jobs"] == {"Waiting": 2, "Running": 1, "Done": 1}
    assert listed[0]["queue_count"] == 2 and listed[0]["vo"] == "lhcb"
    assert listed[1]["jobs"] == {} and listed[1]["queue_count"] == 0


def test_touch_and_unused_pools(engine: Engine, now: datetime) -> None:
    old = now - timedelta(days=2)
    for pool_id in (P1, P2, P3):
        in_transaction(engine, lambda c, p=pool_id: pools_db.upsert_pool(c, p, "{}", "lhcb", old))
    add_jobs(engine, P1, ["Done", "Failed", "Killed"], now)  # every job finished: unused
    add_jobs(engine, P2, ["Done", "Matched"], now)  # a Matched job keeps it
    cut = now - timedelta(days=1)
    with engine.connect() as conn:
        assert pools_db.unused_pools(conn, cut) == [P1, P3]
    in_transaction(engine, lambda c: pools_db.touch_pool_used(c, [P3], now))
    with engine.connect() as conn:
        assert pools_db.unused_pools(conn, cut) == [P1]
        assert pools_db.get_pool(conn, P3)["last_used"] == now
    # A Running or Stalled job may still come back to Waiting: it keeps its pool.
    for status in ("Received", "Checking", "Waiting", "Matched", "Running", "Stalled"):
        [job_id] = add_jobs(engine, P1, [status], now)
        with engine.connect() as conn:
            assert pools_db.unused_pools(conn, cut) == [], status
        in_transaction(engine, lambda c, j=job_id: jobs_db.set_status(c, [j], "Killed", "", "test", now))


def test_delete_pools(engine: Engine, now: datetime) -> None:
    add_pool(engine, P1, [CERN_LONG], now)
    add_pool(engine, P2, [CERN_LONG], now)
    add_pool(engine, P3, [RAL_LONG], now)
    assert in_transaction(engine, lambda c: pools_db.delete_pools(c, [P1, P3, "9" * 64])) == 2
    with engine.connect() as conn:
        assert [p["pool_id"] for p in pools_db.list_pools(conn)] == [P2]
        assert pools_db.get_pools_for_queue(conn, *CERN_LONG) == [P2]
        assert conn.execute(select(func.count()).select_from(pool_queues)).scalar() == 1


def test_delete_pools_only_if_still_unused(engine: Engine, now: datetime) -> None:
    old = now - timedelta(days=2)
    cut = now - timedelta(days=1)
    add_pool(engine, P1, [CERN_LONG], old)
    add_pool(engine, P2, [CERN_LONG], old)
    add_pool(engine, P3, [CERN_LONG], old)
    with engine.connect() as conn:
        listed = pools_db.unused_pools(conn, cut)
    assert listed == [P1, P2, P3]
    # Meanwhile a job arrives in P2 and P3 is used again.
    add_jobs(engine, P2, ["Waiting"], now)
    in_transaction(engine, lambda c: pools_db.touch_pool_used(c, [P3], now))
    assert in_transaction(engine, lambda c: pools_db.delete_pools(c, listed, unused_before=cut)) == 1
    with engine.connect() as conn:
        assert pools_db.get_pools_for_queue(conn, *CERN_LONG) == [P2, P3]


def test_concurrent_upsert_pool(engine: Engine, now: datetime) -> None:
    threads = 8
    for round_ in range(3):
        pool_id = f"{round_:064d}"
        barrier = threading.Barrier(threads)
        results: list[bool] = []
        errors: list[BaseException] = []

        def submit() -> None:
            try:
                with engine.connect() as conn:
                    barrier.wait(timeout=patience(60))
                    with conn.begin():
                        results.append(pools_db.upsert_pool(conn, pool_id, "{}", "lhcb", now))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=submit) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=patience(120))
        assert errors == []
        assert sorted(results) == [False] * (threads - 1) + [True]
        with engine.connect() as conn:
            count = conn.execute(select(func.count()).where(submit_pools.c.pool_id == pool_id)).scalar()
        assert count == 1


N_POOLS = 100_000
# 10 sites x 5 CEs x 4 queues; queue k is (k // 20, (k % 20) // 4, k % 4).
QUEUES = [(f"LCG.Site{s}.org", f"ce{c}.site{s}.org", f"q{q}") for s in range(10) for c in range(5) for q in range(4)]


def _sql(dialect: str) -> dict[str, str]:
    """The dialect's spelling of what the bulk load needs."""
    if dialect == "postgresql":
        return {"numbers": f"SELECT generate_series(0, {N_POOLS - 1}) AS i", "hex": "lpad(to_hex(i), 64, '0')",
                "div": "/", "cat": "{} || {} || {} || {}"}
    if dialect == "sqlite":
        return {"numbers": f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {N_POOLS - 1}) SELECT i FROM n",
                "hex": "printf('%064x', i)", "div": "/", "cat": "{} || {} || {} || {}"}
    return {"numbers": f"SELECT seq AS i FROM seq_0_to_{N_POOLS - 1}", "hex": "LOWER(LPAD(HEX(i), 64, '0'))",
            "div": "DIV", "cat": "CONCAT({}, {}, {}, {})"}


def load_pools(conn: Connection, now: datetime) -> None:
    """100,000 pools, each eligible in 2 of the 200 queues: two INSERT .. SELECT on the server.

    Pool i gets queues i % 200 and (7 i + 3) % 200 (never the same one),
    so every queue has 1,000 pools.
    """
    sql = _sql(conn.dialect.name)
    stamp = bindparam("now", now, type_=UtcDateTime)
    conn.execute(
        text(f"INSERT INTO submit_pools (pool_id, requirements, vo, created, last_update, last_used) "
             f"SELECT {sql['hex']}, '{{}}', 'lhcb', :now, :now, :now FROM ({sql['numbers']}) AS numbers").bindparams(stamp)
    )
    for k in ("i % 200", "(i * 7 + 3) % 200"):
        s, c, q = f"(({k}) {sql['div']} 20)", f"((({k}) % 20) {sql['div']} 4)", f"(({k}) % 4)"
        site = sql["cat"].format("'LCG.Site'", s, "'.org'", "''")
        ce = sql["cat"].format("'ce'", c, "'.site'", sql["cat"].format(s, "'.org'", "''", "''"))
        queue = sql["cat"].format("'q'", q, "''", "''")
        conn.execute(
            text(f"INSERT INTO pool_queues (pool_id, site, ce, queue, updated) "
                 f"SELECT {sql['hex']}, {site}, {ce}, {queue}, :now FROM ({sql['numbers']}) AS numbers").bindparams(stamp)
        )


def analyse(engine: Engine) -> None:
    """Statistics and visibility as the server keeps them in steady state (autovacuum)."""
    name = engine.dialect.name
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if name == "postgresql":
            conn.execute(text("VACUUM ANALYZE pool_queues"))
        elif name == "sqlite":
            conn.execute(text("ANALYZE"))
        else:
            conn.execute(text("ANALYZE TABLE pool_queues"))


def test_get_pools_for_queue_at_100000_pools(engine: Engine, now: datetime) -> None:
    """getSubmitPoolsForQueue stays within its 5 ms budget at 100,000 pools.

    200 queues (10 sites x 5 CEs x 4 queues), each pool eligible in 2 of
    them: 200,000 pool_queues rows, 1,000 pools per queue. The bound
    asserted is looser (20 ms) so that a busy CI machine stays green; the
    median is printed.
    """
    started = time.perf_counter()
    with engine.begin() as conn:
        load_pools(conn, now)
    analyse(engine)
    loaded = time.perf_counter() - started
    target = QUEUES[42]
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(submit_pools)).scalar() == N_POOLS
        expected = sorted(f"{i:064x}" for i in range(N_POOLS) if 42 in (i % 200, (i * 7 + 3) % 200))
        assert pools_db.get_pools_for_queue(conn, *target) == expected
        timings = []
        for _ in range(50):
            t = time.perf_counter()
            result = pools_db.get_pools_for_queue(conn, *target)
            timings.append(time.perf_counter() - t)
    median = statistics.median(timings)
    print(
        f"\n{engine.dialect.name}: loaded {N_POOLS} pools in {loaded:.1f} s; getSubmitPoolsForQueue "
        f"-> {len(result)} pools, median {median * 1000:.2f} ms, max {max(timings) * 1000:.2f} ms"
    )
    assert len(result) == 1000
    assert median < 0.020
