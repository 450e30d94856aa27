"""Migrations: they build exactly the tables of wms/db/schema.py, on every backend.

If this fails after a change to schema.py, write the migration that makes
the databases follow (``alembic revision --autogenerate`` then tidy up).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Engine, Integer, MetaData, insert, inspect, select

from wms.db import migrate, schema
from wms.db.engine import make_engine

pytestmark = pytest.mark.databases


def differences(engine: Engine, metadata: MetaData) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(context, metadata)


def test_migrated_database_matches_schema(engine: Engine) -> None:
    assert differences(engine, schema.metadata) == []


def test_comparison_sees_a_difference(engine: Engine) -> None:
    # The check above is only worth something if the comparison can fail.
    changed = MetaData(naming_convention=schema.NAMING)
    for table in schema.metadata.sorted_tables:
        table.to_metadata(changed)
    changed.tables["tokens"].append_column(Column("extra", Integer, nullable=True))
    diff = differences(engine, changed)
    assert [d[0] for d in diff] == ["add_column"]


def test_revision_is_head(engine: Engine) -> None:
    assert migrate.head_revision() == "0018_claim_several_jobs"
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_upgrade_again_changes_nothing(engine: Engine) -> None:
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert differences(engine, schema.metadata) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_upgrade_from_a_url_then_downgrade(backend: str, database_factory: Callable[[str], str]) -> None:
    url = database_factory(backend)
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
        assert set(inspect(engine).get_table_names()) == set(schema.metadata.tables) | {"alembic_version"}
        # Step by step, so every downgrade runs on every backend.
        migrate.downgrade(engine, "0001")
        assert migrate.current_revision(engine) == "0001"
        migrate.downgrade(engine, "base")
        assert migrate.current_revision(engine) is None
        assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_the_system_holds_stored_before_0016_keep_their_reason(backend: str,
                                                               database_factory: Callable[[str], str]) -> None:
    url = database_factory(backend)
    migrate.upgrade(url, "0015_job_caps")
    engine = make_engine(url)
    then = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
    job = {"job_name": "", "owner": "roland", "owner_group": "lhcb_user", "vo": "lhcb", "site": "ANY", "queue": "",
           "priority": 0, "cpu_time": 0, "submission_time": then, "last_update_time": then}
    try:
        with engine.begin() as conn:
            conn.execute(insert(schema.jobs), [
                {**job, "job_id": 1, "status": "Held", "hold_types": "s",
                 "minor_status": "Held by the system: Requirements expression cannot be evaluated"},
                {**job, "job_id": 2, "status": "Waiting", "hold_types": None, "minor_status": ""},
            ])
        migrate.upgrade(engine)
        with engine.connect() as conn:
            rows = conn.execute(select(schema.job_holds)).mappings().all()
        assert [dict(r) for r in rows] == [{"job_id": 1, "hold_type": "s", "holder": "system",
                                            "reason": "Requirements expression cannot be evaluated", "time": then}]
    finally:
        engine.dispose()
