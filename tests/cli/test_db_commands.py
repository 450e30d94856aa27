"""`wms db upgrade` says what it did; `wms db current` says where a database
stands and what an upgrade would apply, on every backend (docs/deployment.md,
"Upgrading")."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_server_start import run
from wms.db.migrate import head_revision, pending, upgrade

HEAD = head_revision()
ALL = pending(None)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_an_upgrade_says_what_it_did_and_current_where_the_database_stands(tmp_path, database_factory, backend):
    url = database_factory(backend)
    shown = url if backend == "sqlite" else None

    before = run(tmp_path, "db", "current", database_url=url)
    assert before.returncode == 1                       # something to do: `wms db current || wms db upgrade`
    assert before.stdout.strip().endswith("has no schema yet: run `wms db upgrade`")

    created = run(tmp_path, "db", "upgrade", database_url=url)
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip().endswith(f": created the schema at revision {HEAD} ({len(ALL)} migrations)")
    if shown:
        assert created.stdout.startswith(f"database at {shown}: ")

    again = run(tmp_path, "db", "upgrade", database_url=url)
    assert again.stdout.strip().endswith(f"already at revision {HEAD}, the newest this version knows: nothing to do")

    now = run(tmp_path, "db", "current", "--json", database_url=url)
    assert now.returncode == 0
    assert json.loads(now.stdout) | {"database": None} == {
        "database": None, "revision": HEAD, "newest": HEAD, "state": "current", "pending": []}


def test_a_real_migration_names_the_revisions_it_applied(tmp_path, database_factory):
    url = database_factory("sqlite")
    upgrade(url, "0008")
    behind = run(tmp_path, "db", "current", database_url=url)
    later = pending("0008")
    assert behind.returncode == 1
    assert behind.stdout.strip() == (f"database at {url} is at revision 0008; this version's newest is {HEAD}, "
                                     f"{len(later)} migrations away: run `wms db upgrade`")
    migrated = run(tmp_path, "db", "upgrade", database_url=url)
    assert migrated.stdout.strip() == (f"database at {url}: migrated from revision 0008 to {HEAD} "
                                       f"({len(later)} migrations: {', '.join(later)})")


def test_a_revision_this_version_does_not_know_is_left_to_the_newer_release(tmp_path, database_factory):
    url = database_factory("sqlite")
    upgrade(url)
    from sqlalchemy import create_engine, text
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
    engine.dispose()
    result = run(tmp_path, "db", "current", database_url=url)
    assert result.returncode == 0                       # a rolling upgrade: nothing for this version to do
    assert "is at revision 0099_from_the_future, which this version does not know" in result.stdout
