"""`wms` as a user runs it: separate processes against a real server."""

from __future__ import annotations

import json

import os
import signal
import subprocess

from tests.helpers import EXAMPLES, REPO, interruptible, patience
from tests.servers import WMS, free_port, wait_for


def test_submit_prints_one_id_per_line_and_status_shows_them(server, tokens):
    out = server.ok("submit", str(EXAMPLES / "hello.jdl"), str(EXAMPLES / "parametric.jdl"), token=tokens["roland"])
    ids = out.split()
    assert len(ids) == 6 and all(i.isdigit() for i in ids)
    table = server.ok("status", *ids, token=tokens["roland"]).splitlines()
    assert table[0].split()[:3] == ["JobID", "Status", "MinorStatus"]
    assert set(table[1]) == {"-", " "}
    assert len(table) == 2 + 6
    rows = server.json("status", *ids, token=tokens["roland"])
    assert [r["JobID"] for r in rows] == [int(i) for i in ids]
    for key in ("JobID", "Status", "MinorStatus", "Owner", "OwnerGroup", "Site", "Queue", "SubmitPool", "TaskQueue"):
        assert key in rows[0]


def test_submit_json_and_options(server, tokens):
    result = server.json("submit", str(EXAMPLES / "grid-engine.jdl"), "-l", "h_vmem=2G,arch=lx-amd64",
                         "-soft", "-l", "mem_free=1G", "-pe", "mpi", "2", "-P", "p1", "-N", "named",
                         token=tokens["roland"])
    [job_id] = result["job_ids"]
    jdl = server.ok("jdl", str(job_id), token=tokens["roland"])
    assert 'h_vmem = "2G"' in jdl and 'compiler_lic = 1' in jdl
    assert 'mem_free = "1G"' in jdl and 'ParallelEnvironment = "mpi"' in jdl and 'JobName = "named"' in jdl


def test_submit_reads_standard_input(server, tokens):
    out = server.ok("submit", "-", token=tokens["roland"], stdin='Executable = "/bin/true"; CPUTime = 300;')
    assert out.strip().isdigit()


def test_bad_jdl_is_one_line_on_stderr_and_nothing_is_stored(server, tokens, tmp_path):
    bad = tmp_path / "bad.jdl"
    bad.write_text('[\n  Executable = "/bin/sh";\n  Arguments = {"a" "b"};\n]\n')
    before = server.json("jobs", token=tokens["andre"])
    result = server("submit", str(EXAMPLES / "hello.jdl"), str(bad), token=tokens["andre"])
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(f"wms submit: {bad}:3:")
    assert "Traceback" not in result.stderr
    assert server.json("jobs", token=tokens["andre"]) == before


def test_usage_errors_exit_2(server, tokens):
    assert server("status", "abc", token=tokens["roland"]).returncode == 2
    result = server("submit", "/nonexistent.jdl", token=tokens["roland"])
    assert result.returncode == 2 and "cannot read /nonexistent.jdl" in result.stderr
    assert server("submit", str(EXAMPLES / "hello.jdl"), "-l", "h_rt", token=tokens["roland"]).returncode == 2
    assert server("pools", "--site", "X", token=tokens["roland"]).returncode == 2
    assert server("frobnicate").returncode == 2


def test_missing_or_wrong_token(server, tmp_path):
    env_home = server.env["HOME"]
    result = server("jobs")
    assert result.returncode == 1
    assert "no token" in result.stderr and env_home in result.stderr
    result = server("jobs", token="wms_wrong")
    assert result.returncode == 1 and "invalid token (unknown to this server)" in result.stderr


def test_unreachable_server(server, tokens):
    env = dict(server.env, WMS_URL=f"http://127.0.0.1:{free_port()}", WMS_TOKEN=tokens["roland"])
    result = subprocess.run([*WMS, "jobs"], env=env, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 1 and "cannot reach the WMS server" in result.stderr


def test_kill_and_logging_info(server, tokens):
    [job_id] = server.ok("submit", str(EXAMPLES / "hello.jdl"), token=tokens["roland"]).split()
    result = server("kill", job_id, token=tokens["andre"])
    assert result.returncode == 1 and f"no such job: {job_id}" in result.stderr     # as if it did not exist
    assert server.ok("kill", job_id, token=tokens["roland"]).strip() == f"{job_id} killed"
    assert server.ok("kill", job_id, token=tokens["admin"]).strip() == f"{job_id} not killed: already Killed"
    history = server.json("logging-info", job_id, token=tokens["roland"])
    assert [h["Status"] for h in history] == ["Received", "Checking", "Waiting", "Killed"]
    assert history[-1]["Source"] == "User"
    assert "Killed" in server.ok("logging-info", job_id, token=tokens["roland"])


def test_killing_a_job_on_a_node_says_when_its_payload_stops(server, tokens):
    """The job the pilot was given (the module's server may hold other tests'
    waiting jobs: whichever it is) is on a node when it is killed."""
    server.ok("submit", str(EXAMPLES / "hello.jdl"), token=tokens["roland"])
    claimed = server("request-job", "--site", "DIRAC.Local.ch", "--ce", "localhost", "--queue", "default",
                     "--host", "wn1", "--platform", "x86_64-el9", "--pilot-id", "kill-pilot",
                     token=tokens["kill-pilot"])
    assert claimed.returncode == 0, claimed.stdout + claimed.stderr
    job_id = str(json.loads(claimed.stdout)["JobID"])
    assert server.ok("kill", job_id, token=tokens["admin"]).strip() == (
        f"{job_id} killed; its pilot stops the payload at its next heartbeat")


def test_jobs_lists_own_jobs_for_users_and_all_for_managers(server, tokens):
    server.ok("submit", str(EXAMPLES / "hello.jdl"), token=tokens["andre"])
    server.ok("submit", str(EXAMPLES / "hello.jdl"), token=tokens["roland"])
    mine = server.json("jobs", token=tokens["andre"])
    assert mine and {j["Owner"] for j in mine} == {"andre"}
    everyone = server.json("jobs", "--status", "Waiting", token=tokens["admin"])
    assert {"andre", "roland"} <= {j["Owner"] for j in everyone}
    assert {j["Status"] for j in everyone} == {"Waiting"}


def test_pools_match_queues_and_task_queues(server, tokens):
    [job_id] = server.ok("submit", str(EXAMPLES / "software.jdl"), token=tokens["roland"]).split()
    [status] = server.json("status", job_id, token=tokens["roland"])
    pools = server.json("pools", "--site", "DIRAC.Local.ch", "--ce", "localhost", "--queue", "default",
                        token=tokens["pilot"])
    assert status["SubmitPool"] in pools
    assert status["SubmitPool"] in server.json("pools", token=tokens["roland"])
    assert "SubmitPool" in server.ok("pools", token=tokens["roland"]).splitlines()[0]
    queues = server.json("match-queues", job_id, token=tokens["roland"])
    assert "DIRAC.Local.ch/localhost/default" in queues
    assert server.json("match-queues", str(EXAMPLES / "arm.jdl"), token=tokens["roland"]) == [
        "LCG.CERN.ch/ce02.cern.ch/arm"]
    verbose = server.ok("match-queues", str(EXAMPLES / "arm.jdl"), "-v", token=tokens["roland"])
    assert "platform mismatch" in verbose
    task_queues = server.json("task-queues", token=tokens["roland"])
    assert any(tq["TaskQueue"] == status["TaskQueue"] for tq in task_queues)
    assert "WaitingJobs" in server.ok("task-queues", token=tokens["roland"])


def test_unrunnable_job_says_why(server, tokens):
    [job_id] = server.ok("submit", str(EXAMPLES / "unrunnable.jdl"), token=tokens["roland"]).split()
    [status] = server.json("status", job_id, token=tokens["roland"])
    assert status["Status"] == "Waiting"
    assert status["MinorStatus"].startswith("No eligible queue: Requirements not met")
    result = server("match-queues", job_id, token=tokens["roland"])
    assert result.returncode == 3
    assert result.stdout == "" and "no queue can run this job" in result.stderr


def test_admin_token_create_refuses_bad_roles(server):
    result = server("admin", "token", "create", "--user", "u", "--group", "g", "--vo", "v", "--role", "king")
    assert result.returncode == 2


def test_up_writes_a_manager_token_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path), "WMS_URL": f"http://127.0.0.1:{port}",
           "WMS_DATABASE_URL": f"sqlite:///{tmp_path / 'up.db'}"}
    env.pop("WMS_TOKEN", None)
    process = subprocess.Popen([*WMS, "up", "--bind", f"127.0.0.1:{port}"], env=env, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        wait_for(env["WMS_URL"], process)
        token_file = tmp_path / ".config" / "wms" / "token"
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        assert oct(token_file.parent.stat().st_mode & 0o777) == "0o700"
        listing = subprocess.run([*WMS, "jobs", "--json"], env=env, capture_output=True, text=True, cwd=REPO)
        assert listing.returncode == 0 and listing.stdout.strip() == "[]"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=patience(60)) == 0


def test_a_configuration_error_stops_the_server_before_it_starts(tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    (config / "wms.yaml").write_text("bind: 127.0.0.1:8080\nmatch_lease: soon\n")
    env = {**os.environ, "WMS_CONFIG": str(config), "HOME": str(tmp_path)}
    result = subprocess.run([*WMS, "server"], env=env, capture_output=True, text=True, cwd=REPO, timeout=30)
    assert result.returncode == 1
    assert f"{config / 'wms.yaml'}:2" in result.stderr or "wms.yaml:2" in result.stderr
    assert "match_lease" in result.stderr
