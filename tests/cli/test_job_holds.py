"""`wms hold`, `wms release`, qhold and qrls as a user and an operator type
them, against a real `wms server`: the lines they print, `wms status` and
`wms why` of a held job, refusals on stderr with exit 1, bad usage exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import EXAMPLES

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def oper(server) -> str:
    return server.token("oper", "lhcb_prod", "lhcb", "operator")


def grid_engine(server, name: str, *args: str, token: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], env={**server.env, "WMS_TOKEN": token}, capture_output=True,
                          text=True, timeout=60)


def submit(server, token: str) -> str:
    [job_id] = server.ok("submit", str(EXAMPLES / "hello.jdl"), token=token).split()
    return job_id


def test_hold_status_why_and_release(server, tokens, oper):
    job = submit(server, tokens["roland"])
    assert server.ok("hold", job, "--reason", "input not staged", token=tokens["roland"]) == f"{job} held\n"
    assert server.ok("hold", job, "--type", "o", "--reason", "site downtime", token=oper) == f"{job} held\n"
    [status] = server.json("status", job, token=tokens["roland"])
    assert (status["Status"], status["MinorStatus"]) == (
        "Held", "Held by the user roland: input not staged; by operator oper: site downtime")
    why = server.ok("why", job, token=tokens["roland"])
    assert "roland" in why and "site downtime" in why
    assert why.rstrip().endswith("(an operator or a manager may release it: wms release ID, qrls -h uo ID)")

    assert server.ok("release", job, token=tokens["roland"]) == (
        f"{job} still held: Held by operator oper: site downtime\n")
    refused = server("release", job, token=tokens["roland"])
    assert refused.returncode == 1
    assert refused.stderr == (f"wms release: job {job}: Held by operator oper: site downtime; a user may not set or "
                              "release operator holds (-h o): only operators and managers may\n")
    assert server.ok("release", job, "--reason", "site back", token=oper) == f"{job} released\n"
    history = server.json("logging-info", job, token=tokens["roland"])
    assert [(h["Status"], h["Source"]) for h in history[-4:]] == [
        ("Held", "User roland"), ("Held", "Operator oper"), ("Held", "User roland"), ("Waiting", "Operator oper")]


def test_a_job_that_is_not_waiting_is_named_on_stderr_with_exit_1(server, tokens):
    job = submit(server, tokens["roland"])
    server.ok("kill", job, token=tokens["roland"])
    result = server("hold", job, token=tokens["roland"])
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"job {job}: it is Killed: only a job that has not started (Waiting, Matched) can be held\n"


@pytest.mark.parametrize(("args", "message"), [
    ((), "wms hold: give job ids, or a filter: --status S, --owner U (operators)"),
    (("1", "--status", "Waiting"), "wms hold: give job ids or a filter (--status, --owner), not both"),
    (("--status", "Waiting", "--type", "x"), "wms hold: hold types 'x': give letters of u, o, s, each once"),
    (("one",), "wms hold: not a job id: 'one'"),
])
def test_bad_usage_exits_2(server, tokens, args, message):
    result = server("hold", *args, token=tokens["roland"])
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr


def test_qhold_and_qrls_as_grid_engine_users_type_them(server, tokens, oper):
    first, second = submit(server, tokens["roland"]), submit(server, tokens["roland"])
    held = grid_engine(server, "qhold", f"{first},{second}", token=tokens["roland"])
    assert (held.returncode, held.stdout) == (0, f"modified hold of job {first}\nmodified hold of job {second}\n")
    assert server.json("status", first, token=tokens["roland"])[0]["Status"] == "Held"

    refused = grid_engine(server, "qhold", "-h", "o", first, token=tokens["roland"])
    assert refused.returncode == 1
    assert refused.stderr == ("qhold: a user may not set or release operator holds (-h o): only operators and "
                              "managers may\n")
    by_user = grid_engine(server, "qrls", "-u", "roland", token=oper)
    assert by_user.returncode == 0
    assert f"modified hold of job {first}" in by_user.stdout and f"modified hold of job {second}" in by_user.stdout
    assert server.json("status", second, token=tokens["roland"])[0]["Status"] == "Waiting"

    usage = grid_engine(server, "qrls", token=tokens["roland"])
    assert usage.returncode == 2 and usage.stderr == "qrls: give a job_id_list or -u user_list\n"
    assert grid_engine(server, "qhold", "-help", token=tokens["roland"]).stdout.startswith("usage: qhold")


def test_reschedule_a_killed_job(server, tokens):
    job = submit(server, tokens["roland"])
    result = server("reschedule", job, token=tokens["roland"])
    assert (result.returncode, result.stderr) == (
        1, f"job {job}: it is Waiting: only a Done, Failed, Killed or Stalled job is rescheduled\n")
    server.ok("kill", job, token=tokens["roland"])
    assert server.ok("reschedule", job, "--reason", "input fixed", token=tokens["roland"]) == f"{job} rescheduled\n"
    [status] = server.json("status", job, token=tokens["roland"])
    assert (status["Status"], status["MinorStatus"]) == ("Waiting", "Rescheduled by roland: input fixed")
    refused = server("reschedule", job, "--reset", token=tokens["roland"])
    assert refused.returncode == 1 and "a user may not reset the reschedule count (--reset)" in refused.stderr


def test_delete_a_job(server, tokens):
    job = submit(server, tokens["roland"])
    assert server.ok("delete", job, "--reason", "typo", token=tokens["roland"]) == f"{job} deleted\n"
    assert job not in [str(j["JobID"]) for j in server.json("jobs", token=tokens["roland"])]
    [status] = server.json("status", job, token=tokens["roland"])
    assert (status["Status"], status["MinorStatus"]) == ("Deleted", "Deleted by roland: typo")
    again = server("delete", job, token=tokens["roland"])
    assert (again.returncode, again.stderr) == (1, f"job {job}: it was deleted already\n")


def test_alter_a_waiting_job(server, tokens):
    job = submit(server, tokens["roland"])
    assert server.ok("alter", job, "-p", "6", "-l", "h_rt=0:10:00", "-N", "short", token=tokens["roland"]) == (
        f"{job} altered\n")
    [status] = server.json("status", job, token=tokens["roland"])
    assert (status["Priority"], status["JobName"]) == (6, "short")
    usage = server("alter", job, token=tokens["roland"])
    assert (usage.returncode, usage.stderr) == (2, "wms alter: nothing to alter: give -p, -l, -q or -N\n")


def test_qalter_and_qdel_as_grid_engine_users_type_them(server, tokens):
    job = submit(server, tokens["roland"])
    altered = grid_engine(server, "qalter", "-p", "3", "-N", "renamed", job, token=tokens["roland"])
    assert (altered.returncode, altered.stdout) == (0, f"modified priority of job {job}\nmodified job name of job {job}\n")
    assert server.json("status", job, token=tokens["roland"])[0]["JobName"] == "renamed"
    usage = grid_engine(server, "qalter", job, token=tokens["roland"])
    assert (usage.returncode, usage.stderr) == (2, "qalter: nothing to change: give -p, -l, -q or -N\n")

    deleted = grid_engine(server, "qdel", job, token=tokens["roland"])
    assert (deleted.returncode, deleted.stdout) == (0, f"roland has deleted job {job}\n")
    again = grid_engine(server, "qdel", job, token=tokens["roland"])
    assert (again.returncode, again.stderr) == (1, f"job {job}: it was deleted already\n")
    unknown = grid_engine(server, "qdel", "999999", token=tokens["roland"])
    assert (unknown.returncode, unknown.stderr) == (1, "qdel: no such job: 999999\n")
