"""Engines: URL normalisation, SQLite settings, and which errors are retryable."""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime
from pathlib import Path

import psycopg
import pymysql
import pytest
import sqlalchemy.exc
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError

from tests.helpers import patience
from wms.db.engine import is_retryable, make_engine, normalise_url
from wms.db.schema import tokens

pytestmark = pytest.mark.databases


@pytest.mark.parametrize(
    ("given", "driver", "query"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg", {}),
        ("postgres://u@h/db", "postgresql+psycopg", {}),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg", {}),
        ("mysql://u@h/db", "mysql+pymysql", {"charset": "utf8mb4"}),
        ("mariadb://u@h/db", "mysql+pymysql", {"charset": "utf8mb4"}),
        ("mysql+pymysql://u@h/db?charset=latin1", "mysql+pymysql", {"charset": "latin1"}),
        ("sqlite:///var/wms.db", "sqlite+pysqlite", {}),
    ],
)
def test_normalise_url(given: str, driver: str, query: dict[str, str]) -> None:
    url = normalise_url(given)
    assert url.drivername == driver
    assert dict(url.query) == query


def test_normalise_url_refuses_other_backends() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        normalise_url("oracle://u@h/db")


def test_sqlite_engine_creates_directory_and_sets_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "wms.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
        assert path.parent.is_dir()
    finally:
        engine.dispose()


def test_sqlite_savepoint_rolls_back_inside_transaction(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'wms.db'}")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER PRIMARY KEY)")
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
            with pytest.raises(DBAPIError):
                with conn.begin_nested():
                    conn.exec_driver_sql("INSERT INTO t VALUES (1)")
            conn.exec_driver_sql("INSERT INTO t VALUES (2)")
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT x FROM t ORDER BY x").scalars().all() == [1, 2]
    finally:
        engine.dispose()


def test_sqlite_reader_may_skip_the_write_lock(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'wms.db'}")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER PRIMARY KEY)")
        with engine.connect() as writer, engine.connect() as reader:
            writer.exec_driver_sql("INSERT INTO t VALUES (1)")  # BEGIN IMMEDIATE: holds the write lock
            reader = reader.execution_options(sqlite_begin="DEFERRED")
            assert reader.exec_driver_sql("SELECT count(*) FROM t").scalar() == 0  # does not wait
            writer.commit()
            reader.rollback()
            assert reader.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("no such table: jobs"), False),
        (pymysql.err.OperationalError(1213, "Deadlock found"), True),
        (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), True),
        (pymysql.err.IntegrityError(1062, "Duplicate entry"), False),
        (psycopg.errors.SerializationFailure("could not serialize"), True),
        (psycopg.errors.DeadlockDetected("deadlock detected"), True),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
        (ValueError("not a database error"), False),
    ],
)
def test_is_retryable_by_driver_error(exc: Exception, expected: bool) -> None:
    assert is_retryable(exc) is expected
    wrapped = OperationalError("SELECT 1", {}, exc)
    assert is_retryable(wrapped) is expected


def _real_conflict(engine: Engine) -> BaseException:
    """Provoke a genuine write conflict on the backend; the exception one side got."""
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE conflict_probe (k INTEGER PRIMARY KEY, v INTEGER)"))
        conn.execute(text("INSERT INTO conflict_probe VALUES (1, 0), (2, 0)"))
    try:
        if engine.dialect.name == "sqlite":
            return _sqlite_busy(engine)
        return _deadlock(engine)
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE conflict_probe"))


def _sqlite_busy(engine: Engine) -> BaseException:
    with engine.connect() as holder, engine.connect() as other:
        holder.execute(text("UPDATE conflict_probe SET v = 1 WHERE k = 1"))  # holds the write lock
        raw = other.connection.driver_connection
        raw.execute("PRAGMA busy_timeout = 50")
        try:
            other.execute(text("UPDATE conflict_probe SET v = 2 WHERE k = 1"))
        except DBAPIError as exc:
            other.rollback()
            raw.execute("PRAGMA busy_timeout = 30000")
            return exc
        finally:
            holder.rollback()
    raise AssertionError("no conflict happened")


def _deadlock(engine: Engine) -> BaseException:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(first: int, second: int) -> None:
        try:
            with engine.begin() as conn:
                conn.execute(text("UPDATE conflict_probe SET v = v + 1 WHERE k = :k"), {"k": first})
                barrier.wait(timeout=patience(60))
                conn.execute(text("UPDATE conflict_probe SET v = v + 1 WHERE k = :k"), {"k": second})
        except DBAPIError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=args) for args in ((1, 2), (2, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=patience(120))
    assert errors, "no deadlock happened"
    return errors[0]


def test_is_retryable_on_a_real_conflict(engine: Engine) -> None:
    exc = _real_conflict(engine)
    assert is_retryable(exc), repr(exc)


def test_is_retryable_rejects_a_real_integrity_error(engine: Engine, now: datetime) -> None:
    row = {"token_hash": "h", "user": "u", "user_group": "g", "vo": "v", "role": "user", "description": "", "created": now}
    with pytest.raises(DBAPIError) as info:
        with engine.begin() as conn:
            conn.execute(tokens.insert(), [row])
            conn.execute(tokens.insert(), [row])
    assert not is_retryable(info.value)


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_statement_longer_than_the_timeout_is_cancelled(database_factory, backend) -> None:
    import time

    engine = make_engine(database_factory(backend), statement_timeout=0.5)
    sleep = "SELECT pg_sleep(3)" if backend == "postgresql" else "SELECT SLEEP(3)"
    try:
        started = time.monotonic()
        with pytest.raises(OperationalError):
            with engine.connect() as conn:
                conn.execute(text(sleep)).all()
        assert time.monotonic() - started < 2.5
        with engine.connect() as conn:  # the next statement on the pool still runs
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_the_pool_takes_its_settings(database_factory, backend) -> None:
    from wms.db.engine import PoolOptions

    options = PoolOptions(size=3, max_overflow=1, recycle=0, pre_ping=True, timeout=0.5, connect_timeout=4)
    engine = make_engine(database_factory(backend), pool=options)
    try:
        pool = engine.pool
        assert (pool.size(), pool._max_overflow, pool._recycle, pool._pre_ping, pool._timeout) == (3, 1, -1, True, 0.5)
        held = [engine.connect() for _ in range(4)]           # size + overflow: all there is
        with pytest.raises(sqlalchemy.exc.TimeoutError):       # the next one waits `timeout`, then fails
            engine.connect()
        for conn in held:
            conn.close()
        with engine.connect() as conn:                         # pre-ping checks a connection before use
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_runtime_sizes_its_pool_from_wms_yaml(tmp_path: Path, database_factory, backend) -> None:
    from wms.config import load_config
    from wms.services.runtime import Runtime

    (tmp_path / "wms.yaml").write_text("database_pool: {size: 2, max_overflow: 5, recycle: 600}\n")
    config = load_config(tmp_path, environ={"WMS_DATABASE_URL": database_factory(backend)})
    engine = Runtime.create(config).engine
    try:
        assert (engine.pool.size(), engine.pool._max_overflow, engine.pool._recycle) == (2, 5, 600)
    finally:
        engine.dispose()


def test_a_database_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    from tests.servers import free_port
    from wms.db.engine import database_problem

    port = free_port()
    assert database_problem(make_engine(f"sqlite:///{tmp_path / 'ok.db'}")) is None
    problem = database_problem(make_engine(f"postgresql://wms@127.0.0.1:{port}/wms"))
    assert problem is not None and "\n" not in problem and "Connection refused" in problem
    problem = database_problem(make_engine(f"mysql://root@127.0.0.1:{port}/wms"))
    assert problem == "Can't connect to MySQL server on '127.0.0.1' ([Errno 111] Connection refused)"
