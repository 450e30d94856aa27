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

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

# Where the loopback servers of a development machine or CI are.
SERVERS = {
    "postgresql": os.environ.get("WMS_TEST_POSTGRESQL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    "mariadb": os.environ.get("WMS_TEST_MARIADB", "mysql+pymysql://root@127.0.0.1:3306/test"),
}


def create_database(kind: str, prefix: str = "wms_scratch") -> str:
    """Create an empty database on server ``kind``; returns its URL."""
    admin_url = make_url(SERVERS[kind])
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT", connect_args=_timeout(kind))
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
    finally:
        admin.dispose()
    return admin_url.set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    target = make_url(url)
    kind = "postgresql" if target.get_backend_name() == "postgresql" else "mariadb"
    admin = create_engine(make_url(SERVERS[kind]), isolation_level="AUTOCOMMIT", connect_args=_timeout(kind))
    try:
        with admin.connect() as conn:
            if kind == "postgresql":
                conn.execute(text(f"DROP DATABASE IF EXISTS {target.database} WITH (FORCE)"))
            else:
                conn.execute(text(f"DROP DATABASE IF EXISTS {target.database}"))
    finally:
        admin.dispose()


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


def _timeout(kind: str) -> dict:
    return {"connect_timeout": 5}
