"""Create or migrate the schema with Alembic, configured in code.

No ``alembic.ini`` is read: ``alembic_config`` points Alembic at the
``migrations`` folder beside this module and hands the engine's connection
to ``migrations/env.py`` through ``Config.attributes``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

from wms.db.engine import make_engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic configuration for our migrations, bound to a connection or a URL."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    if url is not None:
        config.attributes["url"] = url
    return config


def upgrade(engine_or_url: Engine | str, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default: the newest), in one transaction where the database allows."""
    engine = make_engine(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(connection=conn), revision)
    finally:
        if engine is not engine_or_url:
            engine.dispose()


def downgrade(engine_or_url: Engine | str, revision: str) -> None:
    """Take the database back to ``revision`` ("base": no tables at all)."""
    engine = make_engine(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(connection=conn), revision)
    finally:
        if engine is not engine_or_url:
            engine.dispose()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None before the first upgrade."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    """The newest revision among our migrations."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def schema_problem(engine: Engine) -> str | None:
    """None when the schema is the one this code needs; else what to do, in one line.

    A revision this code does not know is accepted: a newer release
    migrated the database first, as a rolling upgrade does, and its
    migrations keep the older servers working until they are replaced.
    """
    current = current_revision(engine)
    if current is None:
        return "the database has no schema yet: run `wms db upgrade`"
    head = head_revision()
    if current == head:
        return None
    script = ScriptDirectory.from_config(alembic_config())
    known = {revision.revision for revision in script.walk_revisions()}
    if current in known:
        return f"the schema is at revision {current}, this version needs {head}: run `wms db upgrade`"
    return None
