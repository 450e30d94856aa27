"""`make demo`: the system on the embedded default, submitting the examples.

Starts `wms up` on a fresh SQLite database under var/demo, creates tokens
for two users of different VOs, submits every JDL in examples/ with the
real `wms` commands, and shows where each job stands: its SubmitPool, its
task queue, the queues that could run it and, for a job no queue can
run, why. Matching and pilots join the demo when the Matcher exists;
until then the jobs wait in their pools and task queues.
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
from pathlib import Path

import httpx

ROOT = Path.cwd()
VAR = ROOT / "var" / "demo"
WMS = [sys.executable, "-m", "wms.cli.main"]
BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")

USERS = {
    "roland": ("lhcb_user", "lhcb"),
    "andre": ("dteam_user", "dteam"),
}


def heading(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wms(env: dict[str, str], *args: str, token: str | None = None, show: bool = True) -> str:
    run_env = dict(env, **({"WMS_TOKEN": token} if token else {}))
    if show:
        print(f"{DIM}$ wms {' '.join(args)}{RESET}", flush=True)
    result = subprocess.run([*WMS, *args], env=run_env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"demo: wms {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def main() -> int:
    shutil.rmtree(VAR, ignore_errors=True)
    VAR.mkdir(parents=True)
    port = free_port()
    env = {
        **os.environ,
        "HOME": str(VAR / "home"),
        "WMS_DATABASE_URL": f"sqlite:///{VAR / 'wms.db'}",
        "WMS_URL": f"http://127.0.0.1:{port}",
        "WMS_CONFIG": str(ROOT / "config"),
    }
    env.pop("WMS_TOKEN", None)

    heading("Starting the embedded system (wms up: API, SQLite under var/demo)")
    log = open(VAR / "wms-up.log", "w")
    server = subprocess.Popen([*WMS, "up", "--bind", f"127.0.0.1:{port}"], env=env, stdout=log, stderr=log)
    try:
        wait_until_up(env["WMS_URL"], server)
        print(f"  up at {env['WMS_URL']} (OpenAPI at {env['WMS_URL']}/docs)")
        tokens = {
            user: wms(env, "admin", "token", "create", "--user", user, "--group", group, "--vo", vo,
                      "--role", "user", show=False).strip()
            for user, (group, vo) in USERS.items()
        }
        print("  tokens created for roland (lhcb) and andre (dteam)")

        heading("Submitting the examples as roland (VO lhcb)")
        examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.jdl"))
        ids = wms(env, "submit", *examples, token=tokens["roland"]).split()
        print(f"  {len(ids)} jobs from {len(examples)} files, in one transaction: {ids[0]}..{ids[-1]}")
        heading("...and one as andre (VO dteam): the same Requirements give another pool")
        andre_ids = wms(env, "submit", "examples/software.jdl", token=tokens["andre"]).split()

        heading("The jobs, seen by the local manager (wms up wrote its token)")
        print(wms(env, "jobs"), end="")

        heading("SubmitPools (hash of canonical Requirements -> eligible queues)")
        print(wms(env, "pools"), end="")
        heading("getSubmitPoolsForQueue, as a SiteDirector asks it")
        print(wms(env, "pools", "--site", "DIRAC.Local.ch", "--ce", "localhost", "--queue", "default"), end="")

        heading("Task queues (jobs with the same scheduling content share one)")
        print(wms(env, "task-queues"), end="")

        heading("Where each job could run")
        summary(env, ids + andre_ids)
        print(f"\n{DIM}The Matcher and pilots will take these jobs from here. "
              f"The server log is in {VAR / 'wms-up.log'}.{RESET}")
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    return 0


def summary(env: dict[str, str], ids: list[str]) -> None:
    rows = json.loads(wms(env, "status", *ids, "--json", show=False))
    width = max(len(r["JobName"]) for r in rows)
    for row in rows:
        queues = json.loads(wms(env, "match-queues", str(row["JobID"]), "--json", show=False))
        where = f"{len(queues)} queue(s): {', '.join(queues[:3])}{' ...' if len(queues) > 3 else ''}" if queues \
            else row["MinorStatus"]
        print(f"  {row['JobID']:>3}  {row['JobName']:<{width}}  {row['Status']:<8} {where}")


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


if __name__ == "__main__":
    sys.exit(main())
