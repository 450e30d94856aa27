"""Slurm pilots end to end: one `wms up` process (API, Matcher, agents; the
SiteDirector with the slurm backend) on SQLite, and the session's own
one-node Slurm (tests/slurm_cluster.py).

40 jobs holding a license each run in pilots that are Slurm batch jobs and
see their allocation (SLURM_JOB_ID); the pilot running the long job is
cancelled with scancel mid-job, leaves the job, the reaper declares it
Stalled and another pilot runs it; every job ends Done, every slot and
license is given back, and the pilots' Slurm ends are recorded (the
cancelled one Aborted, the others Done) with their logs.
"""

from __future__ import annotations

import re
import subprocess

from tests.e2e.processes import EmbeddedHandle
from tests.e2e.scenario import MANAGER, USER, environment, wait_until, write_config
from tests.servers import free_port
from wms.backends.slurm_jobs import SlurmRef

QUEUE = "E2E.Slurm.ch/slurm.e2e.ch/batch"
RESOURCES = """\
Sites:
  E2E.Slurm.ch:
    CEs:
      slurm.e2e.ch:
        Backend: slurm
        SlurmConf: {conf}
        Queues:
          batch: {{CPUTime: 86400, Partition: debug, SlurmOptions: "--time=10 --comment=wms-e2e",
                  MaxWaitingPilots: 3, MaxTotalPilots: 3, complex_values: {{slots: 3, compiler_lic: 2}}}}
"""
QUICK_JOBS = 39
JOBS = ('[ JobName = "quick_%n"; Executable = "/bin/sh"; CPUTime = 300; Parameters = 39;'
        ' Arguments = "-c \'echo job $SLURM_JOB_ID on $SLURMD_NODENAME\'"; ]')
# Caught running (its first run lasts 12 s), then run again (1 s): both
# within heartbeat_timeout (tests/e2e/scenario.py), as the pilots send no
# heartbeat sooner.
LONG = ('[ JobName = "long"; Executable = "/bin/sh"; CPUTime = 300;'
        ' Arguments = "-c \'if [ -e {marker} ]; then sleep 1; else touch {marker}; sleep 12; fi\'"; ]')


def test_slurm_pilots_run_every_job_through_a_cancelled_pilot(slurm_cluster, tmp_path, failure_logs):
    url = f"http://127.0.0.1:{free_port()}"
    database_url = f"sqlite:///{tmp_path / 'wms.db'}"
    config = write_config(tmp_path, database_url=database_url, bind=url.removeprefix("http://"))
    (config / "resources.yaml").write_text(RESOURCES.format(conf=slurm_cluster.conf))
    server = EmbeddedHandle(tmp_path, config, url, environment(tmp_path, config, url))
    try:
        server.start()
        tokens = server.tokens({"user": USER, "manager": MANAGER})
        user, manager = tokens["user"], tokens["manager"]
        logs = [server.log, slurm_cluster.dir / "slurmctld.log"]
        failure_logs.extend([slurm_cluster.dir / "slurmctld.log", slurm_cluster.dir / "slurmd.log"])

        get = server.getter(user)

        def submit(text, name):
            (tmp_path / name).write_text(text)
            answer = server.json("submit", str(tmp_path / name), "-l", "compiler_lic=1", token=user)
            return [int(i) for i in answer["job_ids"]]

        [long_id] = submit(LONG.format(marker=tmp_path / "long-job-ran"), "long.jdl")
        quick = submit(JOBS, "quick.jdl")
        assert len(quick) == QUICK_JOBS

        # -- the long job's pilot is cancelled in Slurm while the job runs
        def running_pilot():
            if get(f"/jobs/{long_id}")["Status"] != "Running":
                return None
            sources = [e["Source"] for e in get(f"/jobs/{long_id}/history") if e["Status"] == "Running"]
            return sources[-1].removeprefix("Pilot ") if sources else None

        cancelled = wait_until("the long job runs in a Slurm pilot", running_pilot, 240, logs, every=0.2)
        pilots = {p["PilotID"]: p for p in get("/pilots", manager)}
        assert pilots[cancelled]["Backend"] == "slurm", pilots[cancelled]
        slurm_job = SlurmRef.parse(pilots[cancelled]["BackendRef"]).job_id
        subprocess.run(["scancel", slurm_job], env=slurm_cluster.env, check=True)

        # -- every job Done, the long one after a second run elsewhere
        def all_done():
            rows = {r["JobID"]: r for r in get("/jobs")}
            bad = {i: (r["Status"], r["MinorStatus"]) for i, r in rows.items() if r["Status"] in ("Failed", "Killed")}
            assert not bad, f"jobs ended badly: {bad}"
            return rows if all(r["Status"] == "Done" for r in rows.values()) else None

        rows = wait_until("all 40 jobs Done", all_done, 400, logs)
        assert len(rows) == QUICK_JOBS + 1 and {r["Queue"] for r in rows.values()} == {QUEUE}
        history = get(f"/jobs/{long_id}/history")
        statuses = [e["Status"] for e in history]
        runs = [e["Source"] for e in history if e["Status"] == "Running"]
        assert "Stalled" in statuses and statuses.count("Done") == 1, history
        assert len(runs) == 2 and runs[0] == f"Pilot {cancelled}" != runs[1], history

        # -- each job saw the allocation of the pilot that ran it
        slurm_jobs = {p["PilotID"]: SlurmRef.parse(p["BackendRef"]).job_id for p in get("/pilots", manager)}
        for job_id in quick[:5]:
            printed = server.json("output", str(job_id), token=user)["stdout"]
            ran_in = slurm_jobs[_pilot_of(get, job_id)]
            assert printed == f"job {ran_in} on {slurm_cluster.host}\n", printed

        # -- every slot and license given back
        for row in get("/queues", manager):
            assert row["resv/used/tot"].split("/")[:2] == ["0", "0"], row
            for name, value in row["Consumables"].items():
                assert value.split("/")[0] in ("0", "0.0"), row

        # -- the pilots' ends as Slurm saw them, and their logs
        def pilots_ended():
            shown = get("/pilots", manager)
            return shown if all(p["State"] not in ("Submitted", "Running") for p in shown) else None

        shown = {p["PilotID"]: p for p in wait_until("every pilot ended", pilots_ended, 180, logs)}
        assert shown[cancelled]["State"] == "Aborted", shown[cancelled]
        assert {p["State"] for i, p in shown.items() if i != cancelled} == {"Done"}, shown
        assert sum(p["JobsRun"] for p in shown.values()) == QUICK_JOBS + 2
        log = server.ok("pilots", "--output", cancelled, token=manager)
        assert f"pilot {cancelled} starting" in log and "received SIGTERM" in log, log
        assert re.search(r"job \d+ Left", log), log
        unknown = server.wms("pilots", "--output", "no-such-pilot", token=manager)
        assert unknown.returncode != 0 and "no such pilot: no-such-pilot" in unknown.stderr, unknown
    finally:
        server.stop()


def _pilot_of(get, job_id: int) -> str:
    """The pilot that ran the job to its end (the last Running entry's source)."""
    sources = [e["Source"] for e in get(f"/jobs/{job_id}/history") if e["Status"] == "Running"]
    return sources[-1].removeprefix("Pilot ")
