"""A pooled connection the server dropped is replaced, not reported to the user."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from wms.db.engine import make_engine
from wms.services.retry import run_in_transaction

pytestmark = pytest.mark.databases


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])   # SQLite has no server to drop it
def test_a_dropped_connection_is_retried_on_a_fresh_one(backend, database_factory):
    db_url = database_factory(backend)
    engine = make_engine(db_url, pool_size=1, max_overflow=0)
    admin = make_engine(db_url, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "postgresql":
                backend = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            else:
                backend = conn.execute(text("SELECT CONNECTION_ID()")).scalar_one()
        # The connection is back in the pool; the server now closes it.
        with admin.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
            else:
                conn.execute(text(f"KILL {int(backend)}"))
        assert run_in_transaction(engine, lambda conn: conn.execute(text("SELECT 41 + 1")).scalar_one()) == 42
    finally:
        engine.dispose()
        admin.dispose()
