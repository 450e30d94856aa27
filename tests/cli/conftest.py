"""A real `wms server` process on SQLite, and a way to run `wms` commands
against it as separate processes, as a user would."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import CONFIG_DIR, REPO

WMS = [sys.executable, "-m", "wms.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Wms:
    """Runs `wms ...` with this server's URL, config and a token."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *args: str, token: str | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        env = dict(self.env)
        if token is not None:
            env["WMS_TOKEN"] = token
        return subprocess.run([*WMS, *args], env=env, capture_output=True, text=True, input=stdin, timeout=60, cwd=REPO)

    def ok(self, *args: str, **kw) -> str:
        result = self(*args, **kw)
        assert result.returncode == 0, f"wms {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    def json(self, *args: str, **kw):
        return json.loads(self.ok(*args, "--json", **kw))


def wait_for(url: str, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {process.stderr.read()}")
        try:
            if httpx.get(url + "/api/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`wms server` on a fresh SQLite database; yields (wms runner, config dir, base env)."""
    tmp = tmp_path_factory.mktemp("server")
    config = tmp / "config"
    shutil.copytree(CONFIG_DIR, config)
    port = free_port()
    env = {
        **os.environ,
        "HOME": str(tmp / "home"),
        "WMS_CONFIG": str(config),
        "WMS_DATABASE_URL": f"sqlite:///{tmp / 'wms.db'}",
        "WMS_URL": f"http://127.0.0.1:{port}",
    }
    env.pop("WMS_TOKEN", None)
    wms = Wms(env)
    wms.ok("db", "upgrade")
    process = subprocess.Popen([*WMS, "server", "--bind", f"127.0.0.1:{port}"], env=env, cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(env["WMS_URL"], process)
        yield wms
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def tokens(server) -> dict[str, str]:
    def create(user, group, vo, role):
        return server.ok("admin", "token", "create", "--user", user, "--group", group, "--vo", vo, "--role", role).strip()

    return {
        "roland": create("roland", "lhcb_user", "lhcb", "user"),
        "andre": create("andre", "dteam_user", "dteam", "user"),
        "admin": create("admin", "lhcb_prod", "lhcb", "manager"),
        "pilot": create("pilot", "lhcb_pilot", "lhcb", "pilot"),
    }
