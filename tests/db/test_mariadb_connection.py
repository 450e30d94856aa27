"""MariaDB: no COMMIT or ROLLBACK goes to the server when it cannot change
anything, and every one that can still does (wms/db/mariadb_connection.py).

Each test counts what the server itself saw, with the session's own
counters (SHOW SESSION STATUS), on a pool of one connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError, OperationalError

from wms.db.engine import make_engine, routine_committed
from wms.db.mariadb_connection import TransactionAwareConnection


@pytest.fixture
def engine(database_factory) -> Iterator[Engine]:
    engine = make_engine(database_factory("mariadb"), pool_size=1, max_overflow=0)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"))
        conn.execute(text("CREATE PROCEDURE commits_itself(IN p INT) "
                          "BEGIN INSERT INTO t VALUES (p, p); SELECT p AS id; COMMIT; END"))
        conn.execute(text("CREATE PROCEDURE leaves_it_open(IN p INT) "
                          "BEGIN INSERT INTO t VALUES (p, p); SELECT p AS id; END"))
    yield engine
    engine.dispose()


def ends(engine: Engine) -> tuple[int, int]:
    """(COMMITs, ROLLBACKs) the server has run on the pool's one connection.
    Counted from a statement of its own, so this one is always sent."""
    with engine.connect() as conn:
        rows = dict(conn.execute(text("SHOW SESSION STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')")).all())
        conn.rollback()
    return int(rows["Com_commit"]), int(rows["Com_rollback"])


def rows(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT id FROM t ORDER BY id")).scalars())


def test_the_engine_connects_with_it(engine: Engine) -> None:
    with engine.connect() as conn:
        assert isinstance(conn.connection.dbapi_connection, TransactionAwareConnection)


def test_a_committed_transaction_is_not_rolled_back_again_by_the_pool(engine: Engine) -> None:
    commits, rollbacks = ends(engine)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1, 1)"))
    # The ROLLBACK of ends() itself, and no other: before, the pool sent one after the COMMIT.
    assert ends(engine) == (commits + 1, rollbacks + 1)
    assert rows(engine) == [1]


def test_a_read_is_still_ended_because_it_holds_the_table(engine: Engine) -> None:
    # After a SELECT with autocommit off the server says "no transaction",
    # yet holds the table's metadata lock until COMMIT or ROLLBACK.
    commits, rollbacks = ends(engine)
    with engine.connect() as conn:
        conn.execute(text("SELECT * FROM t")).all()
        assert not conn.connection.dbapi_connection.server_status & 1
    assert ends(engine) == (commits, rollbacks + 2)
    other = make_engine(engine.url, pool_size=1)
    try:
        with other.connect() as conn:
            conn.execute(text("SET SESSION lock_wait_timeout = 2"))
            conn.execute(text("ALTER TABLE t ADD COLUMN w INT"))  # the pool's connection no longer holds t
    finally:
        other.dispose()


def test_a_failed_statement_is_rolled_back(engine: Engine) -> None:
    with pytest.raises(IntegrityError):
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (1, 1)"))
            conn.execute(text("INSERT INTO t VALUES (1, 2)"))
    assert rows(engine) == []


@pytest.mark.parametrize("routine", ["commits_itself", "leaves_it_open"])
def test_one_commit_whether_the_routine_or_the_caller_makes_it(engine: Engine, routine: str) -> None:
    # commits_itself: the procedure's COMMIT, then nothing from the caller
    # or the pool. leaves_it_open: the server's status after the CALL says
    # a transaction is open, so the caller's COMMIT goes out whatever the
    # caller believed. One COMMIT either way, and the row is there.
    commits, rollbacks = ends(engine)
    with engine.begin() as conn:
        assert conn.execute(text(f"CALL {routine}(7)")).scalar_one() == 7
        routine_committed(conn)
    assert ends(engine) == (commits + 1, rollbacks + 1)
    assert rows(engine) == [7]


def test_a_statement_after_the_routine_is_committed_by_the_caller(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CALL commits_itself(1)")).all()
        routine_committed(conn)
        conn.execute(text("INSERT INTO t VALUES (2, 2)"))
    assert rows(engine) == [1, 2]


def test_a_dropped_connection_is_not_taken_for_an_idle_one(engine: Engine) -> None:
    # The server ends the session while the pool holds it: the next use
    # fails, is invalidated, and a new connection serves the one after.
    with engine.connect() as conn:
        victim = conn.execute(text("SELECT CONNECTION_ID()")).scalar_one()
        conn.rollback()
    killer = make_engine(engine.url, pool_size=1)
    try:
        with killer.connect() as conn:
            conn.execute(text(f"KILL {victim}"))
    finally:
        killer.dispose()
    with pytest.raises(OperationalError):
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (3, 3)"))
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (4, 4)"))
    assert rows(engine) == [4]


def test_concurrent_claims_of_one_row_commit_once(engine: Engine) -> None:
    # Two connections each run the self-committing routine on the same key:
    # one inserts, the other is refused, and neither leaves anything open.
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM t"))
    both = make_engine(engine.url, pool_size=2, max_overflow=0)
    outcomes: list[str] = []

    def claim() -> None:
        try:
            with both.begin() as conn:
                conn.execute(text("CALL commits_itself(9)")).all()
                routine_committed(conn)
            outcomes.append("committed")
        except IntegrityError:
            outcomes.append("refused")

    try:
        threads = [threading.Thread(target=claim) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert sorted(outcomes) == ["committed", "refused"]
        with both.connect() as conn:
            conn.execute(text("SET SESSION lock_wait_timeout = 2"))
            started = time.monotonic()
            conn.execute(text("ALTER TABLE t ADD COLUMN z INT"))     # nobody holds the table
            assert time.monotonic() - started < 2
    finally:
        both.dispose()
    assert rows(engine) == [9]
