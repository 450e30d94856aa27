"""Shared test helpers: the default configuration, callers, and waiting.

Waiting: a test never sleeps and then asserts. It polls a condition with
:func:`wait_until` (or :func:`eventually`) until a deadline, and every
deadline goes through :func:`patience`, which multiplies it by the factor
in the environment variable ``WMS_TEST_PATIENCE`` (default 1). The
deadlines are generous already (a loaded 2-core machine meets them); a
slower machine raises the factor rather than the tests' numbers. A
deadline only bounds how long a failing test takes: a passing one goes on
as soon as its condition holds.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from wms.config import Config, load_config
from wms.core.identity import Identity

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "config"
EXAMPLES = REPO / "examples"
# A wildcard pattern that a backtracking matcher takes minutes over against a
# queue name (it once held the server 75 s through `wms submit -q`).
# Put before the command of a service a test starts: the service gets SIGTERM
# when the test process dies (a worker ended by a timeout or a kill), so no
# A-REX, sshd or identity provider outlives the run that started it.
ENDS_WITH_TEST = ["setpriv", "--pdeathsig", "TERM"] if shutil.which("setpriv") else []

BACKTRACKING_PATTERN = "*?" * 11 + "Z"

ROLAND = Identity(user="roland", group="lhcb_user", vo="lhcb", role="user")
ALICE = Identity(user="alice", group="lhcb_user", vo="lhcb", role="user")
ANDRE = Identity(user="andre", group="dteam_user", vo="dteam", role="user")
ADMIN = Identity(user="admin", group="lhcb_prod", vo="lhcb", role="manager")
OPERATOR = Identity(user="oper", group="lhcb_prod", vo="lhcb", role="operator")
PILOT = Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot")


def as_pilot(pilot_id: str) -> Identity:
    """PILOT as the token of one pilot (bound to ``pilot_id``) presents it."""
    return Identity(user=PILOT.user, group=PILOT.group, vo=PILOT.vo, role=PILOT.role, pilot_id=pilot_id)


@lru_cache(maxsize=1)
def default_config() -> Config:
    return load_config(CONFIG_DIR)


def run_concurrently(work, count: int) -> tuple[list, list]:
    """Run ``work(i)`` on ``count`` threads at once; (results, exceptions)."""
    import threading

    results, errors = [], []

    def call(i: int) -> None:
        try:
            results.append(work(i))
        except Exception as exc:  # noqa: BLE001 - returned to the test, which asserts on it
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def interruptible() -> None:
    """``preexec_fn`` for a child the test stops with SIGINT (Ctrl-C): the
    default disposition, so that Python turns it into KeyboardInterrupt
    even when the test run itself ignores SIGINT (as a shell's background
    job, or a CI runner, may), which the child would inherit."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(process, timeout: float = 60) -> None:
    """Stop a child started with :func:`interruptible` as Ctrl-C would; killed
    if it has not ended within ``timeout`` seconds (scaled by WMS_TEST_PATIENCE)."""
    import signal
    import subprocess

    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=patience(timeout))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# -- waiting ------------------------------------------------------------------------

T = TypeVar("T")


def patience_factor() -> float:
    """``WMS_TEST_PATIENCE`` (a positive number), 1 when unset."""
    raw = os.environ.get("WMS_TEST_PATIENCE", "").strip()
    if not raw:
        return 1.0
    try:
        factor = float(raw)
    except ValueError:
        raise ValueError(f"WMS_TEST_PATIENCE must be a number, not {raw!r}") from None
    if factor <= 0:
        raise ValueError(f"WMS_TEST_PATIENCE must be positive, not {raw!r}")
    return factor


def patience(seconds: float) -> float:
    """A deadline of ``seconds``, scaled by the patience factor."""
    return seconds * patience_factor()


def tail(path: Path, size: int = 3000) -> str:
    """The last ``size`` characters of a text file ("" when it cannot be read)."""
    try:
        return Path(path).read_text(errors="replace")[-size:]
    except OSError:
        return ""


def log_tails(logs: Iterable[Path], size: int = 3000) -> str:
    """Each log's name and tail, for a failure message."""
    return "\n".join(f"--- {Path(log).name} ({log})\n{tail(log, size)}" for log in logs)


def wait_until(check: Callable[[], T], timeout: float = 30, what: str = "the condition", every: float = 0.05,
               details: Callable[[], str] | None = None) -> T:
    """Poll ``check()`` until it returns something true, and return that.

    After ``patience(timeout)`` seconds it raises AssertionError naming
    ``what``, the last value seen and ``details()`` (e.g. log tails).
    ``check`` may itself raise to fail at once.
    """
    limit = patience(timeout)
    deadline = time.monotonic() + limit
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(f"{what}: not within {limit:g} s (last: {str(last)[:1500]}){extra}")
        time.sleep(every)


def eventually(assertion: Callable[[], Any], timeout: float = 30, every: float = 0.05) -> Any:
    """Run ``assertion()`` until it stops raising AssertionError; after
    ``patience(timeout)`` seconds its last AssertionError propagates."""
    deadline = time.monotonic() + patience(timeout)
    while True:
        try:
            return assertion()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(every)


def send_json(handler: BaseHTTPRequestHandler, status: int, answer: Any,
              headers: Mapping[str, str] | None = None) -> None:
    """Answer ``answer`` as JSON with ``status`` (and ``headers``) from a small test HTTP server."""
    data = json.dumps(answer).encode()
    handler.send_response(status)
    for name, value in {**(headers or {}), "Content-Type": "application/json",
                        "Content-Length": str(len(data))}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def small_http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering with ``handler`` in a thread; its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
