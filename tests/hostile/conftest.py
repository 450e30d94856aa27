"""A real `wms server` on each database, for the hostile-input tests.

``hostile`` starts one server per backend (SQLite, PostgreSQL, MariaDB) on a
database of its own, with tokens for a user, a manager and a pilot, and
gives the handle, the tokens and an engine to count rows with.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, func, select

from tests.conftest import BACKENDS
from tests.servers import ServerHandle, edited_config, running_server
from wms.db import schema
from wms.db.engine import make_engine

USERS = {
    "roland": ("roland", "lhcb_user", "lhcb", "user"),
    "admin": ("admin", "lhcb_prod", "lhcb", "manager"),
    "pilot": ("pilot", "lhcb_pilot", "lhcb", "pilot"),
}

# The hostile server allows a 1 MiB JDL, so that the texts of the reported
# crashes (600 KB) reach the pre-scan instead of the size limit.
JDL_BYTES = 1024 * 1024


@dataclass
class Hostile:
    backend: str
    server: ServerHandle
    tokens: dict[str, str]
    engine: Engine

    def counts(self) -> dict[str, int]:
        """Rows in every table."""
        with self.engine.connect() as conn:
            return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
                    for t in schema.metadata.sorted_tables}


@pytest.fixture(scope="module", params=BACKENDS)
def hostile(request, tmp_path_factory, database_factory) -> Iterator[Hostile]:
    backend = request.param
    tmp = tmp_path_factory.mktemp(f"hostile-{backend}")
    config = edited_config(tmp / "config-src", {"  jdl_bytes: 262144": f"  jdl_bytes: {JDL_BYTES}"})
    url = database_factory(backend)
    with running_server(tmp / "server", config_dir=config, tokens=USERS, database_url=url) as server:
        engine = make_engine(url)
        try:
            yield Hostile(backend, server, dict(server.issued), engine)
        finally:
            engine.dispose()
