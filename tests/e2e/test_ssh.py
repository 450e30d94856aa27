"""ssh pilots end to end: one `wms up` process (API, Matcher, agents; the
SiteDirector with the ssh backend) on SQLite, and the session's own sshd
on loopback (tests/sshd_server.py) as the node.

A dozen jobs run in pilots started over ssh, and see it (SSH_CONNECTION
names the node's sshd); the pilot process running the long job is
SIGKILLed on the node: the backend reports it Failed, the reaper declares
the job Stalled and another pilot runs it. Every job ends Done, every
slot is given back, the other pilots end Done, and every pilot's log,
the killed one's too, comes back from the node for `wms pilots --output`.
"""

from __future__ import annotations

import os
import signal
import time

from tests.e2e.backend_queues import (
    SSH_QUEUE,
    SSH_SITE,
    check_consumables_returned,
    check_ssh_pilot,
    logs_on_failure,
    pilots_ended,
    resources,
    site_jobs,
    stop_backend_pilots,
)
from tests.e2e.processes import EmbeddedHandle
from tests.e2e.scenario import MANAGER, USER, environment, wait_until, write_config
from tests.servers import free_port

QUICK_JOBS = 12
# Caught running, then run again: shorter than heartbeat_timeout (10 s).
LONG = (f'[ JobName = "long"; Executable = "/bin/sh"; CPUTime = 300; Site = "{SSH_SITE}";'
        ' Arguments = "-c \'sleep 6\'"; ]')
DEADLINE = 240


def test_ssh_pilots_run_every_job_through_a_killed_pilot(ssh_server, tmp_path):
    started = time.monotonic()
    url = f"http://127.0.0.1:{free_port()}"
    database_url = f"sqlite:///{tmp_path / 'wms.db'}"
    node_dir = tmp_path / "node"
    config = write_config(tmp_path, database_url=database_url, bind=url.removeprefix("http://"))
    (config / "resources.yaml").write_text(resources(ssh_server=ssh_server, node_dir=node_dir))
    server = EmbeddedHandle(tmp_path, config, url, environment(tmp_path, config, url))
    logs = [server.log, ssh_server.dir / "sshd.log", node_dir]
    refs: list[str] = []
    manager = ""
    try:
        with logs_on_failure(logs):
            server.start()
            tokens = server.tokens({"user": USER, "manager": MANAGER})
            user, manager = tokens["user"], tokens["manager"]

            get = server.getter(user)

            def submit(text, name):
                (tmp_path / name).write_text(text)
                return [int(i) for i in server.json("submit", str(tmp_path / name), token=user)["job_ids"]]

            [long_id] = submit(LONG, "long.jdl")
            quick = submit(site_jobs(SSH_SITE, "quick", QUICK_JOBS, "echo ssh from $SSH_CONNECTION"), "quick.jdl")
            assert len(quick) == QUICK_JOBS

            # -- the pilot running the long job dies on the node
            def running_pilot():
                if get(f"/jobs/{long_id}")["Status"] != "Running":
                    return None
                sources = [e["Source"] for e in get(f"/jobs/{long_id}/history") if e["Status"] == "Running"]
                return sources[-1].removeprefix("Pilot ") if sources else None

            killed = wait_until("the long job runs in an ssh pilot", running_pilot, DEADLINE, logs, every=0.2)
            pilot = next(p for p in get("/pilots", manager) if p["PilotID"] == killed)
            wrapper = check_ssh_pilot(pilot, ssh_server, node_dir)
            # The pilot is the child of the exit-status wrapper whose pid the reference holds.
            children = open(f"/proc/{wrapper}/task/{wrapper}/children").read().split()
            assert children, f"pilot {killed} ({pilot['BackendRef']}) has no process"
            os.kill(int(children[0]), signal.SIGKILL)

            # -- every job Done, the long one after a second run elsewhere
            def all_done():
                rows = {r["JobID"]: r for r in get("/jobs")}
                bad = {i: (r["Status"], r["MinorStatus"]) for i, r in rows.items() if r["Status"] in ("Failed", "Killed")}
                assert not bad, f"jobs ended badly: {bad}"
                return rows if all(r["Status"] == "Done" for r in rows.values()) else None

            rows = wait_until(f"all {QUICK_JOBS + 1} jobs Done", all_done, DEADLINE, logs)
            assert len(rows) == QUICK_JOBS + 1 and {r["Queue"] for r in rows.values()} == {SSH_QUEUE}
            history = get(f"/jobs/{long_id}/history")
            statuses = [e["Status"] for e in history]
            runs = [e["Source"] for e in history if e["Status"] == "Running"]
            assert "Stalled" in statuses and statuses.count("Done") == 1, history
            assert len(runs) == 2 and runs[0] == f"Pilot {killed}" != runs[1], history
            for job_id in quick[:3]:
                printed = server.json("output", str(job_id), token=user)["stdout"]
                assert printed.startswith("ssh from 127.0.0.1 ") and printed.split()[-1] == str(ssh_server.port), printed

            # -- every slot given back
            check_consumables_returned(database_url)
            for row in get("/queues", manager):
                assert row["resv/used/tot"].split("/")[:2] == ["0", "0"], row

            # -- the pilots' ends as the node saw them, and their logs back from it
            shown = wait_until("every pilot ended", pilots_ended(lambda: get("/pilots", manager)), DEADLINE, logs)
            refs = [p["BackendRef"] for p in shown]
            for p in shown:
                check_ssh_pilot(p, ssh_server, node_dir)
            states = {p["PilotID"]: p["State"] for p in shown}
            assert states.pop(killed) == "Failed" and set(states.values()) == {"Done"}, shown
            assert sum(p["JobsRun"] for p in shown) == QUICK_JOBS + 2, shown
            for p in shown:
                log = server.ok("pilots", "--output", p["PilotID"], token=manager)
                assert f"pilot {p['PilotID']} starting" in log, log
            killed_log = server.ok("pilots", "--output", killed, token=manager)
            # The exit-status wrapper says how its pilot ended.
            assert f"matched job {long_id} " in killed_log and killed_log.rstrip().endswith("Killed"), killed_log
            print(f"ssh under wms up: {time.monotonic() - started:.0f} s")
    finally:
        if not refs and manager:
            try:
                with server.api(manager) as api:
                    refs = [p["BackendRef"] for p in api.get("/pilots").json()]
            except Exception:  # noqa: BLE001 - the server may be gone
                refs = []
        server.stop()
        stop_backend_pilots(refs)
