"""The processes of an end-to-end run: a private Redis, Celery worker and
beat, `wms server` / `wms up`, and the local pilots the SiteDirector starts.

Each is a real process started the way docs/deployment.md says; logs go to
files in the test's directory (a pipe nobody reads could block a process),
and the tail of a log is shown when something goes wrong.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from tests.helpers import patience, tail  # noqa: F401 - tail: used by the tests that import it from here
from tests.servers import WMS, ServerHandle, free_port, wait_for

BIN = Path(sys.executable).parent


def missing_service(message: str) -> None:
    """Skip with the reason; under CI=true a missing service is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def tails(logs: list[Path], size: int = 3000) -> str:
    """The tails of ``logs`` for a failure message; a directory stands for
    the ``*.log`` files in it (pilot logs appear while the test runs), the
    most recent few, shorter."""
    shown = []
    for log in logs:
        if log.is_dir():
            files = sorted(log.glob("*.log"), key=lambda f: f.stat().st_mtime)[-4:]
            shown += [f"--- {f.parent.name}/{f.name}\n{tail(f, size // 3)}" for f in files]
        else:
            shown.append(f"--- {log.name}\n{tail(log, size)}")
    return "\n".join(shown)


def stop(process: subprocess.Popen | None, timeout: float = 15) -> None:
    """SIGTERM (a warm shutdown for Celery), SIGKILL when it does not end."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class RedisServer:
    """A Redis of our own on a free port, without persistence, that the test
    may kill and start again on the same port (the machine's Redis on 6379
    is never touched)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.log = directory / "redis.log"

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            missing_service("redis-server not found on PATH")
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", str(self.directory)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + patience(30)
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError as exc:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        missing_service(f"redis-server did not start on port {self.port}: {exc}; {tail(self.log)}")
                    time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: everything it held (queued messages, locks) is gone."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def restart(self, down_for: float) -> None:
        self.kill()
        time.sleep(down_for)
        self.start()


def celery(directory: Path, env: dict[str, str], *args: str, log_name: str) -> tuple[subprocess.Popen, Path]:
    """``celery -A agents ARGS`` in ``directory``, logging to ``directory/log_name``."""
    log_path = directory / log_name
    with log_path.open("a") as log:
        process = subprocess.Popen([str(BIN / "celery"), "-A", "agents", *args], cwd=directory, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return process, log_path


class EmbeddedHandle(ServerHandle):
    """`wms up` instead of `wms server`: API, Matcher, agents and local pilots in one process.

    It runs in the test's directory, so its ``var/pilots`` (pilot logs) is there.
    """

    def start(self, wait: bool = True) -> None:
        port = self.url.rsplit(":", 1)[1]
        with self.log.open("a") as log:
            self.process = subprocess.Popen([*WMS, "up", "--bind", f"127.0.0.1:{port}"], env=self.env,
                                            cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT, text=True)
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        assert self.process is not None
        wait_for(self.url, self.process, timeout=120, log=self.log)


# -- pilots ---------------------------------------------------------------------------
def pilot_process(backend_ref: str) -> int | None:
    """The pid of the ``python -m pilot`` process of a local pilot (the child
    of the shell wrapper whose pid the reference holds), None if it is gone."""
    _, _, rest = backend_ref.partition(":")
    wrapper = int(rest.partition(":")[0])
    try:
        children = Path(f"/proc/{wrapper}/task/{wrapper}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def kill_pilots(backend_refs: list[str]) -> None:
    """SIGKILL what is left of these local pilots (each is its own process
    group), checking first that the pid is still that pilot's wrapper."""
    for ref in backend_refs:
        _, _, rest = (ref or "").partition(":")
        pid, _, pilot_id = rest.partition(":")
        if not pid.isdigit() or not pilot_id:
            continue
        try:
            if pilot_id.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            os.killpg(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
