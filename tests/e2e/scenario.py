"""The end-to-end scenario both set-ups run (distributed and embedded).

A small grid of four queues on two sites, each queue different (memory,
software tags, platform, GPU tag, CPU time), so that 200 jobs of eight kinds
fall into several SubmitPools, each with its own eligible queues. The
agents run with short periods; the SiteDirector starts local pilots. The
run then:

1. submits the jobs, and records every pool's queues (the pool map) while
   they wait;
2. SIGKILLs the pilot process that runs the long job: no pilot reports it
   again, the lease/heartbeat reaper declares it Stalled and puts it back
   to Waiting, and a new pilot runs it to Done (specs/004: no lost jobs);
   its first run lasts long enough to be caught however loaded the
   machine, its second one is short;
3. (distributed only) a disturbance while that happens, e.g. Redis dies;
4. waits until every job is Done, each on a queue it is eligible for;
5. waits until the SubmitPoolCleaner has dropped every pool (short grace).

Every wait polls for its condition with a generous deadline, scaled by
WMS_TEST_PATIENCE (tests/helpers.py); a failure shows the tails of the
server's, agents' and pilots' logs (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from tests.e2e.processes import kill_pilots, pilot_process, tails
from tests.helpers import CONFIG_DIR, patience
from tests.helpers import wait_until as poll_until
from tests.servers import ServerHandle
from wms.db import schema
from wms.db.engine import make_engine

ALPHA_SMALL = "E2E.Alpha.ch/ce-a.alpha.ch/small"
ALPHA_BIG = "E2E.Alpha.ch/ce-a.alpha.ch/big"
ALPHA_GPU = "E2E.Alpha.ch/gpu-a.alpha.ch/gpu"
BETA_GRID = "E2E.Beta.fr/ce-b.beta.fr/grid"
EVERY_QUEUE = {ALPHA_SMALL, ALPHA_BIG, ALPHA_GPU, BETA_GRID}

RESOURCES = """\
Sites:
  E2E.Alpha.ch:
    CEs:
      ce-a.alpha.ch:
        Platform: x86_64-el9
        Queues:
          small: {CPUTime: 3600, Memory: 2000, SoftwareTag: [AppA],
                  MaxWaitingPilots: 2, MaxTotalPilots: 3, complex_values: {slots: 3}}
          big: {CPUTime: 86400, Memory: 16000, SoftwareTag: [AppA, AppB],
                MaxWaitingPilots: 2, MaxTotalPilots: 3, complex_values: {slots: 3}}
      gpu-a.alpha.ch:
        Platform: x86_64-el9
        Tags: [GPU]
        Queues:
          gpu: {CPUTime: 86400, Memory: 8000, MaxWaitingPilots: 2, MaxTotalPilots: 3, complex_values: {slots: 3}}
  E2E.Beta.fr:
    CEs:
      ce-b.beta.fr:
        Platform: x86_64-el8
        Queues:
          grid: {CPUTime: 86400, Memory: 4000, SoftwareTag: [AppB],
                 MaxWaitingPilots: 2, MaxTotalPilots: 3, complex_values: {slots: 3}}
"""

QUICK = 'Executable = "/bin/echo"; Arguments = "job %n";'


@dataclass(frozen=True)
class Kind:
    """One kind of job: its JDL attributes, how many, and the queues that may run it."""

    name: str
    attributes: str
    count: int
    eligible: frozenset[str]

    def jdl(self) -> str:
        body = self.attributes if "Executable" in self.attributes else f"{QUICK} {self.attributes}"
        parametric = f" Parameters = {self.count};" if self.count > 1 else ""
        return f'[ JobName = "{self.name}_%n"; {body}{parametric} ]'


LONG = "long"
KINDS = (
    Kind("plain", "CPUTime = 300;", 25, frozenset(EVERY_QUEUE)),
    Kind("mem3000", "Requirements = [ Memory = 3000; ];", 25, frozenset({ALPHA_BIG, ALPHA_GPU, BETA_GRID})),
    Kind("mem10000", "Requirements = [ Memory = 10000; ];", 24, frozenset({ALPHA_BIG})),
    Kind("appb", 'Requirements = [ SoftwareTag = {"AppB"}; ];', 25, frozenset({ALPHA_BIG, BETA_GRID})),
    Kind("appa", 'CPUTime = 600; Requirements = [ SoftwareTag = {"AppA"}; Memory = 1000; ];', 25,
         frozenset({ALPHA_SMALL, ALPHA_BIG})),
    Kind("gpu", 'Tags = {"GPU"}; Requirements = [ Memory = 1000; ];', 25, frozenset({ALPHA_GPU})),
    Kind("beta", 'Site = "E2E.Beta.fr"; Requirements = [ Memory = 2000; ];', 25, frozenset({BETA_GRID})),
    Kind("el9long", 'Platform = "x86_64-el9"; CPUTime = 50000;', 25, frozenset({ALPHA_BIG, ALPHA_GPU})),
    # The job whose pilot is killed: alone in its pool, which must still be
    # there when it comes back. Its first run (no marker yet) lasts
    # LONG_FIRST_RUN seconds, long enough to be caught running on a loaded
    # machine; its second one 1 s. Both end well within heartbeat_timeout:
    # the pilots send no heartbeat within it (theirs is every 60 s).
    Kind(LONG, 'Executable = "/bin/sh"; Arguments = "-c \'if [ -e {marker} ]; then sleep 1; else touch {marker}; '
               'sleep {first_run}; fi\'"; Requirements = [ Memory = 12000; ];', 1, frozenset({ALPHA_BIG})),
)
TOTAL_JOBS = sum(kind.count for kind in KINDS)
LONG_FIRST_RUN = 12

# Short periods so that the whole run takes a minute or so. A job (the long
# one included) must end within heartbeat_timeout, its pilot's reports
# included, or it is reaped as Stalled: 25 s leaves a loaded machine room.
WMS_YAML = {
    "agent_periods": "{site_director: 2, lease_reaper: 2, submit_pool_cleaner: 3, submit_pool_refresher: 5, "
                     "task_queue_priorities: 5}",
    "submit_pool_grace": "3",
    "match_lease": "20",
    "heartbeat_timeout": "25",
    "beat_lock_timeout": "6",
}
USER = ("roland", "lhcb_user", "lhcb", "user")
MANAGER = ("admin", "lhcb_prod", "lhcb", "manager")


def write_config(directory: Path, **settings: str) -> Path:
    """The default configuration with the test grid and ``settings`` (and WMS_YAML) in wms.yaml."""
    config = directory / "config"
    shutil.copytree(CONFIG_DIR, config)
    (config / "resources.yaml").write_text(RESOURCES)
    wms_yaml = config / "wms.yaml"
    text = wms_yaml.read_text()
    for key, value in {**WMS_YAML, **settings}.items():
        text, found = re.subn(rf"(?m)^{key}:.*(\n  .*)*$", f"{key}: {value}", text)
        if not found:
            text += f"\n{key}: {value}\n"
    wms_yaml.write_text(text)
    return config


def environment(directory: Path, config: Path, url: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HOME": str(directory / "home"), "WMS_CONFIG": str(config), "WMS_URL": url, **extra}
    for name in ("WMS_TOKEN", "WMS_DATABASE_URL", "WMS_BROKER_URL"):
        if name not in extra:
            env.pop(name, None)
    return env


def wait_until(what: str, check: Callable[[], Any], timeout: float, logs: list[Path] | Callable[[], list[Path]],
               every: float = 0.5) -> Any:
    """Poll ``check`` until it returns something true; after ``patience(timeout)``
    seconds fail with the tails of ``logs`` (a list, or a function giving one)."""
    def details() -> str:
        return tails(logs() if callable(logs) else logs)

    return poll_until(check, timeout=timeout, what=what, every=every, details=details)


@dataclass
class Run:
    """One scenario run against a server (``wms server`` or ``wms up``)."""

    server: ServerHandle
    logs: list[Path]
    user: str = ""
    manager: str = ""
    kind_of: dict[int, str] = field(default_factory=dict)
    pool_map: dict[str, set[str]] = field(default_factory=dict)
    killed_pilot: str = ""
    _pilot_refs: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def all_logs(self) -> list[Path]:
        """The processes' logs and the pilots' (under var/pilots, newest last)."""
        pilots = sorted((self.server.tmp / "var" / "pilots").glob("*.log"), key=lambda p: p.stat().st_mtime)
        return [*self.logs, *pilots[-6:]]

    def __post_init__(self) -> None:
        tokens = self.server.tokens({"user": USER, "manager": MANAGER})
        self.user, self.manager = tokens["user"], tokens["manager"]
        self.started = time.monotonic()

    def mark(self, name: str) -> None:
        self.timings[name] = round(time.monotonic() - self.started, 1)

    def get(self, path: str, token: str | None = None, **params: Any) -> Any:
        with self.server.api(token or self.user) as api:
            response = api.get(path, params=params)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()

    def jobs(self) -> dict[int, dict[str, Any]]:
        return {row["JobID"]: row for row in self.get("/jobs")}

    def long_job(self) -> int:
        return next(job_id for job_id, kind in self.kind_of.items() if kind == LONG)

    # -- 1. submission ----------------------------------------------------------------
    def submit(self) -> None:
        directory = self.server.tmp / "jdl"
        directory.mkdir(exist_ok=True)

        def one(kind: Kind) -> tuple[Kind, list[int]]:
            path = directory / f"{kind.name}.jdl"
            marker = self.server.tmp / "long-job-ran"
            path.write_text(kind.jdl().replace("{marker}", str(marker)).replace("{first_run}", str(LONG_FIRST_RUN)))
            ids = [int(i) for i in self.server.json("submit", str(path), token=self.user)["job_ids"]]
            # The pool map, read at once: the jobs of a kind may all be done a few seconds later.
            pool = self.get(f"/jobs/{ids[0]}")["SubmitPool"]
            if pool:
                self.pool_map[pool] = set(self.get(f"/pools/{pool}")["Queues"])
            return kind, ids

        # The long job first, so that it starts while there is still work around.
        _, [long_id] = one(KINDS[-1])
        self.kind_of[long_id] = LONG
        with ThreadPoolExecutor(max_workers=4) as pool:
            for kind, ids in pool.map(one, KINDS[:-1]):
                assert len(ids) == kind.count, (kind.name, ids)
                self.kind_of.update(dict.fromkeys(ids, kind.name))
        assert len(self.kind_of) == TOTAL_JOBS == 200
        self.mark("submitted")

    def check_match_queues(self) -> None:
        """Each kind's match-queues are the queues the test expects; every job has its kind's pool."""
        jobs = self.jobs()
        first_of: dict[str, int] = {}
        for job_id, kind in sorted(self.kind_of.items()):
            first_of.setdefault(kind, job_id)
        for kind in KINDS:
            answer = self.get(f"/jobs/{first_of[kind.name]}/match-queues")
            assert set(answer["eligible"]) == kind.eligible, (kind.name, answer)
        pools = {jobs[job_id]["SubmitPool"] for job_id in self.kind_of} - {""}
        # Seven kinds carry Requirements, each different.
        assert len(pools) == 7 and pools <= set(self.pool_map), (pools, self.pool_map)

    # -- 2. the pilot that dies -----------------------------------------------------------
    def start_killer(self) -> None:
        """Watch for the long job in a thread (its first run lasts LONG_FIRST_RUN s) while the test goes on."""
        self._killer_error: BaseException | None = None

        def watch() -> None:
            try:
                self.kill_pilot_of_long_job()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
                self._killer_error = exc

        self._killer = threading.Thread(target=watch, name="killer", daemon=True)
        self._killer.start()

    def join_killer(self) -> None:
        self._killer.join(timeout=patience(400))
        assert not self._killer.is_alive(), "the killer thread did not end"
        if self._killer_error is not None:
            raise self._killer_error

    def kill_pilot_of_long_job(self) -> None:
        long_id = self.long_job()

        def running_pilot() -> str | None:
            if self.get(f"/jobs/{long_id}")["Status"] != "Running":
                return None
            sources = [entry["Source"] for entry in self.get(f"/jobs/{long_id}/history")
                       if entry["Status"] == "Running"]
            return sources[-1].removeprefix("Pilot ") if sources else None

        # 200 jobs share 12 pilots; on a loaded machine the long one may wait minutes for its turn.
        pilot_id = wait_until("the long job runs", running_pilot, 300, self.all_logs, every=0.2)
        ref = next(p["BackendRef"] for p in self.get("/pilots", self.manager) if p["PilotID"] == pilot_id)
        pid = pilot_process(ref)
        assert pid is not None, f"pilot {pilot_id} ({ref}) has no process"
        os.kill(pid, signal.SIGKILL)
        self.killed_pilot = pilot_id
        self.mark("pilot killed")

    def follow_long_job(self, timeout: float) -> None:
        """Until the long job is Done: its pool stays all along (a job that may
        come back to Waiting still needs it), else no pilot would be sent for it."""
        long_id = self.long_job()
        pool = self.jobs()[long_id]["SubmitPool"]
        assert pool

        def done() -> bool:
            status = self.jobs()[long_id]["Status"]
            if status == "Done":
                return True
            pools = {p["SubmitPool"] for p in self.get("/pools")}
            assert pool in pools, f"the pool of job {long_id} ({status}) was dropped: {sorted(pools)}"
            return False

        wait_until("the long job runs again and ends", done, timeout, self.all_logs, every=0.3)
        self.mark("long job done")

    # -- 4. every job Done, where it may run --------------------------------------------------
    def wait_all_done(self, timeout: float) -> dict[int, dict[str, Any]]:
        def finished() -> dict[int, dict[str, Any]] | None:
            jobs = self.jobs()
            states = [jobs[i]["Status"] for i in self.kind_of]
            if any(s in ("Failed", "Killed") for s in states):
                bad = {i: (jobs[i]["Status"], jobs[i]["MinorStatus"]) for i in self.kind_of
                       if jobs[i]["Status"] in ("Failed", "Killed")}
                raise AssertionError(f"jobs ended badly: {bad}")
            return jobs if all(s == "Done" for s in states) else None

        jobs = wait_until(f"all {TOTAL_JOBS} jobs Done", finished, timeout, self.all_logs)
        self.mark("all done")
        return jobs

    def check_placement(self, jobs: dict[int, dict[str, Any]]) -> None:
        by_kind = {kind.name: kind for kind in KINDS}
        used: dict[str, set[str]] = {}
        for job_id, kind_name in self.kind_of.items():
            row = jobs[job_id]
            kind = by_kind[kind_name]
            assert row["Queue"] in kind.eligible, (job_id, kind_name, row["Queue"])
            if row["SubmitPool"]:
                assert row["Queue"] in self.pool_map[row["SubmitPool"]], (job_id, row)
            assert row["Site"] == row["Queue"].split("/")[0]
            used.setdefault(kind_name, set()).add(row["Queue"])
        # The work was spread: every queue ran jobs.
        assert set().union(*used.values()) == EVERY_QUEUE, used

    def check_long_job_rescheduled(self) -> None:
        history = self.get(f"/jobs/{self.long_job()}/history")
        statuses = [entry["Status"] for entry in history]
        running = [entry["Source"] for entry in history if entry["Status"] == "Running"]
        assert "Stalled" in statuses, history
        assert statuses[-1] == "Done" and statuses.count("Done") == 1, history
        assert len(running) == 2 and running[0] == f"Pilot {self.killed_pilot}" != running[1], history
        stalled = statuses.index("Stalled")
        assert statuses[stalled + 1] == "Waiting", history

    def check_in_the_database(self, database_url: str) -> None:
        """Each job ended Done exactly once (none run twice to the end, none
        lost), and was run by a pilot the SiteDirector sent to that very queue."""
        engine = make_engine(database_url)
        try:
            with engine.connect() as conn:
                done = dict(conn.execute(
                    select(schema.status_history.c.job_id, func.count())
                    .where(schema.status_history.c.status == "Done")
                    .group_by(schema.status_history.c.job_id)).all())
                placed = conn.execute(
                    select(schema.jobs.c.job_id, schema.jobs.c.queue, schema.pilots.c.site, schema.pilots.c.ce,
                           schema.pilots.c.queue.label("pilot_queue"), schema.pilots.c.backend)
                    .join(schema.pilots, schema.pilots.c.pilot_id == schema.jobs.c.pilot_id)).all()
        finally:
            engine.dispose()
        assert done == dict.fromkeys(self.kind_of, 1)
        assert len(placed) == TOTAL_JOBS
        for row in placed:
            assert row.queue == f"{row.site}/{row.ce}/{row.pilot_queue}" and row.backend == "local", row

    # -- 5. the pools go ------------------------------------------------------------------------
    def finish(self, database_url: str) -> None:
        """The scenario's end, the same in every set-up: the long job runs
        again elsewhere, every job ends Done where it may, and the pools go."""
        self.follow_long_job(timeout=240)
        jobs = self.wait_all_done(timeout=300)
        self.check_placement(jobs)
        self.check_long_job_rescheduled()
        self.check_in_the_database(database_url)
        self.wait_pools_cleaned(timeout=90)

    def wait_pools_cleaned(self, timeout: float) -> None:
        # As the manager, who sees every VO's pools and task queues.
        every = self.manager
        wait_until("the SubmitPoolCleaner drops every pool and task queue",
                   lambda: not self.get("/pools", token=every) and not self.get("/task-queues", token=every),
                   timeout, self.all_logs)
        self.mark("pools cleaned")

    def cleanup_pilots(self) -> None:
        """Kill the pilots still alive (they would poll on for a while), once
        nothing starts new ones: after the worker or `wms up` has stopped."""
        kill_pilots(self._pilot_refs)

    def stop_starting_pilots(self, stop: Callable[[], None]) -> None:
        """Read the pilots' references, then ``stop`` what starts pilots."""
        try:
            self._pilot_refs = [p["BackendRef"] for p in self.get("/pilots", self.manager)]
        except Exception:  # noqa: BLE001 - the server may be gone; its pilots end on their own
            self._pilot_refs = []
        stop()
