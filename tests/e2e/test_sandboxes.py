"""Sandboxes end to end: `wms submit` sends a JDL's InputSandbox, a real
pilot runs the job on them and sends back its OutputSandbox, `wms output
--dir` fetches it; on SQLite (directory store), PostgreSQL and MariaDB
(database store), one `wms server` per database."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, func, select

from tests.conftest import BACKENDS
from tests.helpers import CONFIG_DIR, REPO, patience
from tests.servers import ServerHandle, running_server
from wms.db import schema
from wms.db.engine import make_engine

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
    env = {**os.environ, "WMS_PILOT_TOKEN": site.server.pilot_token(pilot_id)}
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
    # Without --dir: stdout as before.
    assert server.ok("output", str(job_id), token=roland).startswith("the job ran in ")
    # Another user reads nothing of it.
    refused = server.wms("output", str(job_id), "--dir", str(tmp_path / "theirs"), token=server.issued["andre"])
    assert refused.returncode == 1
    assert refused.stderr == f"wms output: job {job_id} belongs to another user: its sandboxes are its owner's\n"
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

    jdl = job_files(tmp_path / "big", big=b"x" * (FILE_BYTES + 1))
    refused = server.wms("submit", str(jdl), token=roland)
    assert refused.returncode == 1
    assert refused.stderr == (f"wms submit: {jdl}: sandbox file 'big.dat' is {FILE_BYTES + 1} bytes, more than "
                              f"{FILE_BYTES} (sandboxes.file_bytes)\n")
    assert {t: site.rows(t) for t in before} == before
