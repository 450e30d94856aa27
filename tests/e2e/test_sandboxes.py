"""Sandboxes end to end: `wms submit` sends a JDL's InputSandbox, a real
pilot runs the job on them and sends back its OutputSandbox, `wms output
--dir` fetches it; on SQLite (directory store), PostgreSQL and MariaDB
(database store), one `wms server` per database."""

from __future__ import annotations

import json

import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, func, select

from tests.conftest import BACKENDS
from tests.helpers import CONFIG_DIR, REPO, patience
from tests.servers import ServerHandle, running_server
from wms.db import schema
from wms.core.identity import Identity
from wms.db.engine import make_engine
from wms.services.tokens import create_token

FILE_BYTES = 600_000
JOB_BYTES = 1_000_000
USERS = {"roland": ("roland", "lhcb_user", "lhcb", "user"), "andre": ("andre", "dteam_user", "dteam", "user")}
STORES = {"sqlite": "directory", "postgresql": "database", "mariadb": "database"}

RUN_SH = """\
tr a-z A-Z < in.txt > result.txt
sha256sum big.dat > run.log
echo "the job ran in $(basename "$PWD")"
"""
JDL = """[
  Executable = "/bin/sh"; Arguments = "run.sh"; JobName = "sandboxed"; CPUTime = 300;
  InputSandbox = {"run.sh", "data/in.txt", "%s"};
  OutputSandbox = {"result.txt", "*.log", "never-written.txt"};
]"""


@dataclass
class Site:
    server: ServerHandle
    engine: Engine
    backend: str
    pilots: dict[str, str] = field(default_factory=dict)

    def pilot_token(self, pilot_id: str) -> str:
        """A pilot token bound to ``pilot_id``, made in-process (quicker than `wms admin token create`)."""
        if pilot_id not in self.pilots:
            identity = Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot", pilot_id=pilot_id)
            self.pilots[pilot_id] = create_token(self.engine, identity, datetime.now(timezone.utc))
        return self.pilots[pilot_id]

    def rows(self, table) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(table)).scalar_one()


@pytest.fixture(scope="module", params=BACKENDS)
def site(request, tmp_path_factory, database_factory) -> Iterator[Site]:
    backend = request.param
    tmp = tmp_path_factory.mktemp(f"sandboxes-{backend}")
    config = tmp / "config-source"
    shutil.copytree(CONFIG_DIR, config)
    settings = yaml.safe_load((config / "wms.yaml").read_text())
    settings["sandboxes"] = {"store": STORES[backend], "directory": str(tmp / "store"),
                             "file_bytes": FILE_BYTES, "job_bytes": JOB_BYTES}
    (config / "wms.yaml").write_text(yaml.safe_dump(settings))
    url = database_factory(backend)
    with running_server(tmp / "server", config_dir=config, tokens=USERS, database_url=url) as server:
        engine = make_engine(url)
        try:
            yield Site(server, engine, backend)
        finally:
            engine.dispose()


def job_files(directory: Path, big: bytes = b"0123456789" * 50_000) -> Path:
    """A JDL in ``directory`` with its input files beside it (one by an absolute path)."""
    (directory / "data").mkdir(parents=True)
    (directory / "run.sh").write_text(RUN_SH)
    (directory / "data" / "in.txt").write_text("hello sandbox\n")
    (directory / "big.dat").write_bytes(big)
    jdl = directory / "job.jdl"
    jdl.write_text(JDL % (directory / "big.dat"))
    return jdl


def run_pilot(site: Site, tmp_path: Path) -> str:
    """One real pilot on the local queue until no job is left; its log."""
    import subprocess

    pilot_id = f"sandbox-pilot-{tmp_path.name}"
    env = {**os.environ, "WMS_PILOT_TOKEN": site.pilot_token(pilot_id)}
    cmd = [sys.executable, "-m", "pilot.main", "--url", site.server.url, "--site", "DIRAC.Local.ch",
           "--ce", "localhost", "--queue", "default", "--workdir", str(tmp_path / "work"), "--poll", "0.2",
           "--max-empty", "1", "--min-time-left", "0", "--grace", "1", "--pilot-id", pilot_id,
           "--platform", "x86_64-el9", "--slots", "1"]
    done = subprocess.run(cmd, env=env, cwd=REPO, text=True, capture_output=True, timeout=patience(180))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def test_input_files_reach_the_job_and_its_output_comes_back(site: Site, tmp_path: Path) -> None:
    server, roland = site.server, site.server.issued["roland"]
    jdl = job_files(tmp_path / "job")
    [job_id] = server.json("submit", str(jdl), token=roland)["job_ids"]
    log = run_pilot(site, tmp_path)
    [status] = server.json("status", str(job_id), token=roland)
    assert (status["Status"], status["MinorStatus"]) == ("Done", "Execution Complete"), log[-3000:]
    assert "checksum verified" in log

    out = tmp_path / "out"
    fetched = server.wms("output", str(job_id), "--dir", str(out), token=roland)
    assert fetched.returncode == 0, fetched.stderr
    assert sorted(os.listdir(out)) == ["result.txt", "run.log", "std.err", "std.out"]
    assert (out / "result.txt").read_text() == "HELLO SANDBOX\n"
    assert (out / "run.log").read_text().split()[0] == __import__("hashlib").sha256(
        (tmp_path / "job" / "big.dat").read_bytes()).hexdigest()
    assert (out / "std.out").read_text().startswith("the job ran in ")
    assert fetched.stderr == f"OutputSandbox files job {job_id} did not write: never-written.txt\n"
    again = server.json("output", str(job_id), "--dir", str(out), token=roland)
    assert again == {"JobID": job_id, "files": [str(out / n) for n in ("result.txt", "run.log", "std.out", "std.err")],
                     "missing": ["never-written.txt"]}
    # Without --dir: stdout as before.
    assert server.ok("output", str(job_id), token=roland).startswith("the job ran in ")
    # Another user reads nothing of it.
    refused = server.wms("output", str(job_id), "--dir", str(tmp_path / "theirs"), token=server.issued["andre"])
    assert refused.returncode == 1
    assert refused.stderr == f"wms output: no such job: {job_id}\n"
    assert not (tmp_path / "theirs").exists()


def test_a_missing_or_oversized_input_file_is_refused_at_submit_with_nothing_stored(site: Site,
                                                                                    tmp_path: Path) -> None:
    server, roland = site.server, site.server.issued["roland"]
    before = {t: site.rows(t) for t in (schema.jobs, schema.sandbox_uploads, schema.sandbox_files)}

    jdl = job_files(tmp_path / "missing")
    (tmp_path / "missing" / "data" / "in.txt").unlink()
    refused = server.wms("submit", str(jdl), token=roland)
    assert refused.returncode == 2
    assert refused.stderr == (f"wms submit: {jdl}: InputSandbox file 'data/in.txt' "
                              f"({tmp_path / 'missing' / 'data' / 'in.txt'}): No such file or directory\n")

    jdl = job_files(tmp_path / "directory")
    (tmp_path / "directory" / "run.sh").unlink()
    (tmp_path / "directory" / "run.sh").mkdir()
    refused = server.wms("submit", str(jdl), token=roland)
    assert refused.returncode == 2
    assert refused.stderr == (f"wms submit: {jdl}: InputSandbox entry 'run.sh' ({tmp_path / 'directory' / 'run.sh'}) "
                              "is not a regular file\n")

    jdl = job_files(tmp_path / "big", big=b"x" * (FILE_BYTES + 1))
    refused = server.wms("submit", str(jdl), token=roland)
    assert refused.returncode == 1
    assert refused.stderr == (f"wms submit: {jdl}: sandbox file 'big.dat' is {FILE_BYTES + 1} bytes, more than "
                              f"{FILE_BYTES} (sandboxes.file_bytes)\n")
    assert {t: site.rows(t) for t in before} == before


def test_a_job_without_output_yet_says_so(site: Site, tmp_path: Path) -> None:
    server, roland = site.server, site.server.issued["roland"]
    # A job for another site stays Waiting: the local pilots of these tests cannot take it.
    [job_id] = server.json("submit", "-", stdin='[ Executable = "/bin/true"; CPUTime = 300; Site = "LCG.CERN.ch"; ]',
                           token=roland)["job_ids"]
    for extra in ((), ("--dir", str(tmp_path / "out"))):
        answer = server.wms("output", str(job_id), *extra, token=roland)
        assert (answer.returncode, answer.stderr) == (1, f"wms output: job {job_id} has no output yet\n")
    assert not (tmp_path / "out").exists()


# -- hostile callers -------------------------------------------------------------
def raw_request(site: Site, head: str, body_pieces: Iterator[bytes] = iter(())) -> tuple[int, str, int]:
    """Send ``head`` then the pieces until the server answers; (status, body, bytes of body sent).

    A plain socket, so nothing is read or buffered for the test's sake: the
    count says how much of the body the server took before it refused."""
    import socket

    host, port = site.server.url.removeprefix("http://").split(":")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=patience(30)) as sock:
        sock.sendall(head.encode())
        sock.setblocking(False)
        answer = b""
        for piece in body_pieces:
            try:
                answer += sock.recv(65536)
            except BlockingIOError:
                pass
            if answer:
                break
            try:
                sock.sendall(piece)
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        sock.settimeout(patience(30))
        while True:
            top, _, body = answer.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length: *(\d+)", top)
            if length and len(body) >= int(length.group(1)):
                break
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line = top.decode(errors="replace").partition("\r\n")[0]
    return int(status_line.split()[1]), body.decode(errors="replace"), sent


def head(method: str, path: str, token: str, *headers: str) -> str:
    lines = [f"{method} /api/v1{path} HTTP/1.1", "Host: test", f"Authorization: Bearer {token}", *headers]
    return "\r\n".join(lines) + "\r\n\r\n"


def test_a_huge_upload_is_refused_before_its_body_is_read(site: Site) -> None:
    roland, digest = site.server.issued["roland"], "a" * 64
    before = site.rows(schema.sandbox_uploads)
    # Announced: refused from the Content-Length alone; no body byte is ever sent.
    status, body, _ = raw_request(site, head("PUT", f"/sandboxes/{digest}", roland, "Content-Length: 1000000000000",
                                             "Content-Type: application/octet-stream"))
    assert (status, json.loads(body)["detail"]) == (413, "sandbox file: more than 600000 bytes (sandboxes.file_bytes)")
    # Chunked (no length): refused once the count passes the limit, not at the end of 100 MB.
    piece = b"x" * 65536
    chunks = (f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for _ in range(1600))
    status, body, sent = raw_request(site, head("PUT", f"/sandboxes/{digest}", roland,
                                                "Transfer-Encoding: chunked"), chunks)
    assert status == 413 and "sandboxes.file_bytes" in body
    assert sent < 20 * 1024 * 1024
    assert site.rows(schema.sandbox_uploads) == before      # nothing of these was recorded
    with site.server.api(roland) as api:
        limits = api.get("/sandboxes/limits").json()
        assert {key: limits[key] for key in ("file_bytes", "job_bytes", "store")} == {
            "file_bytes": FILE_BYTES, "job_bytes": JOB_BYTES, "store": STORES[site.backend]}


def held_job(site: Site, pilot_id: str) -> tuple[int, int]:
    """A job submitted by roland, matched to ``pilot_id`` and Running; (job id, attempt)."""
    server = site.server
    [job_id] = server.json("submit", "-", stdin='[ Executable = "/bin/true"; CPUTime = 300; OutputSandbox = {"r"}; ]',
                           token=server.issued["roland"])["job_ids"]
    with server.api(site.pilot_token(pilot_id)) as api:
        answer = api.post("/matcher/request-job", json={
            "site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default", "host": "wn", "pilot_id": pilot_id,
            "platform": "x86_64-el9", "cpu_time_left": 100000}).json()
        assert answer["job"]["JobID"] == job_id, answer
        attempt = answer["job"]["Attempt"]
        api.post(f"/jobs/{job_id}/pilot-status", json={"pilot_id": pilot_id, "status": "Running",
                                                       "attempt": attempt}).raise_for_status()
    return job_id, attempt


def finish(site: Site, pilot_id: str, job_id: int, attempt: int) -> None:
    """The holder ends the job: its slot is free for the next test."""
    with site.server.api(site.pilot_token(pilot_id)) as api:
        api.post(f"/jobs/{job_id}/pilot-status", json={"pilot_id": pilot_id, "status": "Done", "exit_code": 0,
                                                       "attempt": attempt}).raise_for_status()


def test_a_pilot_cannot_touch_another_pilots_job(site: Site) -> None:
    job_id, attempt = held_job(site, "holder")
    intruder = site.pilot_token("intruder")
    before = site.rows(schema.sandbox_files)
    # Speaking for itself, the job answers as a missing one; pretending to be the holder, it is refused.
    for as_pilot, status_code, says in (("intruder", 404, f"no such job: {job_id}"),
                                        ("holder", 403, "cannot speak for pilot 'holder'")):
        # Refused at the headers: the 1 GB body announced is never read.
        status, body, _ = raw_request(site, head(
            "PUT", f"/jobs/{job_id}/sandbox/output/r?pilot_id={as_pilot}&attempt={attempt}", intruder,
            "Content-Length: 1000000000", f"X-Content-SHA256: {'b' * 64}"))
        assert status == status_code and says in body, body
        with site.server.api(intruder) as api:
            read = api.get(f"/jobs/{job_id}/sandbox", params={"pilot_id": as_pilot, "attempt": attempt})
            assert read.status_code == status_code and says in read.json()["detail"]
    assert site.rows(schema.sandbox_files) == before
    finish(site, "holder", job_id, attempt)


NAMES = [
    ("%2E%2E", 400, "'..' is not a file name"),
    ("%2E", 400, "'.' is not a file name"),
    ("a%5Cb", 400, "is not a plain file name"),
    ("..%2F..%2Fetc%2Fpasswd", 404, "no such path"),     # a '/' never reaches a name: no such route
    ("x%0Ay", 400, "holds a control character"),
]


def test_sandbox_names_cannot_leave_the_job_directory(site: Site) -> None:
    import httpx

    pilot_id = f"names-{site.backend}"
    job_id, attempt = held_job(site, pilot_id)
    headers = {"Authorization": f"Bearer {site.pilot_token(pilot_id)}", "X-Content-SHA256": "c" * 64}
    answers = []
    with httpx.Client(base_url=site.server.url, timeout=patience(30)) as http:
        for name, _, _ in NAMES:
            response = http.put(f"/api/v1/jobs/{job_id}/sandbox/output/{name}", content=b"data", headers=headers,
                                params={"pilot_id": pilot_id, "attempt": attempt})
            answers.append((name, response.status_code, response.json()["detail"]))
    finish(site, pilot_id, job_id, attempt)
    for (name, status, says), answer in zip(NAMES, answers):
        assert answer[1] == status and says in answer[2], answer
    # A JDL naming such an input file is refused at submit, whole.
    refused = site.server.wms("submit", "-", stdin='[ Executable = "/bin/true"; InputSandbox = {"data/.."}; ]',
                              token=site.server.issued["roland"])
    assert refused.returncode == 1 and "'..' is not a file name" in refused.stderr, refused.stderr


# DIRAC's tutorial (Simple.jdl) and a production portal's template, as their users write them: no brackets,
# the script in the sandbox (no execute bit), and the streams under names of their own.
DIRAC_JDL = """\
JobName = "dirac_tutorial";
Executable = "run.sh";
Arguments = "hello";
StdOutput = "StdOut";
StdError = "StdErr";
InputSandbox = {"run.sh"};
OutputSandbox = {"StdOut","StdErr"};
"""


def test_a_jdl_as_dirac_users_write_it_runs_its_sandbox_script_and_returns_the_streams_it_named(site, tmp_path):
    server, roland = site.server, site.server.issued["roland"]
    directory = tmp_path / "job"
    directory.mkdir()
    (directory / "run.sh").write_text('#!/bin/sh\necho "said $1"\necho "complained" >&2\n')
    (directory / "run.sh").chmod(0o644)
    (directory / "Simple.jdl").write_text(DIRAC_JDL)
    [job_id] = server.json("submit", str(directory / "Simple.jdl"), token=roland)["job_ids"]
    log = run_pilot(site, tmp_path)
    [status] = server.json("status", str(job_id), token=roland)
    assert (status["Status"], status["MinorStatus"]) == ("Done", "Execution Complete"), log[-3000:]
    out = tmp_path / "out"
    fetched = server.wms("output", str(job_id), "--dir", str(out), token=roland)
    assert fetched.returncode == 0, fetched.stderr
    assert sorted(os.listdir(out)) == ["StdErr", "StdOut"]
    assert (out / "StdOut").read_text() == "said hello\n"
    assert (out / "StdErr").read_text() == "complained\n"
    assert server.ok("output", str(job_id), token=roland) == "said hello\n"
