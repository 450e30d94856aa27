"""qsub and qstat as Grid Engine users type them, against a real `wms server`:
a script sent with its job, a command of the worker node (-b y), an array
(-t) as a parametric job, a job submitted held (-h); qstat's list with the
state letters, -u, -f, -xml, and -j with the why table; refusals with their
exit statuses (1: the server refused or a job does not exist, 2: usage)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.helpers import patience

BIN = Path(sys.executable).parent


def grid_engine(server, name: str, *args: str, token: str, stdin: str | None = None,
                cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], env={**server.env, "WMS_TOKEN": token}, capture_output=True,
                          text=True, timeout=patience(60), input=stdin, cwd=cwd)


def submitted(result: subprocess.CompletedProcess, name: str) -> list[int]:
    """The ids of qsub's ``Your job ID ("NAME") has been submitted`` lines."""
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    ids = [int(line.split()[2]) for line in lines]
    assert lines == [f'Your job {i} ("{name}") has been submitted' for i in ids]
    return ids


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "analyse.sh"
    path.write_text("#!/bin/sh\necho analysing \"$@\"\n")
    return path


def test_qsub_sends_a_script_with_its_arguments_and_qstat_lists_it_waiting(server, tokens, script, tmp_path):
    result = grid_engine(server, "qsub", "-l", "h_rt=3600", str(script), "run 7", "--fast",
                         token=tokens["roland"])
    [job] = submitted(result, "analyse.sh")
    jdl = server.ok("jdl", str(job), token=tokens["roland"])
    assert 'Executable = "analyse.sh"' in jdl and 'InputSandbox = {"analyse.sh"}' in jdl
    assert "Arguments = \"'run 7' --fast\"" in jdl

    listing = grid_engine(server, "qstat", token=tokens["roland"])
    assert listing.returncode == 0, listing.stderr
    header, rule, *rows = listing.stdout.splitlines()
    assert header.split()[:5] == ["job-ID", "prior", "name", "user", "state"]
    assert set(rule) == {"-"}
    [row] = [r.split() for r in rows if r.split()[0] == str(job)]
    assert row[1:5] == ["0", "analyse.sh", "roland", "qw"]


def test_qsub_names_the_job_and_reads_the_script_from_standard_input(server, tokens):
    [job] = submitted(grid_engine(server, "qsub", "-N", "nightly", token=tokens["roland"], stdin="echo hi\n"),
                      "nightly")
    assert server.json("status", str(job), token=tokens["roland"])[0]["JobName"] == "nightly"
    [unnamed] = submitted(grid_engine(server, "qsub", token=tokens["roland"], stdin="echo hi\n"), "STDIN")
    assert 'InputSandbox = {"STDIN"}' in server.ok("jdl", str(unnamed), token=tokens["roland"])


def test_qsub_t_makes_an_array_of_parametric_jobs_with_sge_task_id(server, tokens):
    result = grid_engine(server, "qsub", "-b", "y", "-t", "1-5:2", "/bin/echo", "x", token=tokens["roland"])
    ids = submitted(result, "echo")
    assert len(ids) == 3
    tasks = [server.ok("jdl", str(i), token=tokens["roland"]) for i in ids]
    assert [f'"SGE_TASK_ID={n}"' in text for n, text in zip((1, 3, 5), tasks)] == [True, True, True]
    assert all('Executable = "/bin/echo"' in text and "InputSandbox" not in text for text in tasks)


def test_qsub_terse_prints_the_id_alone(server, tokens):
    result = grid_engine(server, "qsub", "-terse", "-b", "y", "/bin/true", token=tokens["roland"])
    assert result.returncode == 0 and result.stdout.strip().isdigit(), result.stderr


def test_qsub_h_submits_held_and_qrls_releases(server, tokens):
    [job] = submitted(grid_engine(server, "qsub", "-h", "-b", "y", "/bin/true", token=tokens["roland"]), "true")
    [status] = server.json("status", str(job), token=tokens["roland"])
    assert (status["Status"], status["MinorStatus"]) == ("Held", "Held by the user roland")
    [row] = [r.split() for r in grid_engine(server, "qstat", token=tokens["roland"]).stdout.splitlines()
             if r.split()[0] == str(job)]
    assert row[4] == "hqw"
    history = server.json("logging-info", str(job), token=tokens["roland"])
    assert [(h["Status"], h["Source"]) for h in history[-2:]] == [("Waiting", "TaskQueue"), ("Held", "User roland")]
    released = grid_engine(server, "qrls", str(job), token=tokens["roland"])
    assert released.returncode == 0, released.stderr
    assert server.json("status", str(job), token=tokens["roland"])[0]["Status"] == "Waiting"


@pytest.mark.parametrize(("args", "message"), [
    (["/no/such/script.sh"], "qsub: /no/such/script.sh: no such script file"),
    (["-t", "5-1", "-b", "y", "/bin/true"], "qsub: -t 5-1: the tasks run from n >= 1 up to m >= n"),
    (["-t", "x", "-b", "y", "/bin/true"], "qsub: -t 'x': expected n[-m[:s]]"),
    (["-b", "y"], "qsub: -b y: give the command to run"),
    (["-pe", "mpi", "zero", "-b", "y", "/bin/true"], "qsub: -pe mpi zero: the slot count must be a positive"),
])
def test_qsub_usage_errors_exit_2(server, tokens, args, message):
    result = grid_engine(server, "qsub", *args, token=tokens["roland"])
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(message), result.stderr


def test_qsub_refused_by_the_server_exits_1_and_stores_nothing(server, tokens):
    before = server.json("jobs", token=tokens["roland"])
    result = grid_engine(server, "qsub", "-ar", "999999", "-b", "y", "/bin/true", token=tokens["roland"])
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("qsub: ") and "999999" in result.stderr
    assert server.json("jobs", token=tokens["roland"]) == before


def test_qstat_j_shows_the_job_and_why_it_waits(server, tokens):
    [job] = submitted(grid_engine(server, "qsub", "-N", "why-me", "-b", "y", "/bin/true", token=tokens["roland"]),
                      "why-me")
    result = grid_engine(server, "qstat", "-j", str(job), token=tokens["roland"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "=" * 62
    assert f"job_number:                 {job}" in lines
    assert "job_name:                   why-me" in lines
    assert "owner:                      roland" in lines
    [info] = [line for line in lines if line.startswith("scheduling info:")]
    why = server.ok("why", str(job), token=tokens["roland"]).rstrip().splitlines()[-1]
    assert lines[-1].strip() == why and info

    document = ElementTree.fromstring(grid_engine(server, "qstat", "-j", str(job), "-xml",
                                                  token=tokens["roland"]).stdout)
    [element] = document.findall("djob_info/element")
    assert element.findtext("JB_job_number") == str(job)
    assert element.findall("JB_scheduling_info/message")[-1].text == why


def test_qstat_j_of_a_job_that_does_not_exist_exits_1(server, tokens):
    result = grid_engine(server, "qstat", "-j", "987654", token=tokens["roland"])
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "Following jobs do not exist: 987654\n")
    bad = grid_engine(server, "qstat", "-j", "abc", token=tokens["roland"])
    assert (bad.returncode, bad.stderr) == (2, "qstat: -j: not a job id: 'abc'\n")


def test_qstat_u_xml_and_f_for_an_operator(server, tokens):
    [mine] = submitted(grid_engine(server, "qsub", "-b", "y", "/bin/true", token=tokens["andre"]), "true")
    submitted(grid_engine(server, "qsub", "-b", "y", "/bin/true", token=tokens["roland"]), "true")
    oper = server.token("oper", "lhcb_prod", "lhcb", "operator")
    own = grid_engine(server, "qstat", token=oper)
    assert (own.returncode, own.stdout) == (0, "")       # the operator has no jobs of its own
    document = ElementTree.fromstring(grid_engine(server, "qstat", "-u", "andre", "-xml", token=oper).stdout)
    pending = document.findall("job_info/job_list")
    assert str(mine) in [j.findtext("JB_job_number") for j in pending]
    assert {j.findtext("JB_owner") for j in pending} == {"andre"}
    assert {j.get("state") for j in pending} == {"pending"}
    everyone = grid_engine(server, "qstat", "-u", "*", "-f", token=oper)
    assert "PENDING JOBS" in everyone.stdout and {"andre", "roland"} <= set(everyone.stdout.split())


def test_qstat_leaves_ended_jobs_out(server, tokens):
    [job] = submitted(grid_engine(server, "qsub", "-b", "y", "/bin/true", token=tokens["roland"]), "true")
    server.ok("kill", str(job), token=tokens["roland"])
    listing = grid_engine(server, "qstat", "-xml", token=tokens["roland"]).stdout
    assert str(job) not in [j.findtext("JB_job_number") for j in ElementTree.fromstring(listing).iter("job_list")]


def test_the_readme_s_qsub_lines_submit_the_example_script(server, tokens):
    from tests.helpers import REPO

    script = str(REPO / "examples" / "hello.sh")
    submitted(grid_engine(server, "qsub", "-N", "hello", "-l", "h_rt=0:10:0", script, token=tokens["roland"]),
              "hello")
    assert len(submitted(grid_engine(server, "qsub", "-t", "1-3", script, token=tokens["roland"]), "hello.sh")) == 3


def test_qmod_rj_reschedules_a_running_job_and_refuses_a_waiting_one_with_exit_1(server, tokens):
    submitted(grid_engine(server, "qsub", "-b", "y", "/bin/true", token=tokens["roland"]), "true")
    pilot_id = "qmod-pilot"
    claimed = server("request-job", "--site", "DIRAC.Local.ch", "--ce", "localhost", "--queue", "default",
                     "--host", "wn1", "--platform", "x86_64-el9", "--pilot-id", pilot_id, token=tokens[pilot_id])
    assert claimed.returncode == 0, claimed.stderr
    matched = json.loads(claimed.stdout)["JobID"]       # one of the module's waiting jobs
    result = grid_engine(server, "qmod", "-rj", str(matched), token=tokens["roland"])
    assert (result.returncode, result.stdout) == (0, f"job {matched} has been rescheduled\n"), result.stderr
    assert server.json("status", str(matched), token=tokens["roland"])[0]["Status"] == "Waiting"

    refused = grid_engine(server, "qmod", "-rj", str(matched), token=tokens["roland"])
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (f"job {matched}: it is Waiting: only a Done, Failed, Killed or Stalled job is "
                              "rescheduled\n")
    usage = grid_engine(server, "qmod", token=tokens["roland"])
    assert usage.returncode == 2 and "-rj" in usage.stderr
