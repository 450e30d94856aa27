"""Throwaway databases on the PostgreSQL and MariaDB servers, for tests
and benchmarks that must not touch anyone else's data.

Each one is created under a unique name through an administrative
connection to the server's ``test`` database and dropped afterwards.
"""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from wms.db.engine import make_engine

# Where the loopback servers of a development machine or CI are.
SERVERS = {
    "postgresql": os.environ.get("WMS_TEST_POSTGRESQL_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    "mariadb": os.environ.get("WMS_TEST_MARIADB_URL", "mysql://root@127.0.0.1:3306/test"),
}


def admin_engine(kind: str) -> Engine:
    """An autocommit engine on the server's administrative database."""
    return make_engine(SERVERS[kind], isolation_level="AUTOCOMMIT", pool_size=1, connect_args={"connect_timeout": 5})


def create_database(kind: str, prefix: str = "wms_scratch", admin: Engine | None = None) -> str:
    """Create an empty database on server ``kind``; returns its URL."""
    engine = admin or admin_engine(kind)
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        with engine.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
    finally:
        if admin is None:
            engine.dispose()
    return engine.url.set(database=name).render_as_string(hide_password=False)


def drop_database(url: str, admin: Engine | None = None) -> None:
    target = make_url(url)
    kind = "postgresql" if target.get_backend_name() == "postgresql" else "mariadb"
    engine = admin or admin_engine(kind)
    force = " WITH (FORCE)" if kind == "postgresql" else ""
    try:
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {target.database}{force}"))
    finally:
        if admin is None:
            engine.dispose()


@contextmanager
def scratch_database(kind: str, directory: Path | None = None, prefix: str = "wms_scratch") -> Iterator[str]:
    """A database URL valid inside the block: a file for ``sqlite``, a new database otherwise."""
    if kind == "sqlite":
        if directory is None:
            raise ValueError("a SQLite scratch database needs a directory")
        path = directory / f"{prefix}_{secrets.token_hex(4)}.db"
        yield f"sqlite:///{path}"
        return
    url = create_database(kind, prefix)
    try:
        yield url
    finally:
        drop_database(url)
