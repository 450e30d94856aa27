"""A real `wms server` process on a fresh SQLite database, for tests.

``running_server(tmp_path)`` copies the configuration, migrates a new
database with ``wms db upgrade``, starts ``wms server`` on a free port and
stops it at the end. The handle runs ``wms`` commands as separate processes
against it, as a user would, and creates tokens with
``wms admin token create``. No stand-in: the pilot and the CLI talk to the
same server a deployment runs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import CONFIG_DIR, REPO, patience

WMS = [sys.executable, "-m", "wms.cli.main"]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen, timeout: float = 90, log: Path | None = None) -> None:
    """Until ``url``/api/v1/health answers 200 (within ``timeout`` seconds scaled by
    WMS_TEST_PATIENCE); fails early when ``process`` exits."""
    timeout = patience(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if process.stderr is not None:
                detail = process.stderr.read()
            else:
                detail = log.read_text() if log is not None and log.exists() else ""
            raise RuntimeError(f"server exited with {process.returncode}: {detail}")
        try:
            if httpx.get(url + "/api/v1/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server did not answer at {url} within {timeout} s")


class ServerHandle:
    """A running `wms server`: its URL, environment, and `wms` commands against it."""

    def __init__(self, tmp: Path, config: Path, url: str, env: dict[str, str],
                 server_args: tuple[str, ...] = ()) -> None:
        self.tmp = tmp
        self.server_args = server_args  # more `wms server` options (--workers N)
        self.config = config
        self.url = url
        self.env = env
        self.log = tmp / "server.log"
        self.process: subprocess.Popen | None = None
        self.issued: dict[str, str] = {}  # tokens created by running_server(tokens=...)

    # -- the CLI ---------------------------------------------------------------

    def wms(self, *args: str, token: str | None = None, stdin: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
        """``wms ARGS`` with this server's URL, config and database, and ``token`` as WMS_TOKEN."""
        env = dict(self.env)
        if token is not None:
            env["WMS_TOKEN"] = token
        return subprocess.run([*WMS, *args], env=env, capture_output=True, text=True, input=stdin,
                              timeout=patience(timeout), cwd=REPO)

    __call__ = wms

    def ok(self, *args: str, **kw: Any) -> str:
        """stdout of a ``wms`` command that must succeed."""
        result = self.wms(*args, **kw)
        assert result.returncode == 0, f"wms {' '.join(args)} failed ({result.returncode}): {result.stderr}"
        return result.stdout

    def json(self, *args: str, **kw: Any) -> Any:
        """The ``--json`` output of a ``wms`` command that must succeed."""
        return json.loads(self.ok(*args, "--json", **kw))

    def token(self, user: str, group: str, vo: str, role: str) -> str:
        """A new bearer token, from ``wms admin token create``."""
        return self.ok("admin", "token", "create", "--user", user, "--group", group, "--vo", vo,
                       "--role", role).strip()

    def pilot_token(self, pilot_id: str, vo: str = "lhcb") -> str:
        """A pilot token of ``vo`` for the pilot ``pilot_id`` alone (one per id, kept): made
        with `wms admin token create --role pilot`; the pilot's first request binds it."""
        key = f"pilot:{vo}:{pilot_id}"
        if key not in self.issued:
            self.issued[key] = self.token("pilot", f"{vo}_pilot", vo, "pilot")
        return self.issued[key]

    def tokens(self, wanted: Mapping[str, tuple[str, str, str, str]]) -> dict[str, str]:
        """Several tokens at once (the commands run in parallel): name -> (user, group, vo, role)."""
        with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
            futures = {name: pool.submit(self.token, *spec) for name, spec in wanted.items()}
            return {name: future.result() for name, future in futures.items()}

    # -- HTTP ------------------------------------------------------------------

    def api(self, token: str) -> httpx.Client:
        """An HTTP client on ``/api/v1`` with ``token`` (close it, or use it in ``with``)."""
        return httpx.Client(base_url=self.url + "/api/v1", headers={"Authorization": f"Bearer {token}"},
                            timeout=patience(60))

    def get_json(self, path: str, token: str) -> Any:
        """GET ``/api/v1{path}`` with ``token``: the JSON of a 200 answer (anything else fails the test)."""
        with self.api(token) as api:
            response = api.get(path)
        assert response.status_code == 200, (path, response.text)
        return response.json()

    def getter(self, default_token: str) -> Callable[..., Any]:
        """``get(path, token=default_token)``: :meth:`get_json` with a token of choice."""
        return lambda path, token=default_token: self.get_json(path, token)

    # -- the process -------------------------------------------------------------

    def start(self, wait: bool = True) -> None:
        """Start ``wms server`` on this handle's port and database (again after :meth:`stop`)."""
        port = self.url.rsplit(":", 1)[1]
        with self.log.open("a") as log:
            # The log goes to a file: a pipe nobody reads could fill up and block the server.
            self.process = subprocess.Popen([*WMS, "server", "--bind", f"127.0.0.1:{port}", *self.server_args],
                                            env=self.env,
                                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until the server answers (it fails early when the process exits)."""
        assert self.process is not None
        wait_for(self.url, self.process, log=self.log)

    def stop(self) -> None:
        """Terminate the server process (the database stays)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=patience(30))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


class Tokens(dict):
    """A server's tokens by name (``handle.issued``); any other name is a
    pilot id, whose own pilot token is made on first use (a pilot token
    speaks for one pilot only)."""

    def __init__(self, server: ServerHandle) -> None:
        super().__init__(server.issued)
        self.server = server

    def __missing__(self, pilot_id: str) -> str:
        token = self[pilot_id] = self.server.pilot_token(pilot_id)
        return token


def edited_config(dest: Path, wms_yaml: Mapping[str, str]) -> Path:
    """The repository's config/ copied to ``dest``, with each text of ``wms_yaml``
    (old -> new) replaced in its wms.yaml; an old text not there fails the test."""
    shutil.copytree(CONFIG_DIR, dest)
    path = dest / "wms.yaml"
    text = path.read_text()
    for old, new in wms_yaml.items():
        assert old in text, f"config/wms.yaml has no {old!r}"
        text = text.replace(old, new)
    path.write_text(text)
    return dest


@contextmanager
def running_server(tmp_path: Path, config_dir: Path | str | None = None,
                   tokens: Mapping[str, tuple[str, str, str, str]] | None = None,
                   database_url: str | None = None, server_args: tuple[str, ...] = ()) -> Iterator[ServerHandle]:
    """`wms server` on a fresh SQLite database in ``tmp_path`` (or on the
    empty database at ``database_url``); stopped on exit.

    ``config_dir`` (default: the repository's config/) is copied to
    ``tmp_path/config`` first, so a test may pass an edited copy.
    ``tokens`` (name -> (user, group, vo, role)) are created while the
    server starts, into ``handle.issued`` (name -> token).
    """
    tmp = Path(tmp_path)
    config = tmp / "config"
    shutil.copytree(config_dir or CONFIG_DIR, config)
    url = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "HOME": str(tmp / "home"),
        "WMS_CONFIG": str(config),
        "WMS_DATABASE_URL": database_url or f"sqlite:///{tmp / 'wms.db'}",
        "WMS_URL": url,
    }
    env.pop("WMS_TOKEN", None)
    handle = ServerHandle(tmp, config, url, env, server_args)
    handle.ok("db", "upgrade")
    try:
        handle.start(wait=False)
        if tokens:
            handle.issued = handle.tokens(tokens)  # the database is all they need
        handle.wait_ready()
        yield handle
    finally:
        handle.stop()
