"""Submission through the whole chain into the database, on SQLite,
PostgreSQL and MariaDB: pools, pool-to-queue rows, task queues, jobs,
JDLs and history stored in one transaction; bad input stores nothing."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from tests.helpers import ADMIN, ALICE, ANDRE, ROLAND
from wms.core.errors import InvalidInput, JDLError, NotFound
from wms.core.jdl import parse_one
from wms.db import schema
from wms.services import jobs as jobs_service
from wms.services import pools as pools_service
from wms.services import submission as submission_service
from wms.services import task_queues as tq_service
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

RFC7 = '''[
  Executable = "my_executable";
  Requirements = [
    SoftwareTag = { "AppVersion1","AppVersion2" };
    CPUModel = "Intel Xeon";
    Memory = 4000;
  ];
]'''


def submit(runtime, now, *texts, identity=ROLAND, options=SubmitOptions()):
    return submit_jobs(runtime, identity, [(f"job{i}.jdl", t) for i, t in enumerate(texts)], options, now)


def count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def test_a_job_with_requirements_is_filed_into_its_pool_and_task_queue(runtime, now):
    [job_id] = submit(runtime, now, RFC7)
    [status] = jobs_service.job_status(runtime, ROLAND, [job_id])
    assert status["Status"] == "Waiting"
    assert status["MinorStatus"] == "Pilot Agent Submission"
    assert status["Owner"] == "roland" and status["OwnerGroup"] == "lhcb_user"
    pool = pools_service.get_pool(runtime, ROLAND, status["SubmitPool"])
    assert pool["Requirements"] == {"cpumodel": "Intel Xeon", "memory": 4000,
                                    "softwaretag": ["AppVersion1", "AppVersion2"]}
    assert "DIRAC.Local.ch/localhost/default" in pool["Queues"]
    # getSubmitPoolsForQueue answers from the stored map.
    assert pools_service.submit_pools_for_queue(runtime, "DIRAC.Local.ch", "localhost", "default") == [status["SubmitPool"]]
    assert pools_service.submit_pools_for_queue(runtime, "LCG.CERN.ch", "ce01.cern.ch", "long") == []
    # The stored JDL carries the pool, the owner and the eligible sites.
    processed = parse_one(jobs_service.job_jdl(runtime, ROLAND, job_id)["JDL"])
    assert processed.get("SubmitPool") == status["SubmitPool"]
    assert processed.get("Owner") == "roland"
    assert processed.sites == ["DIRAC.Local.ch", "LCG.RAL.uk"]
    [tq] = tq_service.list_task_queues(runtime, ROLAND)
    assert tq["TaskQueue"] == status["TaskQueue"] and tq["WaitingJobs"] == 1


def test_history_records_received_checking_waiting(runtime, now):
    [job_id] = submit(runtime, now, '[ Executable = "x"; ]')
    entries = jobs_service.history(runtime, ROLAND, job_id)
    assert [e["Status"] for e in entries] == ["Received", "Checking", "Waiting"]
    assert [e["Source"] for e in entries] == ["JobManager", "Optimizers", "TaskQueue"]
    assert entries[1]["MinorStatus"] == "JobSanity, JobRequirements, JobScheduling, TaskQueue"


def test_the_jobs_wait_from_when_the_chain_filed_them(runtime, now):
    """The Waiting entry is dated by the clock read as the jobs are stored, after the
    optimizer chain: a bulk submission's jobs wait from then, not from its arrival."""
    filed = now + timedelta(seconds=2)
    submitted = submission_service.submit(runtime, ROLAND, [("a.jdl", '[ Executable = "x"; Parameters = 2; ]')],
                                          SubmitOptions(), now, clock=lambda: filed)
    for job_id in submitted.job_ids:
        times = {e["Status"]: e["Time"] for e in jobs_service.history(runtime, ROLAND, job_id)}
        assert times == {"Received": now.isoformat(), "Checking": now.isoformat(), "Waiting": filed.isoformat()}
    [held] = submission_service.submit(runtime, ROLAND, [("b.jdl", '[ Executable = "x"; ]')], SubmitOptions(), now,
                                       held=True, clock=lambda: filed).job_ids
    assert [(e["Status"], e["Time"]) for e in jobs_service.history(runtime, ROLAND, held)][-2:] == [
        ("Waiting", filed.isoformat()), ("Held", filed.isoformat())]


def test_bulk_submission_shares_pools_and_task_queues(runtime, now):
    texts = ['[ Executable = "a"; Requirements = [ SoftwareTag = "AppVersion1"; ]; ]'] * 50
    texts += ['[ Executable = "b"; Requirements = [ softwaretag = {"AppVersion1"}; ]; CPUTime = 86000; ]'] * 50
    ids = submit(runtime, now, *texts)
    assert len(ids) == 100 and ids == sorted(ids)
    assert count(runtime.engine, schema.submit_pools) == 1
    assert count(runtime.engine, schema.task_queues) == 1
    assert count(runtime.engine, schema.status_history) == 300


def test_a_parametric_jdl_becomes_many_jobs(runtime, now):
    ids = submit(runtime, now, '[ Executable = "x"; JobName = "p_%n"; Parameters = 10; ]')
    assert len(ids) == 10
    names = [s["JobName"] for s in jobs_service.job_status(runtime, ROLAND, ids)]
    assert names == [f"p_{i}" for i in range(10)]


def test_one_bad_job_refuses_the_whole_request(runtime, now):
    with pytest.raises(JDLError, match=r"job1.jdl:1:16"):
        submit(runtime, now, '[ Executable = "x"; ]', '[ Executable = "x; ]')
    with pytest.raises(JDLError, match="job1.jdl: CPUTime"):
        submit(runtime, now, '[ Executable = "x"; Requirements = [ Memory = 1; ]; ]', '[ Executable = "x"; CPUTime = 5; ]')
    for table in (schema.jobs, schema.job_jdls, schema.status_history, schema.submit_pools, schema.pool_queues,
                  schema.task_queues):
        assert count(runtime.engine, table) == 0


def test_too_many_jobs_in_one_submission_are_refused(runtime, now):
    with pytest.raises(InvalidInput, match="too many jobs"):
        submit(runtime, now, '[ Executable = "x"; Parameters = 10001; ]')
    assert count(runtime.engine, schema.jobs) == 0


def test_command_line_options_override_the_jdl(runtime, now):
    options = SubmitOptions(resource_requests={"h_rt": "1:00:00"}, soft_resource_requests={"arch": "lx-amd64"},
                            parallel_environment=("mpi", 4), project="p1", job_name="named")
    [job_id] = submit(runtime, now, '[ Executable = "x"; ResourceRequests = [ mem_free = "2G"; ]; ]', options=options)
    processed = parse_one(jobs_service.job_jdl(runtime, ROLAND, job_id)["JDL"])
    assert processed.resource_requests == {"mem_free": "2G", "h_rt": "1:00:00"}
    assert processed.soft_resource_requests == {"arch": "lx-amd64"}
    assert (processed.parallel_environment, processed.number_of_processors) == ("mpi", 4)
    assert processed.project == "p1" and processed.job_name == "named"


def test_a_job_no_queue_can_run_waits_and_is_reexamined_on_refresh(runtime, now):
    [job_id] = submit(runtime, now, '[ Executable = "x"; Requirements = [ SoftwareTag = "AppVersion7"; ]; ]')
    [status] = jobs_service.job_status(runtime, ROLAND, [job_id])
    assert status["Status"] == "Waiting"
    assert status["MinorStatus"].startswith("No eligible queue: Requirements not met (")
    # A site installs AppVersion7: after the refresh the job can run there.
    resources = json.loads(json.dumps(runtime.config.resources))
    resources["LCG.RAL.uk"]["CEs"]["arc01.gridpp.rl.ac.uk"]["Queues"]["grid"]["SoftwareTag"] = ["AppVersion7"]
    runtime.config = _with_resources(runtime.config, resources)
    runtime._resources.clear()
    report = pools_service.refresh_submit_pools(runtime, now)
    assert report["jobs_changed"] == 1
    [status] = jobs_service.job_status(runtime, ROLAND, [job_id])
    assert status["MinorStatus"] == "Pilot Agent Submission"
    assert pools_service.submit_pools_for_queue(runtime, "LCG.RAL.uk", "arc01.gridpp.rl.ac.uk", "grid") == [
        status["SubmitPool"]
    ]
    # ...and when the site removes it again, the job says so once more.
    resources["LCG.RAL.uk"]["CEs"]["arc01.gridpp.rl.ac.uk"]["Queues"]["grid"]["SoftwareTag"] = ["AppVersion1"]
    runtime.config = _with_resources(runtime.config, resources)
    runtime._resources.clear()
    pools_service.refresh_submit_pools(runtime, now)
    [status] = jobs_service.job_status(runtime, ROLAND, [job_id])
    assert status["MinorStatus"].startswith("No eligible queue")


def _with_resources(config, resources):
    import dataclasses

    return dataclasses.replace(config, resources=resources)


def test_users_see_and_kill_only_their_own_jobs(runtime, now):
    [mine] = submit(runtime, now, '[ Executable = "x"; ]', identity=ROLAND)
    [theirs] = submit(runtime, now, '[ Executable = "x"; ]', identity=ANDRE)
    assert [j["JobID"] for j in jobs_service.list_jobs(runtime, ROLAND)] == [mine]
    assert {j["JobID"] for j in jobs_service.list_jobs(runtime, ADMIN)} == {mine, theirs}
    with pytest.raises(NotFound, match=f"^no such job: {theirs}$"):
        jobs_service.job_status(runtime, ROLAND, [theirs])
    with pytest.raises(NotFound, match=f"^no such job: {theirs}$"):
        jobs_service.kill_jobs(runtime, ROLAND, [mine, theirs], now)
    # Refused whole: my own job was not killed either.
    assert jobs_service.job_status(runtime, ROLAND, [mine])[0]["Status"] == "Waiting"
    with pytest.raises(NotFound, match="no such job: 999999"):
        jobs_service.kill_jobs(runtime, ROLAND, [mine, 999999], now)
    result = jobs_service.kill_jobs(runtime, ROLAND, [mine], now)
    assert result == {"killed": [mine], "not_killed": {}, "stopping": []}
    assert jobs_service.kill_jobs(runtime, ADMIN, [mine, theirs], now) == {
        "killed": [theirs], "not_killed": {str(mine): "already Killed"}, "stopping": []}
    assert [e["Status"] for e in jobs_service.history(runtime, ROLAND, mine)][-1] == "Killed"


def test_match_queues_of_a_file_and_of_a_job(runtime, now):
    text = '[ Executable = "x"; Platform = "aarch64-el9"; ]'
    result = pools_service.match_queues_for_text(runtime, ROLAND, "arm.jdl", text, now)
    assert result["eligible"] == ["LCG.CERN.ch/ce02.cern.ch/arm"]
    assert result["rejected"]["LCG.CERN.ch/ce01.cern.ch/long"] == "platform mismatch"
    [job_id] = submit(runtime, now, text)
    assert pools_service.match_queues_for_job(runtime, ROLAND, job_id, now)["eligible"] == result["eligible"]
    assert count(runtime.engine, schema.jobs) == 1


def test_concurrent_submitters_of_the_same_requirements_share_pool_and_task_queue(runtime, now):
    text = '[ Executable = "x"; Requirements = [ SoftwareTag = "AppVersion2"; ]; ]'
    errors, ids = [], []

    def worker(identity):
        try:
            ids.extend(submit(runtime, now, *[text] * 20, identity=identity))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(ALICE if i % 2 else ROLAND,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(ids)) == 120
    assert count(runtime.engine, schema.submit_pools) == 1
    assert count(runtime.engine, schema.task_queues) == 2    # one per owner
