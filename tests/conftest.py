"""Shared fixtures: one database per backend, upgraded once per session.

``db_url`` is parametrised over SQLite, PostgreSQL and MariaDB. Each pytest
session creates its own throwaway database on the two servers
(``wms_test_<pid>_<random>``) and drops it at the end, so parallel runs on
one machine never meet; SQLite gets a file in a temporary directory.
``engine`` is migrated with ``wms.db.migrate.upgrade`` once per backend and
every table is emptied before each test.

An unreachable server skips its tests with the reason, unless the
environment variable CI is "true": then the test fails, naming the server.

A failing test that started processes logging into its ``tmp_path`` (the
server, Celery worker and beat, Redis, the pilots under ``var/pilots``)
gets the tails of those logs in its report, and of any log it registered
with the ``failure_logs`` fixture (e.g. a database server's, kept outside
``tmp_path``): a failure under CI explains itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, settings
from sqlalchemy import Engine, delete, text
from sqlalchemy.engine import make_url

from tests.helpers import tail
from tests.oidc import provider  # noqa: F401 - the identity provider's fixture, for every module that asks
from wms.db import migrate, schema, scratch
from wms.db.engine import make_engine

BACKENDS = ("sqlite", "postgresql", "mariadb")

# Property-based tests (hypothesis): a few seconds each in the suite; `make
# fuzz` selects the "fuzz" profile (WMS_HYPOTHESIS_PROFILE=fuzz), fifty times
# the examples. Tests that set their own count scale it with fuzz_examples().
FUZZ_SCALE = {"default": 1, "fuzz": 50}
settings.register_profile("default", max_examples=100, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=100 * FUZZ_SCALE["fuzz"], deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
HYPOTHESIS_PROFILE = os.environ.get("WMS_HYPOTHESIS_PROFILE", "default")
settings.load_profile(HYPOTHESIS_PROFILE)


def fuzz_examples(count: int) -> int:
    """``count`` examples in the suite, more under `make fuzz`."""
    return count * FUZZ_SCALE.get(HYPOTHESIS_PROFILE, 1)


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

    def __init__(self, kind: str, label: str) -> None:
        self.kind = kind
        self.label = label
        self.created: list[str] = []
        self._admin: Engine | None = None
        self._error: BaseException | None = None

    def _admin_engine(self) -> Engine:
        if self._error is not None:
            _unreachable(self.label, scratch.SERVERS[self.kind], self._error)
        if self._admin is None:
            admin = scratch.admin_engine(self.kind)
            try:
                with admin.connect() as conn:
                    conn.execute(text("SELECT 1"))
            except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
                admin.dispose()
                self._error = exc
                _unreachable(self.label, scratch.SERVERS[self.kind], exc)
            self._admin = admin
        return self._admin

    def create(self) -> str:
        """A new empty database; its URL."""
        url = scratch.create_database(self.kind, "wms_test", admin=self._admin_engine())
        self.created.append(url)
        return url

    def drop_all(self) -> None:
        if self._admin is None:
            return
        for url in self.created:
            scratch.drop_database(url, admin=self._admin)
        self._admin.dispose()


@pytest.fixture(scope="session")
def database_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], str]]:
    """``create(backend)`` -> the URL of a new, empty database on that backend."""
    servers = {
        "postgresql": ThrowawayDatabases("postgresql", "PostgreSQL"),
        "mariadb": ThrowawayDatabases("mariadb", "MariaDB"),
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



def _own_service(why_not_runnable: Callable[[], str | None], make: Callable[[], Any]) -> Iterator[Any]:
    """A service the tests start themselves, stopped at the end; one that
    cannot run here is skipped with the reason (a failure under CI=true)."""
    from tests.e2e.processes import missing_service

    reason = why_not_runnable()
    if reason is not None:
        missing_service(reason)
    service = make()
    try:
        service.start()
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="session")
def slurm_cluster():
    """A one-node Slurm of this session's own (tests/slurm_cluster.py): munged,
    slurmctld and slurmd on free ports in a temporary directory."""
    from tests.slurm_cluster import SlurmCluster, why_not_runnable

    yield from _own_service(why_not_runnable, SlurmCluster)


@pytest.fixture(scope="session")
def ssh_server():
    """An sshd of this session's own on a loopback port, with generated keys (tests/sshd_server.py)."""
    from tests.sshd_server import SshServer, why_not_runnable

    yield from _own_service(why_not_runnable, SshServer)


@pytest.fixture(scope="session")
def arc_ce():
    """A private ARC CE (A-REX with its REST interface and the fork LRMS) on a loopback port (tests/arc.py)."""
    from tests.arc import ArcCE, why_not_runnable

    yield from _own_service(why_not_runnable, ArcCE)


# -- the logs of a failed test --------------------------------------------------------

FAILURE_LOGS = pytest.StashKey[list]()
LOG_TAIL = 4000          # characters of each log
PILOT_LOGS_SHOWN = 8     # the most recently written pilot logs
PILOT_LOG_TAIL = 2000


@pytest.fixture
def failure_logs(request: pytest.FixtureRequest) -> list[Path]:
    """Append paths of logs to show should the test fail (beyond its tmp_path's)."""
    return request.node.stash.setdefault(FAILURE_LOGS, [])


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def failed_test_logs(item: pytest.Item) -> str:
    """The tails of the logs a test's processes wrote, newest pilot logs first."""
    paths: list[Path] = list(item.stash.get(FAILURE_LOGS, []))
    tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
    if isinstance(tmp_path, Path) and tmp_path.is_dir():
        paths += sorted(p for p in tmp_path.rglob("*.log") if p.is_file())
    pilots = sorted((p for p in paths if p.parent.name == "pilots"), key=_mtime, reverse=True)
    others = [p for p in dict.fromkeys(paths) if p.parent.name != "pilots"]
    parts = [f"--- {p} ---\n{tail(p, LOG_TAIL)}" for p in others]
    parts += [f"--- {p} ---\n{tail(p, PILOT_LOG_TAIL)}" for p in pilots[:PILOT_LOGS_SHOWN]]
    if len(pilots) > PILOT_LOGS_SHOWN:
        parts.append(f"({len(pilots) - PILOT_LOGS_SHOWN} older pilot logs not shown, in {pilots[0].parent})")
    return "\n".join(parts)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when in ("setup", "call"):
        try:
            shown = failed_test_logs(item)
        except Exception as exc:  # noqa: BLE001 - never hide the failure itself
            shown = f"(the logs could not be read: {exc})"
        if shown:
            report.sections.append(("log tails of the test's processes", shown))


# -- running on several workers (pytest-xdist, `make test`) -----------------------------

# Tests that share an expensive session- or package-wide service run on one
# worker (`--dist loadgroup`), so each service starts once per run rather than
# once per worker: the console's server and Chromium, the one-node Slurm, the
# sshd, the ARC CE; and the worker-node tests, whose hostile payload looks at every
# process on the machine and must not take another of them for its pilot's.
# Every other test goes to whichever worker is free.
SHARED_SERVICE_GROUPS = {"slurm_cluster": "slurm", "ssh_server": "ssh", "arc_ce": "arc", "node_user": "worker-node"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    web = Path(__file__).parent / "web"
    for item in items:
        if web in Path(item.path).parents:
            item.add_marker(pytest.mark.xdist_group("web"))
            continue
        for fixture, group in SHARED_SERVICE_GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
                break
