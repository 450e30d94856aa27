"""Kept-alive connections shared out evenly between the workers of one server.

The kernel gives each new connection to one of the workers by chance
(SO_REUSEPORT, wms/server.py), and a kept-alive connection stays with the
worker that accepted it. A few long-lived connections (pilots asking
without pause, a client's pool) can fall 22 to 10 between two workers,
and each request on the fuller one then waits about twice as long, since
every worker answers at the same rate (docs/journal/benchmarks.md, "What the p99
at 32 pilots waits for").

So each worker counts the connections it answered lately and writes the
count to a directory the workers share (``SHARES_ENV``, made by `wms
server --workers N`). While it holds more than its share of all of them,
it answers one request at a time with ``Connection: close``: the client
connects again, lands by chance again, and the shares even out within
seconds. Any HTTP/1.1 client (httpx, so the pilot and the CLI; nginx;
HAProxy) simply connects again; the request itself was answered in full.

A refusal (429 or 503, the server shedding load) neither counts nor
closes: its client is told to come back later, on a connection of its
own after a wait of seconds, so it holds nothing. Counted, the crowd a
saturated server refuses made one worker look fuller than the other, and
it closed admitted pilots' connections, which could land on the other,
full worker and be refused in turn (docs/journal/benchmarks.md, "Refusals do not
count as held connections").

A connection is known by the client's address and port. Behind a trusted
proxy uvicorn replaces that with the forwarded address and port 0, which
many connections share: those are left alone (the proxy spreads its
requests itself).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wms.api import metrics
from wms.api.worker_directory import directory_in_environment

#: The directory the workers of one server share their counts in.
SHARES_ENV = "WMS_WORKER_SHARES"
#: A connection answered within this many seconds counts as held.
HELD_S = 2.0
#: Seconds between two readings of the other workers' counts.
PERIOD_S = 0.5
SUFFIX = ".connections"
#: How many workers the server runs, written by the supervisor.
WORKERS_FILE = "workers"
#: Answers that send their client away for a while: not a connection held.
REFUSALS = frozenset({429, 503})


class Shares:
    """This worker's count of held connections against its share of all of them."""

    def __init__(self, directory: Path, name: str, workers: int, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self.path = directory / f"{name}{SUFFIX}"
        # A worker that answers nothing writes no count: its share is counted all the same.
        self.workers = workers
        self.clock = clock
        self.wall = wall
        self._answered: dict[Hashable, float] = {}
        self._started: float | None = None
        self._read_at = float("-inf")
        self._excess = 0

    def last_answer(self, connection: Hashable) -> bool:
        """Note an answer on ``connection``; True when it should be the last one there."""
        now = self.clock()
        self._answered[connection] = now
        if self._started is None:
            self._started = now
        if now - self._read_at >= PERIOD_S:
            self._read_at = now
            excess = self._over_share(now)
            # Counted for HELD_S at least before acting: until then its own count is not whole.
            self._excess = excess if now - self._started >= HELD_S else 0
        if self._excess <= 0:
            return False
        self._excess -= 1
        del self._answered[connection]
        return True

    def _over_share(self, now: float) -> int:
        """How many connections this worker holds over its share (0 or less: none)."""
        self._answered = {c: t for c, t in self._answered.items() if now - t <= HELD_S}
        held = len(self._answered)
        _write(self.path, held)
        counts = list(_counts(self.directory, self.wall() - HELD_S))
        if self.path.name not in dict(counts):
            counts.append((self.path.name, held))
        total = sum(count for _, count in counts)
        share = -(-total // max(self.workers, len(counts)))     # rounded up: an odd connection stays
        return held - share


def _write(path: Path, count: int) -> None:
    fresh = path.with_name(path.name + ".new")
    with contextlib.suppress(OSError):          # counted again at the next period
        fresh.write_text(str(count))
        os.replace(fresh, path)


def _counts(directory: Path, since: float) -> Iterator[tuple[str, int]]:
    """Each worker's last count, written after ``since`` (a worker that stopped writing has stopped)."""
    with contextlib.suppress(OSError):
        for path in directory.glob(f"*{SUFFIX}"):
            with contextlib.suppress(OSError, ValueError):
                if path.stat().st_mtime >= since:
                    yield path.name, int(path.read_text())


class ConnectionBalance:
    """ASGI middleware: ``Connection: close`` on the answers ``Shares`` picks."""

    def __init__(self, app: ASGIApp, shares: Shares) -> None:
        self.app = app
        self.shares = shares

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client") if scope["type"] == "http" else None
        if not client or not client[1]:          # not HTTP, or behind a proxy: leave it
            await self.app(scope, receive, send)
            return

        async def closing(message: Message) -> None:
            if (message["type"] == "http.response.start" and message["status"] not in REFUSALS
                    and self.shares.last_answer(tuple(client))):
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
                metrics.RECONNECTS.inc()
            await send(message)

        await self.app(scope, receive, closing)


def install(app: Any) -> None:
    """Balance ``app``'s connections with the other workers', when it is one of
    several (`wms server --workers N` set SHARES_ENV); else leave it as it is."""
    directory = os.environ.get(SHARES_ENV)
    if directory:
        workers = _workers(Path(directory))
        app.add_middleware(ConnectionBalance, shares=Shares(Path(directory), str(os.getpid()), workers))


def _workers(directory: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return max(1, int((directory / WORKERS_FILE).read_text()))
    return 1


@contextlib.contextmanager
def shares_directory(workers: int) -> Iterator[Path]:
    """The directory for the ``workers`` about to start: SHARES_ENV's if set (its
    owner keeps it), else a new one in SHARES_ENV while they run, removed at the end."""
    with directory_in_environment(SHARES_ENV, "wms-shares-") as directory:
        (directory / WORKERS_FILE).write_text(str(workers))
        yield directory
