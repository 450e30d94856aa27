"""Engines for the three supported databases, and what differs between them.

``make_engine`` is the only place that knows about drivers and connection
settings; ``is_retryable`` tells a service's retry loop which errors mean
"the same transaction may succeed if run again"; ``insert_ignoring_duplicates``
is the one dialect-specific statement the query modules need;
``database_problem`` says in one line why a database does not answer.

SQLite transactions start with ``BEGIN IMMEDIATE``: the writer lock is taken
at the start, so two writers queue on the busy timeout instead of failing
with "database is locked" when one of them upgrades a read snapshot to a
write. A read-only caller may ask for a plain deferred ``BEGIN`` with
``conn.execution_options(sqlite_begin="DEFERRED")`` before its first
statement.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Table, create_engine, event, text
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from wms.core.errors import ConfigError
from wms.db import mariadb_connection

# How long a SQLite connection waits for the writer lock before failing.
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Connections kept per process for the server databases (the defaults of
# wms.yaml database_pool). The API runs its endpoints on at most 40 threads
# (anyio's default), so 10 + 30 lets every one of them hold a connection:
# under a burst a request waits for a thread, never for a connection, which
# timed out after 30 s and answered 500 when the pool was smaller than the
# thread pool (256 pilots at once, measured).
POOL_SIZE = 10
MAX_OVERFLOW = 30
# MariaDB closes idle connections after wait_timeout (8 h by default).
POOL_RECYCLE_S = 3600
POOL_TIMEOUT_S = 30
# MariaDB session limit on one GROUP_CONCAT result (bytes).
GROUP_CONCAT_MAX_LEN = 16 * 1024 * 1024
# A database host that drops packets would otherwise hold a connection
# attempt (and the request, or the start-up check) for the kernel's TCP
# time-out, about two minutes.
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class PoolOptions:
    """The connection pool of one process (wms.yaml ``database_pool``; docs/deployment.md).

    ``recycle`` 0 keeps connections for ever. SQLite ignores them all: its
    connections are files opened in-process.
    """

    size: int = POOL_SIZE
    max_overflow: int = MAX_OVERFLOW
    recycle: int = POOL_RECYCLE_S
    # No pre-ping by default: it costs a round trip on every checkout
    # (about a millisecond per Matcher request here). A connection the
    # server dropped fails on its first statement instead, is invalidated,
    # and the transaction is retried on a fresh one (is_retryable). Behind
    # a proxy or firewall that drops idle connections silently, turn it on.
    pre_ping: bool = False
    timeout: float = POOL_TIMEOUT_S
    connect_timeout: int = CONNECT_TIMEOUT_S


# PostgreSQL SQLSTATEs: serialization_failure, deadlock_detected.
_PG_RETRYABLE = frozenset({"40001", "40P01"})
# MariaDB/MySQL error numbers: lock wait timeout, deadlock, record changed
# since last read (snapshot isolation), WSREP deadlock (Galera).
_MYSQL_RETRYABLE = frozenset({1205, 1213, 1020, 1317})
# SQLite primary result codes: SQLITE_BUSY, SQLITE_LOCKED.
_SQLITE_RETRYABLE_CODES = frozenset({5, 6})
_SQLITE_RETRYABLE_TEXT = ("database is locked", "database is busy", "database table is locked")


def normalise_url(url: str | URL) -> URL:
    """The URL with our driver for its backend (psycopg 3, PyMySQL, sqlite3)."""
    u = make_url(url)
    backend = u.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return u.set(drivername="postgresql+psycopg")
    if backend in ("mysql", "mariadb"):
        query = dict(u.query)
        query.setdefault("charset", "utf8mb4")
        return u.set(drivername="mysql+pymysql", query=query)
    if backend == "sqlite":
        return u.set(drivername="sqlite+pysqlite")
    raise ValueError(f"unsupported database URL {u.render_as_string(hide_password=True)!r}")


def make_engine(url: str | URL, *, statement_timeout: float = 0, pool: PoolOptions | None = None,
                **kwargs: Any) -> Engine:
    """An engine for ``url`` (SQLite, PostgreSQL or MariaDB), ready for use.

    *statement_timeout* (seconds, 0 for none) bounds every statement of the
    sessions on PostgreSQL (``statement_timeout``) and MariaDB
    (``max_statement_time``, and ``innodb_lock_wait_timeout`` for lock
    waits), so that no request holds locks for long; SQLite has no such
    setting (its writers wait at most SQLITE_BUSY_TIMEOUT_MS for the lock).
    *pool* sizes the connection pool (PoolOptions' defaults if None).
    Extra keyword arguments go to ``sqlalchemy.create_engine``. A URL that
    does not read or names another database raises ConfigError.
    """
    try:
        u = normalise_url(url)
    except (ValueError, ArgumentError) as exc:
        raise ConfigError(f"{exc} (expected sqlite:///PATH, postgresql://... or mysql://...)",
                          where="database_url") from None
    if u.get_backend_name() == "sqlite":
        return _make_sqlite_engine(u, **kwargs)
    pool = pool or PoolOptions()
    options: dict[str, Any] = {
        "pool_size": pool.size,
        "max_overflow": pool.max_overflow,
        "pool_pre_ping": pool.pre_ping,
        "pool_recycle": pool.recycle if pool.recycle > 0 else -1,
        "pool_timeout": pool.timeout,
    }
    # Both drivers take connect_timeout (seconds); one in the URL wins.
    connect_timeout = {} if "connect_timeout" in u.query else {"connect_timeout": pool.connect_timeout}
    if u.get_backend_name() == "mysql":
        # As on PostgreSQL: every statement sees what committed before it.
        # REPEATABLE READ would hide a row another transaction inserted
        # after our first read (get-or-create would then miss it), and its
        # gap locks deadlock concurrent inserters.
        options["isolation_level"] = "READ COMMITTED"
        # GROUP_CONCAT results (pools.get_pools_for_queue) up to the default
        # max_allowed_packet instead of 1 MiB.
        session = f"SET SESSION group_concat_max_len = {GROUP_CONCAT_MAX_LEN}"
        if statement_timeout > 0:
            session += (f", max_statement_time = {statement_timeout:g}"
                        f", innodb_lock_wait_timeout = {max(1, math.ceil(statement_timeout))}")
        options["connect_args"] = {"init_command": session}
    elif statement_timeout > 0:
        options["connect_args"] = {"options": f"-c statement_timeout={max(1, round(statement_timeout * 1000))}"}
    connect_args = {**connect_timeout, **options.get("connect_args", {}), **kwargs.pop("connect_args", {})}
    options.update(kwargs)
    if connect_args:
        options["connect_args"] = connect_args
    engine = create_engine(u, **options)
    if u.get_backend_name() == "mysql":
        event.listen(engine, "do_connect", _connect_mariadb)
    return engine


def _connect_mariadb(dialect: Any, record: Any, cargs: tuple, cparams: dict[str, Any]) -> Any:
    # PyMySQL's connection, minus the COMMIT and ROLLBACK that cannot change anything.
    return mariadb_connection.TransactionAwareConnection(*cargs, **cparams)


def routine_committed(conn: Connection) -> None:
    """Say that the statement just run on ``conn`` was a stored routine that
    ended by committing, so the transaction's own COMMIT, and the pool's
    ROLLBACK as it takes the connection back, need not go to the server
    (MariaDB; mariadb_connection.py). Elsewhere, nothing changes."""
    dbapi_connection = conn.connection.dbapi_connection
    if isinstance(dbapi_connection, mariadb_connection.TransactionAwareConnection):
        dbapi_connection.routine_committed()


def database_problem(engine: Engine) -> str | None:
    """None when the database answers a query; else the driver's reason, in one line."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return describe_database_error(exc)
    return None


def describe_database_error(exc: BaseException, url: str | URL | None = None) -> str:
    """One line for a database error: the database (password hidden) and the
    driver's first line, without SQLAlchemy's statement dump and link."""
    orig = getattr(exc, "orig", None) or exc
    args = getattr(orig, "args", ())
    # PyMySQL: (2003, "Can't connect to MySQL server on ...")
    text_ = str(args[1]) if len(args) == 2 and isinstance(args[0], int) else str(orig)
    lines = [line.strip() for line in text_.splitlines() if line.strip()]
    reason = lines[0] if lines else type(orig).__name__
    return reason if url is None else f"database {safe_url(url)}: {reason}"


def safe_url(url: str | URL) -> str:
    """A database URL fit to show: its password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(a database_url that does not read)"


def _make_sqlite_engine(u: URL, **kwargs: Any) -> Engine:
    if u.database and u.database != ":memory:" and not u.database.startswith("file:"):
        Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    connect_args = {"check_same_thread": False, **kwargs.pop("connect_args", {})}
    engine = create_engine(u, connect_args=connect_args, **kwargs)
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    return engine


def _configure_sqlite_connection(dbapi_connection: sqlite3.Connection, record: Any) -> None:
    # We emit BEGIN ourselves (see _begin_sqlite_transaction): sqlite3's own
    # transaction control skips BEGIN before SELECT and SAVEPOINT.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL never corrupts the database; a power cut may lose
        # the last commits, a process crash loses nothing. FULL would flush the
        # disk at every commit and cost the Matcher most of its rate.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _begin_sqlite_transaction(conn: Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
    if mode not in ("IMMEDIATE", "DEFERRED", "EXCLUSIVE"):
        raise ValueError(f"sqlite_begin must be IMMEDIATE, DEFERRED or EXCLUSIVE, not {mode!r}")
    conn.exec_driver_sql(f"BEGIN {mode}")


def reading(engine: Engine) -> Connection:
    """A connection for reads only: on SQLite its transactions begin DEFERRED,
    so readers do not queue behind writers (WAL readers never block)."""
    conn = engine.connect()
    if engine.dialect.name == "sqlite":
        conn = conn.execution_options(sqlite_begin="DEFERRED")
    return conn


def is_retryable(exc: BaseException) -> bool:
    """True when ``exc`` is a conflict that running the transaction again may resolve.

    Serialization failures and deadlocks (PostgreSQL), deadlocks and lock
    wait timeouts (MariaDB), "database is locked" (SQLite), and a connection
    the server had dropped (pooled connections are not pinged before use).
    """
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    if orig is None:
        return False
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate is not None:
        return sqlstate in _PG_RETRYABLE
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None and (code & 0xFF) in _SQLITE_RETRYABLE_CODES:
            return True
        return any(text in str(orig).lower() for text in _SQLITE_RETRYABLE_TEXT)
    args = getattr(orig, "args", ())
    return bool(args) and isinstance(args[0], int) and args[0] in _MYSQL_RETRYABLE


# PostgreSQL query_canceled (statement_timeout); MariaDB max_statement_time
# exceeded (ER_STATEMENT_TIMEOUT).
_PG_TIMEOUT = "57014"
_MYSQL_TIMEOUT = 1969


#: What the database raises when it is away, or too busy to take a request
#: (a connection refused or lost, a lock or deadlock it gave up on, no free
#: connection in the pool in time): the caller should come back, not report
#: a defect. A statement the database refuses as wrong (ProgrammingError,
#: IntegrityError) is ours, and stays a 500.
DATABASE_AWAY = (OperationalError, InterfaceError, PoolTimeout)


def is_statement_timeout(exc: BaseException) -> bool:
    """True when ``exc`` is a statement cancelled by the engine's statement_timeout."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    if orig is None:
        return False
    if (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) == _PG_TIMEOUT:
        return True
    args = getattr(orig, "args", ())
    return bool(args) and args[0] == _MYSQL_TIMEOUT


def insert_ignoring_duplicates(
    conn: Connection, table: Table, rows: list[dict[str, Any]], key: list[str]
) -> int:
    """Insert ``rows``, silently skipping those whose ``key`` already exists.

    Safe against a concurrent inserter of the same key: the database waits
    for it and then skips the row (PostgreSQL, SQLite: ``ON CONFLICT DO
    NOTHING``; MariaDB: ``INSERT IGNORE``). Rows go in key order, so that
    concurrent callers take their locks in the same order and do not
    deadlock. Returns the number of rows inserted: exact for a single row;
    for several, drivers may not report it.
    """
    if not rows:
        return 0
    rows = sorted(rows, key=lambda r: tuple(r[k] for k in key))
    name = conn.dialect.name
    if name == "postgresql":
        stmt = postgresql.insert(table).on_conflict_do_nothing(index_elements=key)
    elif name == "sqlite":
        stmt = sqlite.insert(table).on_conflict_do_nothing(index_elements=key)
    elif name in ("mysql", "mariadb"):
        # IGNORE also turns other errors into warnings (e.g. truncation), so
        # callers pass values that fit their columns.
        stmt = mysql.insert(table).prefix_with("IGNORE")
    else:  # pragma: no cover - no other backend is supported
        raise NotImplementedError(name)
    # One row: a plain execute, whose rowcount is exact on every driver
    # (SQLAlchemy keeps an INSERT's rowcount only when asked to).
    stmt = stmt.execution_options(preserve_rowcount=True)
    result = conn.execute(stmt, rows[0] if len(rows) == 1 else rows)
    return max(result.rowcount, 0)
