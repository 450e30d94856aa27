"""Resource quota sets changed while jobs run, on SQLite, PostgreSQL and
MariaDB: a set added, modified or enabled counts the jobs that already hold
resources (specs/001: "All of the configured rule sets apply all of the
time"), in the transaction that stores it, and no claim made with the old
sets slips past it."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import utcnow
from tests.helpers import ADMIN, as_pilot, default_config
from tests.services.test_matcher import HELLO, pilot, submit
from tests.services.test_quotas import quota_usage
from wms.db import quotas as quotas_db
from wms.services import matcher
from wms.services import leases
from wms.services import quotas as quotas_service
from wms.services.runtime import Runtime

pytestmark = pytest.mark.databases

OFF_SET = "{\n name off_set\n enabled false\n limit users * to slots=1\n}\n"
ROLAND_2 = "{\n name roland_2\n enabled true\n limit users roland to slots=2\n}\n"


@pytest.fixture(autouse=True)
def no_sync_delay(monkeypatch):
    monkeypatch.setattr(quotas_service, "SYNC_INTERVAL", 0.0)


@pytest.fixture
def runtime(engine) -> Runtime:
    """A system without the example sets of config/rqs/."""
    runtime = Runtime.create(default_config(), engine)
    quotas_service.delete(runtime, ADMIN, [], utcnow())
    return runtime


def qquota(runtime) -> list[str]:
    return [row["limit"] for row in quotas_service.usage_report(runtime, ADMIN, {"users": ["roland"]})]


def match_all(runtime, now, count, prefix="p"):
    return [matcher.request_job(runtime, pilot(f"{prefix}{i}"), now) for i in range(count)]


def holding(runtime) -> int:
    with runtime.engine.connect() as conn:
        return len(quotas_db.holding_jobs(conn))


def test_a_set_enabled_while_jobs_run_counts_them(runtime, now):
    quotas_service.add(runtime, ADMIN, OFF_SET, now)
    submit(runtime, now, *[HELLO] * 3)
    assert all(r.job for r in match_all(runtime, now, 2))
    quotas_service.change_attribute(runtime, ADMIN, "mattr", "enabled", "true", "off_set", now)
    assert qquota(runtime) == ["slots=2/1"]
    refused = matcher.request_job(runtime, pilot("third"), now)
    assert refused.job is None and 'exceeds limit "off_set/1" (slots=2/1 for user roland)' in refused.reason


def test_a_set_added_while_jobs_run_counts_them(runtime, now):
    submit(runtime, now, *[HELLO] * 4)
    held = match_all(runtime, now, 3)
    assert all(r.job for r in held)
    quotas_service.add(runtime, ADMIN, ROLAND_2, now)
    assert qquota(runtime) == ["slots=3/2"]
    assert matcher.request_job(runtime, pilot("fourth"), now).job is None
    # The jobs give back what the recount charged them, exactly.
    for i, result in enumerate(held[:2]):
        leases.pilot_status(runtime, as_pilot(f"p{i}"), result.job["JobID"], f"p{i}", "Done", "", 0, now)
    assert qquota(runtime) == ["slots=1/2"]
    assert matcher.request_job(runtime, pilot("fifth"), now).job is not None
    assert qquota(runtime) == ["slots=2/2"]


def test_a_modified_limit_and_a_deleted_set_are_recounted(runtime, now):
    quotas_service.add(runtime, ADMIN, ROLAND_2, now)
    submit(runtime, now, *[HELLO] * 3)
    assert [bool(r.job) for r in match_all(runtime, now, 3)] == [True, True, False]
    # -mrqs with the rule's filter widened to every user: a new instance, recounted.
    quotas_service.modify(runtime, ADMIN, ROLAND_2.replace("users roland", "users {*}"), now, name="roland_2")
    assert quota_usage(runtime) == {("rqs:roland_2/1:users=roland", "slots"): 2.0}
    quotas_service.delete(runtime, ADMIN, ["roland_2"], now)
    assert quota_usage(runtime) == {}
    assert holding(runtime) == 2


def test_a_process_still_on_the_old_sets_cannot_slip_past_the_recount(runtime, engine, now, monkeypatch):
    """Another server process adopts new sets up to a second late: its claim
    names the sets it applied, is refused, and is decided again on the new ones."""
    quotas_service.add(runtime, ADMIN, OFF_SET, now)
    late = Runtime.create(default_config(), engine)
    submit(runtime, now, *[HELLO] * 3)
    assert all(r.job for r in match_all(late, now, 2))
    monkeypatch.setattr(quotas_service, "SYNC_INTERVAL", 60.0)     # the late process does not look again by itself
    quotas_service.change_attribute(runtime, ADMIN, "mattr", "enabled", "true", "off_set", now)
    refused = matcher.request_job(late, pilot("stale"), now)
    assert refused.job is None and 'exceeds limit "off_set/1" (slots=2/1 for user roland)' in refused.reason
    assert qquota(runtime) == ["slots=2/1"] and holding(runtime) == 2


def test_claims_racing_changes_of_the_sets_are_all_counted(runtime, engine, now, monkeypatch):
    """Pilots of three processes claim and finish jobs while an administrator
    switches a set on and off; afterwards its usage is exactly what the jobs hold."""
    monkeypatch.setattr(quotas_service, "SYNC_INTERVAL", 1.0)
    quotas_service.add(runtime, ADMIN, ROLAND_2, now)
    submit(runtime, now, *[HELLO] * 600)
    processes = [Runtime.create(default_config(), engine) for _ in range(3)]
    changes_done = threading.Event()
    errors: list[BaseException] = []

    def pilots(n: int) -> None:
        process, k, kept = processes[n], 0, None
        try:
            stop_at = None
            last_round = False
            while not last_round:
                if stop_at is None and changes_done.is_set():
                    stop_at = time.monotonic() + 1.5          # past every process's sync interval
                # The last request starts after stop_at, however slowly a
                # loaded machine runs the loop: this process has synced.
                last_round = stop_at is not None and time.monotonic() >= stop_at
                k += 1
                time.sleep(0.02)                              # jobs last until the changes are done
                pid = f"p{n}-{k}"
                result = matcher.request_job(process, pilot(pid), now)
                if not result.job:
                    continue
                done = (result.job["JobID"], pid)
                if k % 3 == 0:                # one job in three runs on, until this pilot keeps another
                    kept, done = done, kept
                if done:
                    leases.pilot_status(process, as_pilot(done[1]), done[0], done[1], "Done", "", 0, now)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    def administrator() -> None:
        try:
            # Quick changes while claims run, then a last one after every
            # process has adopted "off": they apply it late, as processes do.
            for pause, value in ((0.1, "false"), (0.1, "true"), (0.1, "false"), (0.1, "true"), (0.1, "false"),
                                 (1.3, "true")):
                time.sleep(pause)
                quotas_service.change_attribute(runtime, ADMIN, "mattr", "enabled", value, "roland_2", now)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            changes_done.set()

    threads = [threading.Thread(target=pilots, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=administrator))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    held = holding(runtime)
    assert quota_usage(runtime) == ({("rqs:roland_2/1:*", "slots"): float(held)} if held else {})
