"""deploy/ works as shipped: the systemd units' command lines, run from a
directory that is not theirs (``/``), with the shipped wms.yaml and
wms.env, keep every file under the state directory, and a job runs
through the server and the agents to its end (deploy/README.md).

What systemd itself would add (the user, the StateDirectory) is not
started here: the units' ``ExecStart``, ``EnvironmentFile`` and
``WorkingDirectory`` lines are read and run as a shell would, with
/opt/wms/bin, /etc/wms and /var/lib/wms moved to this test's directories.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.conftest import REDIS_URL, redis_client  # noqa: F401 - the fixture
from tests.helpers import CONFIG_DIR, REPO, interrupt, interruptible, patience, wait_until
from tests.servers import free_port, wait_for

DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))


def unit(name: str) -> dict[str, str]:
    """The [Service] lines of a unit, by key."""
    lines = (DEPLOY / "systemd" / name).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.mark.parametrize("path", UNITS, ids=[p.name for p in UNITS])
def test_every_unit_runs_as_wms_in_its_state_directory(path):
    service = unit(path.name)
    assert service["User"] == "wms"
    assert service["WorkingDirectory"] == "/var/lib/wms" and service["StateDirectory"] == "wms"
    assert service["EnvironmentFile"] == "/etc/wms/wms.env"
    assert service["ExecStart"].startswith("/opt/wms/bin/")


def test_the_shipped_wms_yaml_names_only_absolute_paths():
    text = (DEPLOY / "wms.yaml").read_text()
    for key in ("pilot_log_dir:", "  directory:"):
        [line] = [line for line in text.splitlines() if line.startswith(key)]
        assert line.split(":", 1)[1].strip().startswith("/var/lib/wms/"), line


class Machine:
    """/etc/wms, /var/lib/wms and /opt/wms/bin of a machine set up as
    deploy/README.md says, under ``root``."""

    def __init__(self, root: Path, port: int) -> None:
        self.port = port
        self.etc, self.state = root / "etc" / "wms", root / "var" / "lib" / "wms"
        shutil.copytree(CONFIG_DIR, self.etc)
        (self.etc / "wms.yaml").write_text(self.moved((DEPLOY / "wms.yaml").read_text()))
        self.state.mkdir(parents=True)
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("WMS_")},
                    **self.environment_file(), "HOME": str(root)}
        self.env.update(WMS_CONFIG=str(self.etc), WMS_DATABASE_URL=f"sqlite:///{self.state / 'wms.db'}",
                        WMS_BROKER_URL=REDIS_URL, WMS_URL=f"http://127.0.0.1:{port}")

    def moved(self, text: str) -> str:
        return (text.replace("/var/lib/wms", str(self.state)).replace("/etc/wms", str(self.etc))
                .replace("/opt/wms/bin", str(BIN)).replace("127.0.0.1:8080", f"127.0.0.1:{self.port}"))

    def environment_file(self) -> dict[str, str]:
        lines = (DEPLOY / "wms.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))

    def start(self, name: str, log: Path) -> subprocess.Popen:
        """The unit's ExecStart, from ``/`` (not its WorkingDirectory)."""
        argv = shlex.split(self.moved(unit(name)["ExecStart"]))
        with log.open("w") as out:
            return subprocess.Popen(argv, env=self.env, cwd="/", stdout=out, stderr=subprocess.STDOUT,
                                    preexec_fn=interruptible)

    def wms(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "wms"), *args], env=self.env, cwd="/", capture_output=True, text=True,
                              timeout=patience(60))


@pytest.mark.usefixtures("redis_client")      # the worker's broker, flushed
def test_the_units_run_a_job_from_a_foreign_directory_and_keep_their_files_home(tmp_path):
    port = free_port()
    machine = Machine(tmp_path, port)
    upgraded = machine.wms("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    token = machine.wms("admin", "token", "create", "--user", "admin", "--group", "lhcb_prod", "--vo", "lhcb",
                        "--role", "manager")
    machine.env["WMS_TOKEN"] = token.stdout.strip()
    before = set(os.listdir("/"))
    server = machine.start("wms-server.service", tmp_path / "server.log")
    agents = worker = None
    try:
        wait_for(machine.env["WMS_URL"], server, log=tmp_path / "server.log")
        job = tmp_path / "hello.jdl"
        job.write_text('[ Executable = "/bin/echo"; Arguments = "deployed"; CPUTime = 300; '
                       'Site = "DIRAC.Local.ch"; ]')
        [job_id] = machine.wms("submit", str(job)).stdout.split()
        agents = machine.start("wms-agents.service", tmp_path / "agents.log")

        def done() -> bool:
            [row] = json.loads(machine.wms("status", job_id, "--json").stdout)
            return row["Status"] == "Done"

        wait_until(done, 120, f"job {job_id} done through the units",
                   details=lambda: (tmp_path / "agents.log").read_text()[-2000:])
        [pilot] = [p for p in json.loads(machine.wms("pilots", "--json").stdout) if p["JobsRun"]]
        output = machine.wms("pilots", "--output", pilot["PilotID"])
        assert output.returncode == 0 and f"job {job_id}" in output.stdout, output.stderr
        assert (machine.state / "pilots").is_dir()

        # A Celery worker started so refreshes the pool map from the same files.
        refreshed = stamp(machine)
        worker = machine.start("wms-celery-worker.service", tmp_path / "worker.log")
        wait_until(lambda: stamp(machine) != refreshed, 60, "the worker's start-up refresh of the pool map",
                   details=lambda: (tmp_path / "worker.log").read_text()[-2000:])
    finally:
        for process in (worker, agents, server):
            if process is not None:
                interrupt(process)
    assert set(os.listdir("/")) == before                       # nothing made in the directory they started in
    assert not Path("/var/pilots").exists() and not Path("/var/sandboxes").exists()


def stamp(machine: Machine) -> dict[str, str] | None:
    """When the pool map was last refreshed, and from which configuration."""
    from wms.config import load_config
    from wms.db.engine import make_engine
    from wms.services import pools
    from wms.services.runtime import Runtime

    engine = make_engine(machine.env["WMS_DATABASE_URL"])
    try:
        return pools.pool_map_stamp(Runtime.create(load_config(machine.etc), engine))
    finally:
        engine.dispose()
