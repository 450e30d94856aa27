"""Alembic environment: our metadata, and the connection the caller gives.

``wms.db.migrate`` builds the configuration in code and puts either a live
``connection`` or a ``url`` into ``config.attributes``; the main option
``sqlalchemy.url`` is the last resort (for running the ``alembic`` command
by hand with ``-x``-less configurations).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from wms.db.engine import make_engine, normalise_url
from wms.db.schema import metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        # SQLite alters tables by copying them: let op.batch_alter_table do it.
        render_as_batch=connection.dialect.name == "sqlite",
    )


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: pass a connection or a url in Config.attributes")
    return url


def run_migrations_offline() -> None:
    """Write the SQL to stdout instead of running it."""
    context.configure(
        url=normalise_url(_url()),
        target_metadata=metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    try:
        with engine.begin() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
