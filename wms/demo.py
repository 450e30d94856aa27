"""`make demo`: the whole loop on the embedded default.

Starts `wms up` on a fresh SQLite database under var/demo (with the
default configuration, the SiteDirector's period shortened so that the
demo does not wait a minute, and the pilots' logs in var/demo/pilots: one
place for every log of the demo, emptied at each start), submits every JDL in examples/ as two users
of different VOs, and lets the system work: the SiteDirector starts local
pilots on the queues that have eligible jobs (the embedded default's local
computing element: pilots are local processes standing in for every queue
of config/resources.yaml), the pilots pull and run the jobs. A live view
shows the jobs by state and queue until the work is done; the end says
where each job ran and why any still waits.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path.cwd()
VAR = ROOT / "var" / "demo"
WMS = [sys.executable, "-m", "wms.cli.main"]
TTY = sys.stdout.isatty()
BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if TTY else ("", "", "")
FINAL = {"Done", "Failed", "Killed"}
STATES = ["Waiting", "Matched", "Running", "Done", "Failed", "Killed"]
TIMEOUT = 120
PILOT_LOGS = VAR / "pilots"
PILOT_LOG_LINES = 6
# wms up stops its local pilots before it exits (a few seconds when they run jobs).
STOP_TIMEOUT = 30
SIMULATED = (
    "  Every site of config/resources.yaml is simulated on this machine: the SiteDirector starts each\n"
    "  queue's pilots as local processes that announce the queue's Platform and CPUTime. So the arm\n"
    "  job prints this machine's architecture, and the job asking for an Intel Xeon this machine's CPU model."
)


def heading(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Demo:
    def __init__(self) -> None:
        self.port = free_port()
        self.env = {
            **os.environ,
            "HOME": str(VAR / "home"),
            "WMS_DATABASE_URL": f"sqlite:///{VAR / 'wms.db'}",
            "WMS_URL": f"http://127.0.0.1:{self.port}",
            "WMS_CONFIG": str(VAR / "config"),
        }
        self.env.pop("WMS_TOKEN", None)
        self.processes: list[subprocess.Popen] = []

    def wms(self, *args: str, token: str | None = None, show: bool = True) -> str:
        env = dict(self.env, **({"WMS_TOKEN": token} if token else {}))
        if show:
            print(f"{DIM}$ wms {' '.join(args)}{RESET}", flush=True)
        result = subprocess.run([*WMS, *args], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"demo: wms {' '.join(args)} failed: {result.stderr.strip()}")
        if show and result.stderr:
            # Warnings, e.g. `wms submit` on a job no configured queue could ever run.
            print("\n".join(f"  {line}" for line in result.stderr.splitlines()), flush=True)
        return result.stdout

    def token(self, user: str, group: str, vo: str, role: str) -> str:
        return self.wms("admin", "token", "create", "--user", user, "--group", group, "--vo", vo, "--role", role,
                        show=False).strip()

    def start(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        handle = open(log, "w")
        process = subprocess.Popen(args, env=env or self.env, stdout=handle, stderr=handle)
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGINT if process is self.processes[0] else signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()

    def run(self) -> int:
        heading("Starting the embedded system (wms up: API, Matcher, lease timer; SQLite under var/demo)")
        server = self.start([*WMS, "up", "--bind", f"127.0.0.1:{self.port}"], VAR / "wms-up.log")
        wait_until_up(self.env["WMS_URL"], server)
        print(f"  up at {self.env['WMS_URL']} (OpenAPI at {self.env['WMS_URL']}/docs)")
        print(SIMULATED)
        roland = self.token("roland", "lhcb_user", "lhcb", "user")
        andre = self.token("andre", "dteam_user", "dteam", "user")

        heading("Submitting the examples as roland (VO lhcb), one as andre (VO dteam)")
        examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.jdl"))
        ids = self.wms("submit", *examples, token=roland).split()
        ids += self.wms("submit", "examples/software.jdl", token=andre).split()
        print(f"  {len(ids)} jobs from {len(examples) + 1} files")

        heading("SubmitPools: the hash of canonical Requirements -> eligible queues")
        print(self.wms("pools"), end="")

        heading("Live view: the SiteDirector starts pilots where jobs can run; pilots pull and run them")
        self.follow(ids)

        heading("The pilots the SiteDirector started; each runs its jobs in a sandbox (Isolation)")
        print(self.wms("pilots"), end="")

        heading("Where each job ran, and why the others wait")
        self.summary(ids)

        heading("Logs")
        self.logs()
        return 0

    def jobs(self, ids: list[str]) -> list[dict]:
        return json.loads(self.wms("status", *ids, "--json", show=False))

    def follow(self, ids: list[str]) -> None:
        deadline = time.monotonic() + TIMEOUT
        lines = 0
        while True:
            rows = self.jobs(ids)
            pilots = Counter(p["State"] for p in json.loads(self.wms("pilots", "--json", show=False)))
            states = Counter(r["Status"] for r in rows)
            per_queue = Counter((r["Queue"] or "(not matched)", r["Status"]) for r in rows)
            text = ["  jobs    " + "  ".join(f"{s}: {states.get(s, 0):>2}" for s in STATES),
                    "  pilots  " + "  ".join(f"{s}: {n}" for s, n in sorted(pilots.items())) if pilots else
                    "  pilots  none yet"]
            for queue in sorted({q for q, _ in per_queue}):
                counts = ", ".join(f"{s} {per_queue[(queue, s)]}" for s in STATES if per_queue[(queue, s)])
                text.append(f"    {queue:<45} {counts}")
            if TTY and lines:
                print(f"\033[{lines}F\033[J", end="")
            print("\n".join(text), flush=True)
            lines = len(text)
            settled = all(r["Status"] in FINAL or r["MinorStatus"].startswith("No eligible queue") for r in rows)
            if settled or time.monotonic() > deadline:
                return
            time.sleep(1.0 if TTY else 3.0)

    def summary(self, ids: list[str]) -> None:
        rows = self.jobs(ids)
        width = max(len(r["JobName"]) for r in rows)
        for row in rows:
            if row["Status"] in FINAL:
                where = f"ran on {row['Queue']}"
                out = self.wms("output", str(row["JobID"]), "--json", show=False) if row["Status"] == "Done" else ""
                first = json.loads(out)["stdout"].strip().splitlines()[:1] if out else []
                if first:
                    where += f"  {DIM}stdout: {first[0][:50]}{RESET}"
            else:
                where = row["MinorStatus"]
            print(f"  {row['JobID']:>3}  {row['JobName']:<{width}}  {row['Status']:<8} {where}")

    def logs(self) -> None:
        """Where every log is, and the end of one pilot's as `wms pilots --output` shows it."""
        print(f"  server and agents: {VAR.relative_to(ROOT) / 'wms-up.log'}")
        print(f"  pilots:            {PILOT_LOGS.relative_to(ROOT)}/PILOT_ID.log  (or: wms pilots --output PILOT_ID)")
        pilots = json.loads(self.wms("pilots", "--json", show=False))
        ran = [p for p in pilots if p["JobsRun"]] or pilots
        if ran:
            pilot_id = ran[0]["PilotID"]
            print(f"{DIM}$ wms pilots --output {pilot_id} | tail -{PILOT_LOG_LINES}{RESET}")
            lines = self.wms("pilots", "--output", pilot_id, show=False).splitlines()[-PILOT_LOG_LINES:]
            print("\n".join(f"  {line}" for line in lines))


def wait_until_up(url: str, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"demo: wms up exited; see {VAR / 'wms-up.log'}")
        try:
            if httpx.get(url + "/api/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit("demo: wms up did not start in time")


def demo_config() -> None:
    """The default configuration, with the SiteDirector every few seconds."""
    shutil.copytree(ROOT / "config", VAR / "config")
    wms_yaml = VAR / "config" / "wms.yaml"
    text = wms_yaml.read_text()
    assert "  site_director: 60" in text, "config/wms.yaml no longer sets site_director"
    assert "\npilot_log_dir: " in text, "config/wms.yaml no longer sets pilot_log_dir"
    text = text.replace("  site_director: 60", "  site_director: 3")
    text = re.sub(r"(?m)^pilot_log_dir: .*$", f"pilot_log_dir: {PILOT_LOGS}", text)
    wms_yaml.write_text(text)


def prepare() -> None:
    """A clean var/demo (the last run's database and every log gone) with the demo's configuration."""
    shutil.rmtree(VAR, ignore_errors=True)
    PILOT_LOGS.mkdir(parents=True)
    demo_config()


def main() -> int:
    prepare()
    demo = Demo()
    try:
        return demo.run()
    finally:
        demo.stop_all()


if __name__ == "__main__":
    sys.exit(main())
