"""Shared fixtures: one database per backend, upgraded once per session.

``db_url`` is parametrised over SQLite, PostgreSQL and MariaDB. Each pytest
session creates its own throwaway database on the two servers
(``wms_test_<pid>_<random>``) and drops it at the end, so parallel runs on
one machine never meet; SQLite gets a file in a temporary directory.
``engine`` is migrated with ``wms.db.migrate.upgrade`` once per backend and
every table is emptied before each test.

An unreachable server skips its tests with the reason, unless the
environment variable CI is "true": then the test fails, naming the server.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

import pytest
from sqlalchemy import Engine, delete, text
from sqlalchemy.engine import make_url

from wms.db import migrate, schema
from wms.db.engine import make_engine

PG_ADMIN_URL = os.environ.get("WMS_TEST_POSTGRESQL_URL", "postgresql://postgres@127.0.0.1:5432/test")
MARIADB_ADMIN_URL = os.environ.get("WMS_TEST_MARIADB_URL", "mysql://root@127.0.0.1:3306/test")
BACKENDS = ("sqlite", "postgresql", "mariadb")


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


@pytest.fixture
def now() -> datetime:
    """One aware UTC instant for the whole test."""
    return utcnow()


def _unreachable(server: str, url: str, exc: BaseException) -> None:
    where = make_url(url)
    message = f"{server} not reachable at {where.host}:{where.port}: {exc}".splitlines()[0]
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


class ThrowawayDatabases:
    """Creates databases on a server for this session, and drops them all at the end."""

    def __init__(self, server: str, admin_url: str) -> None:
        self.server = server
        self.admin_url = admin_url
        self.created: list[str] = []
        self._admin: Engine | None = None
        self._error: BaseException | None = None

    def _admin_engine(self) -> Engine:
        if self._error is not None:
            _unreachable(self.server, self.admin_url, self._error)
        if self._admin is None:
            admin = make_engine(self.admin_url, isolation_level="AUTOCOMMIT", pool_size=1)
            try:
                with admin.connect() as conn:
                    conn.execute(text("SELECT 1"))
            except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
                admin.dispose()
                self._error = exc
                _unreachable(self.server, self.admin_url, exc)
            self._admin = admin
        return self._admin

    def create(self) -> str:
        """A new empty database; its URL."""
        admin = self._admin_engine()
        name = f"wms_test_{os.getpid()}_{secrets.token_hex(4)}"
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        self.created.append(name)
        return make_url(self.admin_url).set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        if self._admin is None:
            return
        with self._admin.connect() as conn:
            for name in self.created:
                if self.server == "PostgreSQL":
                    conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                else:
                    conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        self._admin.dispose()


@pytest.fixture(scope="session")
def database_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], str]]:
    """``create(backend)`` -> the URL of a new, empty database on that backend."""
    servers = {
        "postgresql": ThrowawayDatabases("PostgreSQL", PG_ADMIN_URL),
        "mariadb": ThrowawayDatabases("MariaDB", MARIADB_ADMIN_URL),
    }

    def create(backend: str) -> str:
        if backend == "sqlite":
            return f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'wms.db'}"
        return servers[backend].create()

    yield create
    for server in servers.values():
        server.drop_all()


@pytest.fixture(scope="session", params=BACKENDS)
def db_url(request: pytest.FixtureRequest, database_factory: Callable[[str], str]) -> str:
    """The URL of this session's database on each backend (ids: sqlite, postgresql, mariadb)."""
    return database_factory(request.param)


@pytest.fixture(scope="session")
def _migrated_engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    yield engine
    engine.dispose()


def empty_tables(engine: Engine) -> None:
    """Delete every row, children before parents."""
    with engine.begin() as conn:
        for table in reversed(schema.metadata.sorted_tables):
            conn.execute(delete(table))


@pytest.fixture
def engine(_migrated_engine: Engine) -> Engine:
    """An engine on a migrated database whose tables are empty."""
    empty_tables(_migrated_engine)
    return _migrated_engine

