"""Real pilot processes against a real `wms server`, and what their payloads
wrote of themselves: the world of the fault tests (tests/faults/).

Every copy of a payload writes its own start, beat (every 50 ms) and end
times, with the pilot's job directory, so that overlap is measured, not
guessed. Pilots talk to the server through a user-space forwarder
(tests/faults/netcuts.py), each in a network namespace of its own behind a
veth pair when given a link, else on the loopback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from tests.faults.netcuts import Forwarder, Link
from tests.helpers import REPO, patience, tail, wait_until
from tests.servers import ServerHandle, running_server
from wms.config.loader import load_config
from agents.registry import AGENTS
from agents.scheduler import Scheduler
from wms.db import matching as match_db
from wms.db.engine import make_engine
from wms.db.schema import jobs
from wms.services.runtime import Runtime

USERS = {"roland": ("roland", "lhcb_user", "lhcb", "user"), "admin": ("admin", "lhcb_prod", "lhcb", "manager"),
         "oper": ("oper", "lhcb_prod", "lhcb", "operator")}
UNFINISHED = ("Received", "Checking", "Waiting", "Matched", "Running", "Stalled")

# Each copy: its job directory, then start, a beat every 50 ms for the given seconds, end; stdout names the copy.
# A copy that finds an earlier one runs 1 s: what a re-run is made of is not what is tested.
PAYLOAD = """#!/bin/sh
seconds=$1
for earlier in "$MARKS/$WMS_JOB_ID".*; do [ -e "$earlier" ] && seconds=1; done
copy="$MARKS/$WMS_JOB_ID.$(date +%s%N).$$"
echo "dir $WMS_JOB_DIR" > "$copy"
echo "start $(date +%s.%N)" >> "$copy"
end=$(( $(date +%s%N) + seconds * 1000000000 ))
while [ "$(date +%s%N)" -lt "$end" ]; do echo "beat $(date +%s.%N)" >> "$copy"; sleep 0.05; done
echo "end $(date +%s.%N)" >> "$copy"
echo "copy $copy"
"""


@dataclass
class Copy:
    """One run of a payload, as it wrote itself down."""

    path: Path
    job_dir: str
    start: float
    last: float
    ended: bool

    @classmethod
    def read(cls, path: Path) -> Copy:
        """The copy as written so far: one just begun (its file made, its start not yet
        written) is a copy too, started when its file was last written."""
        lines = [line.split(" ", 1) for line in path.read_text().splitlines() if " " in line]
        times = [float(value) for key, value in lines if key in ("start", "beat", "end") and _number(value)]
        if not times:
            times = [path.stat().st_mtime]
        return cls(path, dict(lines).get("dir", ""), times[0], times[-1], any(key == "end" for key, _ in lines))


def _number(text: str) -> bool:
    """Whether a time was written whole (a line being written may be cut short)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass
class World:
    """The server, its lease reaper, the forwarder, and the pilots in their namespaces."""

    tmp: Path
    server: ServerHandle
    forwarder: Forwarder
    runtime: Runtime
    marks: Path
    links: list[Link] = field(default_factory=list)
    pilots: dict[str, tuple[subprocess.Popen, Path]] = field(default_factory=dict)

    def link(self) -> Link:
        link = Link(len(self.links) + 1)
        self.links.append(link)
        return link.make()

    def pilot(self, name: str, link: Link | None, *extra: str) -> None:
        """A pilot in ``link``'s namespace (None: on the loopback), talking to the server through the forwarder."""
        work = self.tmp / "pilots" / name
        work.mkdir(parents=True)
        log = work / "pilot.log"
        address = link.server_address if link is not None else "127.0.0.1"
        argv = [sys.executable, "-m", "pilot.main", "--url", f"http://{address}:{self.forwarder.port}",
                "--site", "DIRAC.Local.ch", "--ce", "localhost", "--queue", "default", "--pilot-id", name,
                "--workdir", str(work / "jobs"), "--state-dir", str(work / "state"), "--isolation", "none",
                "--platform", "x86_64-el9", "--poll", "0.3", "--max-empty", "1000", "--min-time-left", "0",
                "--heartbeat", "0.5", "--http-timeout", "2", "--grace", "1", "--patience", "120",
                "--job-env", "MARKS", *extra]
        env = {**os.environ, "WMS_PILOT_TOKEN": self.server.pilot_token(name), "MARKS": str(self.marks)}
        with log.open("w") as out:
            process = subprocess.Popen(link.command(argv) if link is not None else argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        self.pilots[name] = (process, log)

    def submit(self, seconds: float, count: int = 1) -> list[int]:
        script = self.tmp / "payload.sh"
        if not script.exists():
            script.write_text(PAYLOAD)
            script.chmod(0o755)
        path = self.tmp / f"job-{seconds}.jdl"
        path.write_text(f'[ Executable = "{script}"; Arguments = "{seconds}"; CPUTime = 300; '
                        f'Requirements = [ Platform = "x86_64-el9"; ]; ]')
        return [int(i) for i in self.server.ok("submit", *[str(path)] * count, token=self.server.issued["roland"]).split()]

    def jobs(self) -> dict[int, dict]:
        with self.server.api(self.server.issued["admin"]) as api:
            return {row["JobID"]: row for row in api.get("/jobs").raise_for_status().json()}

    def history(self, job_id: int) -> list[dict]:
        with self.server.api(self.server.issued["admin"]) as api:
            return api.get(f"/jobs/{job_id}/history").raise_for_status().json()

    def output(self, job_id: int) -> str:
        with self.server.api(self.server.issued["admin"]) as api:
            return api.get(f"/jobs/{job_id}/output").raise_for_status().json()["stdout"]

    def copies(self, job_id: int) -> list[Copy]:
        return sorted((Copy.read(p) for p in self.marks.glob(f"{job_id}.*")), key=lambda c: c.start)

    def wait_running(self, job_id: int, pilot: str) -> None:
        """Until ``pilot``'s copy of the job runs and the server has heard its first heartbeat."""
        def started() -> bool:
            copies = [c for c in self.copies(job_id) if f"/pilots/{pilot}/" in c.job_dir]
            with self.runtime.engine.connect() as conn:
                beat = conn.execute(select(jobs.c.heartbeat_time).where(jobs.c.job_id == job_id)).scalar()
            return bool(copies) and beat is not None
        wait_until(started, timeout=patience(60), what=f"job {job_id} running on {pilot}", details=self.details)

    def log(self, pilot: str) -> str:
        return self.pilots[pilot][1].read_text(errors="replace")

    def details(self) -> str:
        shown = [f"--- {name}\n{tail(log, 2500)}" for name, (_, log) in self.pilots.items()]
        return "\n".join([*shown, f"--- server\n{tail(self.server.log, 2500)}"])

    def wait_all_done(self) -> dict[int, dict]:
        def done() -> dict[int, dict] | None:
            rows = self.jobs()
            return rows if all(r["Status"] not in UNFINISHED for r in rows.values()) else None
        return wait_until(done, timeout=patience(120), what="every job finished", details=self.details)

    def check(self) -> dict[int, list[Copy]]:
        """The promises: no overlap, Done once with the last copy's output, nothing stuck, nothing debited."""
        rows = self.wait_all_done()
        copies = {}
        for job_id, row in rows.items():
            assert row["Status"] == "Done", (job_id, row, self.details())
            runs = self.copies(job_id)
            for earlier, later in zip(runs, runs[1:]):
                assert earlier.last < later.start, (f"job {job_id}: two copies ran at once, for "
                                                    f"{earlier.last - later.start:.2f} s", earlier, later)
            assert [h["Status"] for h in self.history(job_id)].count("Done") == 1
            assert runs and runs[-1].ended and self.output(job_id).strip() == f"copy {runs[-1].path}"
            copies[job_id] = runs
        with self.runtime.engine.connect() as conn:
            assert {k: v for k, v in match_db.all_usage(conn).items() if v} == {}
        return copies

    def close(self) -> None:
        for process, _ in self.pilots.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, _ in self.pilots.values():
            try:
                process.wait(timeout=patience(20))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def world_running(tmp: Path, database_url: str | None, config: Path | None = None,
                  reaper_period: float | None = None) -> Iterator[World]:
    """A server on a fresh database (None: SQLite in ``tmp``), the forwarder in
    front of it and, with ``reaper_period``, the lease reaper running every so
    many seconds; everything stopped, the pilots first, on exit."""
    marks = tmp / "marks"
    marks.mkdir()
    with running_server(tmp, config, tokens=USERS, database_url=database_url) as server:
        engine = make_engine(server.env["WMS_DATABASE_URL"])
        runtime = Runtime.create(load_config(server.config), engine)
        reaper = None
        if reaper_period is not None:
            reaper = Scheduler(runtime, {"lease_reaper": AGENTS["lease_reaper"]}, {"lease_reaper": reaper_period})
            reaper.start()
        forwarder = Forwarder(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))).start()
        world = World(tmp, server, forwarder, runtime, marks)
        try:
            yield world
        finally:
            forwarder.open_gate()
            world.close()
            forwarder.stop()
            if reaper is not None:
                reaper.stop()
            for link in world.links:
                link.remove()
            engine.dispose()
