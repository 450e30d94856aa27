"""`make demo`: the whole loop on the embedded default.

Starts `wms up` on a fresh SQLite database under var/demo, submits every
JDL in examples/ as two users of different VOs, starts local pilots on the
queues (the embedded default's local computing element: pilots are local
processes standing in for every queue of config/resources.yaml), shows a
live view of the jobs by state and queue until the work is done, and ends
with where each job ran and why any still waits.
"""

from __future__ import annotations

import json
import os
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
PILOT = [sys.executable, "-m", "pilot"]
TTY = sys.stdout.isatty()
BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if TTY else ("", "", "")
FINAL = {"Done", "Failed", "Killed"}
STATES = ["Waiting", "Matched", "Running", "Done", "Failed", "Killed"]
TIMEOUT = 120


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
            "WMS_CONFIG": str(ROOT / "config"),
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
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()

    def run(self) -> int:
        heading("Starting the embedded system (wms up: API, Matcher, lease timer; SQLite under var/demo)")
        server = self.start([*WMS, "up", "--bind", f"127.0.0.1:{self.port}"], VAR / "wms-up.log")
        wait_until_up(self.env["WMS_URL"], server)
        print(f"  up at {self.env['WMS_URL']} (OpenAPI at {self.env['WMS_URL']}/docs)")
        roland = self.token("roland", "lhcb_user", "lhcb", "user")
        andre = self.token("andre", "dteam_user", "dteam", "user")
        pilot = self.token("pilot", "lhcb_pilot", "lhcb", "pilot")

        heading("Submitting the examples as roland (VO lhcb), one as andre (VO dteam)")
        examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.jdl"))
        ids = self.wms("submit", *examples, token=roland).split()
        ids += self.wms("submit", "examples/software.jdl", token=andre).split()
        print(f"  {len(ids)} jobs from {len(examples) + 1} files")

        heading("SubmitPools: the hash of canonical Requirements -> eligible queues")
        print(self.wms("pools"), end="")

        heading("Starting local pilots, one per queue with the queue's platform")
        queues = [row for row in json.loads(self.wms("queues", "--json", show=False)) if row["Kind"] == "queue"]
        for row in queues:
            site, ce, queue = row["Name"].split("/")
            platform = "aarch64-el9" if "arm" in queue else ("x86_64-el8" if "RAL" in site else "x86_64-el9")
            args = [*PILOT, "--site", site, "--ce", ce, "--queue", queue, "--slots", "2", "--max-empty", "4",
                    "--poll", "0.5", "--heartbeat", "2", "--platform", platform, "--lifetime", "400000",
                    "--workdir", str(VAR / "pilots" / row["Name"].replace("/", "_"))]
            self.start(args, VAR / f"pilot-{site}-{queue}.log", env=dict(self.env, WMS_TOKEN=pilot))
            print(f"  pilot on {row['Name']:<42} platform {platform}")

        heading("Live view: jobs by state and by queue")
        self.follow(ids)

        heading("Where each job ran, and why the others wait")
        self.summary(ids)
        return 0

    def jobs(self, ids: list[str]) -> list[dict]:
        return json.loads(self.wms("status", *ids, "--json", show=False))

    def follow(self, ids: list[str]) -> None:
        deadline = time.monotonic() + TIMEOUT
        lines = 0
        while True:
            rows = self.jobs(ids)
            states = Counter(r["Status"] for r in rows)
            per_queue = Counter((r["Queue"] or "(not matched)", r["Status"]) for r in rows)
            text = ["  " + "  ".join(f"{s}: {states.get(s, 0):>2}" for s in STATES)]
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
        print(f"\n{DIM}Logs of the server and the pilots are in {VAR}.{RESET}")


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


def main() -> int:
    shutil.rmtree(VAR, ignore_errors=True)
    (VAR / "pilots").mkdir(parents=True)
    demo = Demo()
    try:
        return demo.run()
    finally:
        demo.stop_all()


if __name__ == "__main__":
    sys.exit(main())
