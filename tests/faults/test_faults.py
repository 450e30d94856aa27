"""Fault injection: a job runs once and its output is never lost, whatever dies.

Every part is a real process: a database server of the test's own
(PostgreSQL or MariaDB, crashed with an immediate stop or SIGKILL and
started again), a Redis of its own, `wms server`, a Celery worker and beat,
and the local pilots the SiteDirector starts; or `wms up` on SQLite. While
60 jobs run, a scripted schedule kills a pilot in the middle of a job, the
server, the database and Redis, each started again a few seconds later.

Each payload appends "start" and, two seconds later, "end" to a marker
file of its own, then prints "ok". Afterwards the test counts, and wants 0
of each: jobs lost (not Done), jobs run twice (two "end" lines), outputs
missing (a Done job whose stored output is not "ok"), and consumables or
quota usage left debited once every job has ended.

Every wait polls with a deadline scaled by WMS_TEST_PATIENCE
(tests/helpers.py); a failure shows the schedule of faults and the tails
of the logs of the server, the agents, Redis, the database server and the
pilots (tests/conftest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from sqlalchemy import select

from tests.e2e.processes import EmbeddedHandle, celery, kill_pilots, pilot_process, stop
from tests.e2e.scenario import MANAGER, USER, environment, write_config
from tests.faults.databases import PrivateMariaDB, PrivatePostgres
from tests.helpers import patience
from tests.servers import ServerHandle, free_port
from wms.db.engine import make_engine
from wms.db.schema import job_debits, resource_usage

JOBS = 60
OUTAGE = 9.0
# A job is presumed lost (Stalled, then run again) when its pilot has been
# silent for heartbeat_timeout. A pilot is silent while the schedule keeps
# the server or its database away: OUTAGE, the server's restart, the
# database's crash and recovery, which on a loaded machine took 30 s
# together, then up to 30 s more until its next try (the pilot's retries
# back off to PATIENCE_STEP_MAX). The timeout must exceed that, or a job
# that ended during the outage runs twice; the 30 s it once was did not.
# The same holds for the start window (match_lease), which runs from the
# Running report to the first heartbeat: a job that started less than a
# second before the server was killed is in it, and at 15 s the schedule's
# silence (16 s on a loaded machine) closed it on jobs that had ended fine.
FAULT_SETTINGS = {"heartbeat_timeout": str(round(patience(90))), "match_lease": str(round(patience(45)))}
QUOTA_SET = "{\n name per_user\n enabled true\n limit users {*} to slots=100\n}\n"


def payload(markers: Path) -> str:
    marker = f"{markers}/$WMS_JOB_ID"
    script = f"echo start >> {marker}; sleep 2; echo end >> {marker}; echo ok"
    return (f'[ JobName = "fault_%n"; Executable = "/bin/sh"; Arguments = "-c \'{script}\'"; CPUTime = 300; '
            f"Parameters = {JOBS}; ]")


def fault_config(directory: Path, **settings: str) -> Path:
    config = write_config(directory, **FAULT_SETTINGS, **settings)
    # The payloads mark their start and end in one directory of the test's,
    # which a sandbox hides: every site's pilots run them unisolated (the
    # queue parameter Isolation, inherited from the site).
    resources = config / "resources.yaml"
    grid = yaml.safe_load(resources.read_text())
    for site in grid["Sites"].values():
        site["Isolation"] = "none"
    resources.write_text(yaml.safe_dump(grid))
    (config / "rqs" / "faults.rqs").write_text(QUOTA_SET)
    return config


class FaultRun:
    """The jobs, the schedule of faults and the counts, against one server."""

    def __init__(self, server: ServerHandle, logs: list[Path], markers: Path) -> None:
        self.server, self.logs, self.markers = server, logs, markers
        markers.mkdir()
        tokens = server.tokens({"user": USER, "manager": MANAGER})
        self.user, self.manager = tokens["user"], tokens["manager"]
        self.job_ids: list[int] = []
        self.events: list[str] = []
        self.started = time.monotonic()

    def note(self, event: str) -> None:
        self.events.append(f"{time.monotonic() - self.started:6.1f} s  {event}")

    def get(self, path: str, token: str | None = None) -> Any:
        """GET through outages: the server or its database may be down for a while."""
        deadline = time.monotonic() + patience(120)
        while True:
            try:
                with self.server.api(token or self.user) as api:
                    response = api.get(path)
                if response.status_code == 200:
                    return response.json()
                error = f"{response.status_code} {response.text[:300]}"
            except httpx.HTTPError as exc:
                error = str(exc)
            if time.monotonic() > deadline:
                self.fail(f"GET {path} kept failing: {error}")
            time.sleep(0.5)

    def fail(self, message: str) -> None:
        # The logs' tails follow in the report (tests/conftest.py).
        raise AssertionError(f"{message}\nschedule:\n" + "\n".join(self.events))

    def wait(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        limit = patience(timeout)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.3)
        self.fail(f"{what}: not within {limit:g} s")

    def jobs(self) -> dict[int, dict[str, Any]]:
        return {row["JobID"]: row for row in self.get("/jobs") if row["JobID"] in self.job_ids}

    def submit(self) -> None:
        path = self.server.tmp / "fault.jdl"
        path.write_text(payload(self.markers))
        self.job_ids = [int(i) for i in self.server.json("submit", str(path), token=self.user)["job_ids"]]
        assert len(self.job_ids) == JOBS
        self.note(f"{JOBS} jobs submitted")

    def lines(self, job_id: int) -> list[str]:
        try:
            return (self.markers / str(job_id)).read_text().split()
        except OSError:
            return []

    # -- the faults ------------------------------------------------------------------
    def kill_a_pilot_mid_job(self) -> None:
        """SIGKILL the pilot of a job whose payload has started and not yet ended."""
        def victim() -> tuple[int, int] | None:
            running = [i for i, row in self.jobs().items() if row["Status"] == "Running"]
            pilots = {p["PilotID"]: p["BackendRef"] for p in self.get("/pilots", self.manager)}
            for job_id in running:
                if self.lines(job_id) != ["start"]:
                    continue
                sources = [h["Source"] for h in self.get(f"/jobs/{job_id}/history") if h["Status"] == "Running"]
                ref = pilots.get(sources[-1].removeprefix("Pilot ")) if sources else None
                pid = pilot_process(ref) if ref else None
                if pid is not None and self.lines(job_id) == ["start"]:
                    return job_id, pid
            return None

        job_id, pid = self.wait("a job runs on a pilot", victim, 300)
        os.kill(pid, signal.SIGKILL)
        self.note(f"pilot {pid} SIGKILLed while job {job_id} ran")

    def kill_and_restart(self, name: str, kill: Callable[[], None], start: Callable[[], None], down: float) -> None:
        kill()
        self.note(f"{name} killed")
        time.sleep(down)
        start()
        self.note(f"{name} started again")

    def pilot_refs(self) -> list[str]:
        """The backend references of every pilot, to kill what is left at the end."""
        try:
            return [p["BackendRef"] for p in self.get("/pilots", self.manager)]
        except AssertionError:          # the server is gone: its pilots end on their own
            return []

    # -- the counts --------------------------------------------------------------------
    def wait_all_ended(self, timeout: float) -> dict[int, dict[str, Any]]:
        def ended() -> dict[int, dict[str, Any]] | None:
            jobs = self.jobs()
            return jobs if all(row["Status"] in ("Done", "Failed", "Killed") for row in jobs.values()) else None

        jobs = self.wait(f"all {JOBS} jobs end", ended, timeout)
        self.note("every job ended")
        return jobs

    def check(self, jobs: dict[int, dict[str, Any]], database_url: str) -> None:
        lost = {i: (row["Status"], row["MinorStatus"]) for i, row in jobs.items() if row["Status"] != "Done"}
        twice = {i: self.lines(i) for i in self.job_ids if self.lines(i).count("end") > 1}
        missing = [i for i in self.job_ids if jobs[i]["Status"] == "Done"
                   and self.get(f"/jobs/{i}/output")["stdout"] != "ok\n"]
        engine = make_engine(database_url)
        try:
            with engine.connect() as conn:
                left = {(s, r): u for s, r, u in conn.execute(select(resource_usage.c.scope, resource_usage.c.resource,
                                                                       resource_usage.c.used)).all() if u}
                held = conn.execute(select(job_debits.c.job_id)).scalars().all()
        finally:
            engine.dispose()
        counts = {"lost": len(lost), "run twice": len(twice), "outputs missing": len(missing),
                  "usage left": len(left), "debits left": len(held)}
        if any(counts.values()):
            self.fail(f"{counts}: lost {lost}, twice {twice}, missing {missing}, usage {left}, debits {held}")
        print("faults survived:", counts, "\n" + "\n".join(self.events))


def distributed(tmp_path: Path, database_url: str, crash_database: Callable[[], None],
                start_database: Callable[[], None], private_redis) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    config = fault_config(tmp_path, database_url=database_url, broker_url=private_redis.url(0),
                          bind=url.removeprefix("http://"))
    env = environment(tmp_path, config, url)
    server = ServerHandle(tmp_path, config, url, env)
    server.ok("db", "upgrade")
    agents: list[subprocess.Popen] = []
    run: FaultRun | None = None
    try:
        server.start()
        worker, worker_log = celery(tmp_path, env, "worker", "--pool", "prefork", "--concurrency", "2", "-n",
                                    "faults@%h", "--loglevel", "info", "--without-gossip", "--without-mingle",
                                    log_name="worker.log")
        beat, beat_log = celery(tmp_path, env, "beat", "-s", str(tmp_path / "beat-schedule"), "--loglevel", "info",
                                log_name="beat.log")
        agents += [worker, beat]
        run = FaultRun(server, [server.log, worker_log, beat_log, private_redis.log], tmp_path / "markers")
        run.submit()
        run.kill_a_pilot_mid_job()
        # Longer than a pilot's own retries of one call (about 7 s): the output
        # of the jobs that end meanwhile waits on the node (--patience).
        run.kill_and_restart("the server", server.process.kill, server.start, down=OUTAGE)
        run.kill_and_restart("the database", crash_database, start_database, down=3)
        run.kill_and_restart("Redis", private_redis.kill, private_redis.start, down=2)
        jobs = run.wait_all_ended(timeout=480)
        run.check(jobs, database_url)
    finally:
        refs = run.pilot_refs() if run is not None else []
        for process in reversed(agents):
            stop(process)
        kill_pilots(refs)
        server.stop()


def test_postgresql_and_redis_and_the_server_die_while_jobs_run(tmp_path, private_redis):
    database = PrivatePostgres()
    try:
        distributed(tmp_path, database.url(), database.crash, database.start, private_redis)
    finally:
        database.close(keep_log=tmp_path / "postgresql.log")


def test_mariadb_and_redis_and_the_server_die_while_jobs_run(tmp_path, private_redis):
    database = PrivateMariaDB()
    try:
        distributed(tmp_path, database.url(), database.crash, database.start, private_redis)
    finally:
        database.close(keep_log=tmp_path / "mariadb.log")


def test_wms_up_on_sqlite_dies_while_jobs_run(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    database_url = f"sqlite:///{tmp_path / 'wms.db'}"
    config = fault_config(tmp_path, database_url=database_url, bind=url.removeprefix("http://"))
    env = environment(tmp_path, config, url)
    server = EmbeddedHandle(tmp_path, config, url, env)
    server.ok("db", "upgrade")
    run: FaultRun | None = None
    try:
        server.start()
        run = FaultRun(server, [server.log], tmp_path / "markers")
        run.submit()
        run.kill_a_pilot_mid_job()
        run.kill_and_restart("wms up", server.process.kill, server.start, down=OUTAGE)
        jobs = run.wait_all_ended(timeout=480)
        run.check(jobs, database_url)
    finally:
        refs = run.pilot_refs() if run is not None else []
        server.stop()
        kill_pilots(refs)
