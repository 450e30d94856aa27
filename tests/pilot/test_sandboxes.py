"""The pilot's side of sandboxes (pilot/sandboxes.py and the runner): input
files into the job's directory with their checksums checked, output files
out, never through a symbolic link; the server's side is a recording one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from pilot.client import ApiError
from pilot.runner import JobSpec, run_job
from pilot.sandboxes import SandboxCalls, SandboxError, fetch_inputs, select_outputs
from tests.pilot.recorder import Recorder

SH = "/bin/sh"


class FakeServer:
    """A job's sandboxes as the server would hand them out, and what the pilot sent back."""

    def __init__(self, files: dict[str, bytes], patterns: list[str], *, damage: str | None = None,
                 refuse: dict[str, str] | None = None, names: dict[str, str] | None = None) -> None:
        self.files, self.patterns, self.damage, self.refuse = files, patterns, damage, refuse or {}
        self.names = names or {}
        self.received: dict[str, bytes] = {}

    def manifest(self, job_id: int) -> dict[str, Any]:
        return {"JobID": job_id, "OutputSandbox": self.patterns, "InputSandbox": [
            {"name": self.names.get(n, n), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for n, data in self.files.items()]}

    def download(self, job_id: int, name: str, target: BinaryIO) -> None:
        data = self.files[name]
        target.write(data[:-1] + b"!" if name == self.damage else data)

    def upload(self, job_id: int, name: str, source: BinaryIO, digest: str) -> None:
        if name in self.refuse:
            raise ApiError(413, self.refuse[name], "PUT", f"/jobs/{job_id}/sandbox/output/{name}")
        source.seek(0)
        data = source.read()
        assert hashlib.sha256(data).hexdigest() == digest
        self.received[name] = data

    def calls(self) -> SandboxCalls:
        return SandboxCalls(manifest=self.manifest, download=self.download, upload=self.upload)


def run(tmp_path: Path, script: str, server: FakeServer):
    from shlex import quote

    rec = Recorder()
    reporter = rec.reporter()
    reporter.sandbox = server.calls()
    spec = JobSpec(job_id=7, executable=SH, arguments=f"-c {quote(script)}")
    return run_job(spec, tmp_path / "work", reporter, grace=1.0, poll_interval=0.1), rec


def test_the_job_runs_on_its_input_files_and_its_output_files_go_back(tmp_path):
    server = FakeServer({"in.txt": b"hello\n", "run.sh": b"tr a-z A-Z < in.txt > out.txt; echo x > a.log\n"},
                        ["out.txt", "*.log", "never.txt"])
    result, rec = run(tmp_path, "sh run.sh", server)
    assert (result.status, result.minor_status) == ("Done", "Execution Complete")
    assert server.received == {"out.txt": b"HELLO\n", "a.log": b"x\n"}
    assert [s[0] for s in rec.statuses] == ["Running", "Done"]


def test_a_damaged_input_file_keeps_the_job_from_starting(tmp_path):
    server = FakeServer({"in.txt": b"hello\n"}, [], damage="in.txt")
    result, rec = run(tmp_path, "touch started", server)
    assert result.status == "Failed"
    assert result.minor_status.startswith("Input sandbox not downloaded: input file 'in.txt': got 6 bytes with "
                                          "SHA-256 ")
    assert rec.statuses[-1][0] == "Failed"
    assert not (result.workdir / "started").exists() and not (result.workdir / "in.txt").exists()


@pytest.mark.parametrize("name", ["../escape.txt", "..", "/etc/passwd", "a\nb"])
def test_a_name_from_the_server_never_leaves_the_job_directory(tmp_path, name):
    server = FakeServer({"in.txt": b"data"}, [], names={"in.txt": name})
    result, _ = run(tmp_path, "touch started", server)
    assert result.status == "Failed" and "not a plain file name" in result.minor_status
    assert sorted(os.listdir(tmp_path)) == ["work"]
    assert not (tmp_path / "escape.txt").exists()


def test_a_refused_output_file_fails_the_job_and_the_others_still_go(tmp_path):
    server = FakeServer({}, ["big.dat", "small.txt"], refuse={"big.dat": "sandbox file too large"})
    result, _ = run(tmp_path, "echo 1 > big.dat; echo 2 > small.txt", server)
    assert (result.status, result.minor_status) == ("Failed", "Output sandbox not stored: big.dat: sandbox file "
                                                              "too large")
    assert server.received == {"small.txt": b"2\n"}


def test_only_regular_files_of_the_job_directory_are_sent(tmp_path):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (tmp_path / "secret").write_text("the pilot's")
    (job_dir / "link.txt").symlink_to(tmp_path / "secret")
    (job_dir / "sub").mkdir()
    (job_dir / "ok.txt").write_text("mine")
    chosen, missing = select_outputs(job_dir, ["*.txt", "sub", "link.txt", "absent.txt", "*.none"])
    assert chosen == ["ok.txt"]
    assert missing == ["sub", "link.txt", "absent.txt"]


def test_fetch_inputs_refuses_to_write_through_what_is_already_there(tmp_path):
    (tmp_path / "in.txt").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SandboxError, match="cannot write input file 'in.txt'"):
        fetch_inputs(FakeServer({"in.txt": b"x"}, []).calls(), 7, tmp_path)
    assert not (tmp_path / "elsewhere").exists()


def test_a_job_whose_jdl_names_no_sandbox_costs_no_sandbox_call(tmp_path):
    asked: list[int] = []
    server = FakeServer({}, [])
    calls = server.calls()
    calls.manifest = lambda job_id: asked.append(job_id) or server.manifest(job_id)
    rec = Recorder()
    reporter = rec.reporter()
    reporter.sandbox = calls
    plain = JobSpec(job_id=8, executable="/bin/true", jdl='[ Executable = "/bin/true"; ]')
    with_files = JobSpec(job_id=9, executable="/bin/true", jdl='[ Executable = "/bin/true"; OutputSandbox = {"a"}; ]')
    for spec in (plain, with_files):
        assert run_job(spec, tmp_path, reporter, grace=1.0, poll_interval=0.1).status == "Done"
    assert asked == [9]


def run_spec(tmp_path: Path, spec: JobSpec, server: FakeServer):
    rec = Recorder()
    reporter = rec.reporter()
    reporter.sandbox = server.calls()
    return run_job(spec, tmp_path / "work", reporter, grace=1.0, poll_interval=0.1), rec


def test_an_executable_the_input_sandbox_brings_runs_from_the_jobs_directory(tmp_path):
    """DIRAC's portal pattern: `Executable = "run.sh"; InputSandbox = {"run.sh"};`, no execute bit needed."""
    server = FakeServer({"run.sh": b"#!/bin/sh\necho ran with $1 in $(basename $PWD)\n"}, [])
    result, rec = run_spec(tmp_path, JobSpec(job_id=7, executable="run.sh", arguments="x"), server)
    assert (result.status, result.minor_status) == ("Done", "Execution Complete"), result.minor_status
    assert rec.outputs == [("ran with x in 7\n", "", False)]
    assert os.access(result.workdir / "run.sh", os.X_OK)


def test_an_executable_that_is_no_file_of_the_job_is_looked_up_in_path(tmp_path):
    result, rec = run_spec(tmp_path, JobSpec(job_id=7, executable="echo", arguments="from PATH"), FakeServer({}, []))
    assert result.status == "Done" and rec.outputs == [("from PATH\n", "", False)]
    outside = run_spec(tmp_path / "b", JobSpec(job_id=8, executable="../run.sh"), FakeServer({}, []))[0]
    assert outside.status == "Failed" and outside.minor_status.startswith("Cannot start: [Errno 2]")


def test_std_output_and_std_error_name_the_streams_files_and_the_output_sandbox_returns_them(tmp_path):
    """DIRAC's tutorial: `StdOutput = "StdOut"; StdError = "StdErr"; OutputSandbox = {"StdOut","StdErr"};`."""
    server = FakeServer({}, ["StdOut", "StdErr"])
    spec = JobSpec(job_id=7, executable=SH, arguments="-c 'echo out; echo err >&2'", stdout_name="StdOut",
                   stderr_name="StdErr")
    result, rec = run_spec(tmp_path, spec, server)
    assert result.status == "Done"
    assert server.received == {"StdOut": b"out\n", "StdErr": b"err\n"}
    assert rec.outputs == [("out\n", "err\n", False)]
    assert sorted(os.listdir(result.workdir)) == ["StdErr", "StdOut"]


def test_one_file_named_for_both_streams_gets_both(tmp_path):
    spec = JobSpec(job_id=7, executable=SH, arguments="-c 'echo out; echo err >&2'", stdout_name="job.log",
                   stderr_name="job.log")
    result, rec = run_spec(tmp_path, spec, FakeServer({}, ["job.log"]))
    assert result.status == "Done" and rec.outputs == [("out\nerr\n", "", False)]


def test_stream_names_come_with_the_match_and_a_bad_one_falls_back():
    spec = JobSpec.from_match({"JobID": 1, "Executable": "x", "StdOutput": "StdOut", "StdError": "../err"})
    assert (spec.stdout_name, spec.stderr_name) == ("StdOut", "std.err")
    assert (JobSpec.from_match({"JobID": 1, "Executable": "x"}).stdout_name) == "std.out"
