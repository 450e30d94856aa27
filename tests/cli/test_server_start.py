"""Honest start-up: `wms server`, `wms up` and `wms agents` check the
database and bind the port before they announce anything or start an
agent; what fails is one line on stderr and exit status 1. The
server-side commands say the same of a database that is not there."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.helpers import CONFIG_DIR, patience
from tests.servers import WMS, free_port, wait_for

NOTHING_THERE = {
    "postgresql": "postgresql://wms@127.0.0.1:{port}/wms",
    "mariadb": "mysql://root@127.0.0.1:{port}/wms",
}


def run(tmp_path: Path, *args: str, database_url: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "HOME": str(tmp_path), "WMS_CONFIG": str(CONFIG_DIR), "WMS_DATABASE_URL": database_url}
    environ.pop("WMS_LOG_LEVEL", None)
    environ.pop("WMS_LOG_FORMAT", None)
    environ.update(env)
    return subprocess.run([*WMS, *args], env=environ, capture_output=True, text=True, cwd=tmp_path,
                          timeout=patience(120))


def one_line(result: subprocess.CompletedProcess) -> str:
    """The single line a failed start-up printed (nothing else on stderr or stdout)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and result.stdout == "", result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def nothing_there() -> str:
    """A port on this machine where nothing listens."""
    return str(free_port())


@pytest.mark.parametrize("command, backend", [("server", "postgresql"), ("up", "mariadb"), ("agents", "postgresql")])
def test_an_unreachable_database_stops_start_up_in_one_line(tmp_path, nothing_there, command, backend):
    url = NOTHING_THERE[backend].format(port=nothing_there)
    bind = ["--bind", f"127.0.0.1:{free_port()}"] if command != "agents" else []
    result = run(tmp_path, command, *bind, database_url=url)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith(f"wms: database {url}: ")
    assert "refused" in line.lower()
    assert not (tmp_path / "var" / "pilots").exists()                  # no SiteDirector ran


def test_a_database_without_the_schema_is_named_with_the_cure(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = run(tmp_path, "server", "--bind", f"127.0.0.1:{free_port()}", database_url=url)
    assert result.returncode == 1
    assert one_line(result) == f"wms: database {url}: the database has no schema yet: run `wms db upgrade`"


def test_a_taken_port_stops_start_up_before_serving_or_agents(tmp_path):
    url = f"sqlite:///{tmp_path / 'wms.db'}"
    assert run(tmp_path, "db", "upgrade", database_url=url).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in (["server"], ["up"], ["server", "--workers", "2"]):
            result = run(tmp_path, *command, "--bind", f"127.0.0.1:{port}", database_url=url)
            assert result.returncode == 1
            assert one_line(result) == (f"wms: cannot listen on 127.0.0.1:{port}: Address already in use "
                                        "(another server runs there: stop it, or choose another with --bind)")
    assert not (tmp_path / "var" / "pilots").exists()


@pytest.mark.parametrize("command, url", [
    (["db", "upgrade"], "postgresql://wms:hunter2@127.0.0.1:{port}/wms"),
    (["admin", "token", "create", "--user", "u", "--group", "g", "--vo", "v", "--role", "user"],
     "mysql://root:hunter2@127.0.0.1:{port}/wms"),
])
def test_server_side_commands_on_an_unreachable_database_say_so_in_one_line(tmp_path, nothing_there, command, url):
    result = run(tmp_path, *command, database_url=url.format(port=nothing_there))
    assert result.returncode == 1
    line = one_line(result)
    shown = url.replace("hunter2", "***").format(port=nothing_there)     # never the password
    assert line.startswith(f"wms {command[0]}: database {shown}: ") and "refused" in line.lower()


def test_a_database_url_of_another_kind_is_refused_in_one_line(tmp_path):
    result = run(tmp_path, "db", "upgrade", database_url="oracle://scott@127.0.0.1/orcl")
    assert result.returncode == 1
    assert one_line(result) == ("wms db: database_url: unsupported database URL 'oracle://scott@127.0.0.1/orcl' "
                                "(expected sqlite:///PATH, postgresql://... or mysql://...)")


def test_a_bad_log_level_stops_start_up(tmp_path):
    url = f"sqlite:///{tmp_path / 'wms.db'}"
    result = run(tmp_path, "agents", database_url=url, WMS_LOG_LEVEL="loud")
    assert result.returncode == 1
    assert one_line(result) == "wms: WMS_LOG_LEVEL: expected one of DEBUG, INFO, WARNING, ERROR, got 'loud'"
    result = run(tmp_path, "server", "--log-level", "loud", database_url=url)
    assert result.returncode == 2 and "--log-level" in result.stderr


def test_a_bad_bind_is_one_line_and_an_ipv6_one_serves(tmp_path):
    url = f"sqlite:///{tmp_path / 'wms.db'}"
    result = run(tmp_path, "server", "--bind", "nowhere", database_url=url)
    assert result.returncode == 1
    assert one_line(result) == "wms: --bind: expected HOST:PORT (e.g. 127.0.0.1:8080), got 'nowhere'"
    assert run(tmp_path, "db", "upgrade", database_url=url).returncode == 0
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
            port = probe.getsockname()[1]
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback on this machine: {exc}")
    environ = {**os.environ, "HOME": str(tmp_path), "WMS_CONFIG": str(CONFIG_DIR), "WMS_DATABASE_URL": url}
    log = tmp_path / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen([*WMS, "server", "--bind", f"[::1]:{port}"], env=environ, cwd=tmp_path,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://[::1]:{port}", process, log=log)
        assert f"wms: serving http://[::1]:{port}/api/v1 (OpenAPI at /docs)" in log.read_text()
    finally:
        process.terminate()
        process.wait(timeout=patience(30))
