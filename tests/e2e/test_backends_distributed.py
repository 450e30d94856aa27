"""Slurm and ssh pilots in the distributed set-up (docs/deployment.md):
PostgreSQL, a Redis of the test's own, `wms server`, `celery -A agents
worker` (prefork) and `celery -A agents beat`; the SiteDirector runs as a
Celery task and submits to the session's one-node Slurm (``Backend:
slurm``) and over ssh to the session's sshd (``Backend: ssh``).

A dozen jobs per queue, each only runnable at its queue's site, all end
Done; every pilot of the Slurm queue is a Slurm job of that cluster and
every pilot of the ssh queue a process started over ssh, each job ran in a
pilot of its own queue (and saw it: SLURM_JOB_ID, SSH_CONNECTION); the
pilots end Done, their logs come back through `wms pilots --output`, and
every consumable is returned.
"""

from __future__ import annotations

import subprocess
import time

from tests.e2e.backend_queues import (
    SLURM_QUEUE,
    SLURM_SITE,
    SSH_QUEUE,
    SSH_SITE,
    check_consumables_returned,
    check_slurm_pilot,
    check_ssh_pilot,
    jobs_by_pilot_backend,
    logs_on_failure,
    pilots_ended,
    resources,
    site_jobs,
    stop_backend_pilots,
)
from tests.e2e.processes import celery, stop
from tests.e2e.scenario import MANAGER, USER, WMS_YAML, environment, wait_until, write_config
from tests.servers import ServerHandle, free_port

JOBS = 12
# Minutes, not seconds: the machine may be busy, and the pilots wait 5 s
# between empty answers (their defaults under Celery).
DEADLINE = 300
# The SiteDirector's Celery time limits follow its period (soft 80 %, at
# least 5 s): a cycle here runs two sbatch and an ssh on a busy machine.
AGENT_PERIODS = WMS_YAML["agent_periods"].replace("site_director: 2,", "site_director: 10,")
assert AGENT_PERIODS != WMS_YAML["agent_periods"]


def test_slurm_and_ssh_pilots_run_every_job_under_celery(tmp_path, database_factory, private_redis,
                                                         slurm_cluster, ssh_server):
    started = time.monotonic()
    database_url = database_factory("postgresql")
    url = f"http://127.0.0.1:{free_port()}"
    node_dir = tmp_path / "node"
    pilot_logs = tmp_path / "pilots"
    # An absolute pilot_log_dir: the worker writes there (Slurm pilots too),
    # the server reads it for `wms pilots --output` (docs/deployment.md).
    config = write_config(tmp_path, database_url=database_url, broker_url=private_redis.url(0),
                          bind=url.removeprefix("http://"), pilot_log_dir=str(pilot_logs),
                          agent_periods=AGENT_PERIODS)
    (config / "resources.yaml").write_text(resources(slurm_cluster, ssh_server, node_dir))
    env = environment(tmp_path, config, url)
    server = ServerHandle(tmp_path, config, url, env)
    server.ok("db", "upgrade")

    processes: list[subprocess.Popen] = []
    worker_log, beat_log = tmp_path / "worker.log", tmp_path / "beat.log"
    logs = [server.log, worker_log, beat_log, private_redis.log, slurm_cluster.dir / "slurmctld.log",
            ssh_server.dir / "sshd.log", pilot_logs, node_dir]
    refs: list[str] = []
    manager = ""
    try:
        with logs_on_failure(logs):
            server.start()
            worker, _ = celery(tmp_path, env, "worker", "--pool", "prefork", "--concurrency", "2",
                               "-n", "e2e-backends@%h", "--loglevel", "info", "--without-gossip",
                               "--without-mingle", log_name=worker_log.name)
            beat, _ = celery(tmp_path, env, "beat", "-s", str(tmp_path / "beat-schedule"), "--loglevel", "info",
                             log_name=beat_log.name)
            processes += [worker, beat]
            tokens = server.tokens({"user": USER, "manager": MANAGER})
            user, manager = tokens["user"], tokens["manager"]

            get = server.getter(user)

            def submit(site, name, command):
                (tmp_path / f"{name}.jdl").write_text(site_jobs(site, name, JOBS, command))
                ids = [int(i) for i in server.json("submit", str(tmp_path / f"{name}.jdl"), token=user)["job_ids"]]
                assert len(ids) == JOBS
                return ids

            slurm_ids = submit(SLURM_SITE, "slurm", "echo slurm job $SLURM_JOB_ID")
            ssh_ids = submit(SSH_SITE, "ssh", "echo ssh from $SSH_CONNECTION")
            for job_id, queue in ((slurm_ids[0], SLURM_QUEUE), (ssh_ids[0], SSH_QUEUE)):
                assert get(f"/jobs/{job_id}/match-queues")["eligible"] == [queue]

            # -- every job Done, each on its own queue
            def all_done():
                rows = {r["JobID"]: r for r in get("/jobs")}
                bad = {i: (r["Status"], r["MinorStatus"]) for i, r in rows.items() if r["Status"] in ("Failed", "Killed")}
                assert not bad, f"jobs ended badly: {bad}"
                return rows if all(r["Status"] == "Done" for r in rows.values()) else None

            rows = wait_until(f"all {2 * JOBS} jobs Done", all_done, DEADLINE, logs)
            done_after = time.monotonic() - started
            assert sorted(rows) == sorted(slurm_ids + ssh_ids)
            assert {rows[i]["Queue"] for i in slurm_ids} == {SLURM_QUEUE}
            assert {rows[i]["Queue"] for i in ssh_ids} == {SSH_QUEUE}

            # -- the pilots end (Done), as their backends say
            shown = wait_until("every pilot ended", pilots_ended(lambda: get("/pilots", manager)), DEADLINE, logs)
            refs = [p["BackendRef"] for p in shown]
            by_queue = {queue: [p for p in shown if p["Queue"] == queue] for queue in (SLURM_QUEUE, SSH_QUEUE)}
            assert len(shown) == sum(map(len, by_queue.values())), shown
            slurm_jobs = {p["PilotID"]: check_slurm_pilot(p, slurm_cluster) for p in by_queue[SLURM_QUEUE]}
            for pilot in by_queue[SSH_QUEUE]:
                check_ssh_pilot(pilot, ssh_server, node_dir)
            assert slurm_jobs and by_queue[SSH_QUEUE], shown
            assert {p["State"] for p in shown} == {"Done"}, shown
            for queue, pilots in by_queue.items():
                assert sum(p["JobsRun"] for p in pilots) == JOBS, (queue, pilots)

            # -- each job ran in a pilot of its queue's backend, and saw it
            placed = jobs_by_pilot_backend(database_url)
            assert {placed[i] for i in slurm_ids} == {(SLURM_QUEUE, SLURM_QUEUE, "slurm")}, placed
            assert {placed[i] for i in ssh_ids} == {(SSH_QUEUE, SSH_QUEUE, "ssh")}, placed
            for job_id in slurm_ids[:3]:
                printed = server.json("output", str(job_id), token=user)["stdout"]
                ran_in = [e["Source"] for e in get(f"/jobs/{job_id}/history") if e["Status"] == "Running"][-1]
                assert printed == f"slurm job {slurm_jobs[ran_in.removeprefix('Pilot ')]}\n", printed
            for job_id in ssh_ids[:3]:
                printed = server.json("output", str(job_id), token=user)["stdout"]
                assert printed.startswith("ssh from 127.0.0.1 ") and printed.split()[-1] == str(ssh_server.port), printed

            # -- the pilots' logs, through the server
            for pilot in shown:
                log = server.ok("pilots", "--output", pilot["PilotID"], token=manager)
                assert f"pilot {pilot['PilotID']} starting" in log, log

            check_consumables_returned(database_url)
            for row in get("/queues", manager):
                assert row["resv/used/tot"].split("/")[:2] == ["0", "0"], row

            for process, name in ((worker, "worker"), (beat, "beat")):
                assert process.poll() is None, f"celery {name} exited ({process.returncode})"
            worker_text = worker_log.read_text(errors="replace")
            assert "Task wms.agents.site_director" in worker_text and "succeeded" in worker_text
            assert "submission to" not in worker_text, "a pilot submission failed"
            assert "TimeLimitExceeded" not in worker_text
            print(f"all jobs Done after {done_after:.0f} s, pilots ended after {time.monotonic() - started:.0f} s")
    finally:
        # What starts pilots stops first, then the pilots left, then the server.
        for process in reversed(processes):
            stop(process)
        if not refs and manager:
            try:
                with server.api(manager) as api:
                    refs = [p["BackendRef"] for p in api.get("/pilots").json()]
            except Exception:  # noqa: BLE001 - the server may be gone
                refs = []
        stop_backend_pilots(refs, slurm_cluster)
        server.stop()
