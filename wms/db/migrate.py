"""Create or migrate the schema with Alembic, configured in code.

No ``alembic.ini`` is read: ``alembic_config`` points Alembic at the
``migrations`` folder beside this module and hands the engine's connection
to ``migrations/env.py`` through ``Config.attributes``.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Upgrade:
    """What one upgrade did: the revision before (None: no schema), the one
    after, and the migrations applied in between, oldest first."""

    before: str | None
    after: str | None
    applied: tuple[str, ...]

    def describe(self) -> str:
        """One line for the operator: what changed, or that nothing did."""
        if not self.applied:
            return f"already at revision {self.after}, the newest this version knows: nothing to do"
        count = f"{len(self.applied)} migration{'s' if len(self.applied) != 1 else ''}"
        if self.before is None:
            return f"created the schema at revision {self.after} ({count})"
        return f"migrated from revision {self.before} to {self.after} ({count}: {', '.join(self.applied)})"


def pending(current: str | None, target: str = "head") -> tuple[str, ...]:
    """The revisions an upgrade from ``current`` to ``target`` applies, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    steps = script.iterate_revisions(target, current)      # newest first, ``current`` excluded
    return tuple(reversed([step.revision for step in steps]))


def upgrade(engine_or_url: Engine | str, revision: str = "head") -> Upgrade:
    """Bring the database to ``revision`` (default: the newest), in one transaction where the database allows."""
    engine = make_engine(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    try:
        with engine.begin() as conn:
            before = MigrationContext.configure(conn).get_current_revision()
            applied = pending(before, revision)
            command.upgrade(alembic_config(connection=conn), revision)
            after = MigrationContext.configure(conn).get_current_revision()
        return Upgrade(before, after, applied)
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


@dataclass(frozen=True)
class Standing:
    """Where a database's schema stands against this version's migrations."""

    current: str | None
    head: str | None
    known: bool              # a revision among this version's migrations
    behind: tuple[str, ...]  # the migrations `wms db upgrade` would apply

    @property
    def state(self) -> str:
        if self.current is None:
            return "empty"
        if self.current == self.head:
            return "current"
        return "behind" if self.known else "newer"

    def describe(self) -> str:
        return {
            "empty": "has no schema yet: run `wms db upgrade`",
            "current": f"is at revision {self.current}, the newest this version knows",
            "behind": f"is at revision {self.current}; this version's newest is {self.head}, "
                      f"{len(self.behind)} migration{'s' if len(self.behind) != 1 else ''} away: run `wms db upgrade`",
            "newer": f"is at revision {self.current}, which this version does not know "
                     f"(a newer release migrated it; this version's newest is {self.head})",
        }[self.state]


def standing(engine: Engine) -> Standing:
    """Where ``engine``'s database stands (``wms db current``)."""
    current = current_revision(engine)
    head = head_revision()
    script = ScriptDirectory.from_config(alembic_config())
    known = current is None or current in {revision.revision for revision in script.walk_revisions()}
    behind = pending(current) if known and current != head else ()
    return Standing(current, head, known, behind)


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
