"""Load shedding: a saturated server process says "later" at once.

Without a bound, every request a process accepts waits for one of its
request threads, and a thousand pilots polling at once make every answer
take seconds (docs/benchmarks.md). With it, a process works on at most
``backpressure.max_in_flight`` requests at a time (those waiting for a
thread included); one more is answered ``429 Too Many Requests`` with
``Retry-After: backpressure.retry_after`` straight from the event loop:
no thread, no body read, no database.

429 rather than 503: the refusal is about how much is asked at this moment,
not a fault of the server, and the API keeps 5xx for its own defects, so
that an alert on 5xx stays meaningful. Clients (the pilot, pilot/client.py)
wait the Retry-After, with jitter, and ask again.

New work goes first: a pilot asking for a job (``POST
/api/v1/matcher/request-job`` or ``request-jobs``, nearly all of a busy
server's requests) is
refused once ``max_in_flight`` requests are in progress, any other request
only past twice that. The reports of running jobs (Running, Done,
heartbeats, output) and users' commands still get through a server that
idle pilots keep busy: a job's Running report refused for longer than its
lease would have it run again elsewhere.

The health check and the metrics are never shed: a load balancer must not
take a busy server for a dead one, and a busy server is when its metrics
matter most.

How long to wait: ``retry_after`` seconds while few are refused. When
many are, long enough that all those waiting come back at no more than a
twentieth of the most this process has answered in a second (up to
``retry_after_max``).
A refusal is not free: a pilot makes a new connection for each request,
and accepting it, refusing and closing it costs the server about 0.2 ms
of CPU, an eighth of a match, and the pilot's machine as much again
(docs/benchmarks.md, "Refusals held to a twentieth"). A thousand pilots
refused and told "5 s" come back 160 times a second; told "30 s", 27.

How many wait: the refused of the last second times the wait each was
told (Little's law: refused at R a second and away W seconds each, R x W
are away at any moment). In a burst this overcounts (all of a crowd
arrives in one second), so a crowd arriving at once is spread over the
longest wait; as it comes back, the count settles at the real one.

The counts live in the process's event loop, the only thread that changes
it, so it needs no lock; with ``wms server --workers N`` each worker has its
own bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

from wms.config.models import BackpressureSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths never refused for load.
NEVER_SHED = frozenset({"/api/v1/health", "/metrics"})
#: Paths of new work, refused first.
NEW_WORK = frozenset({"/api/v1/matcher/request-job", "/api/v1/matcher/request-jobs"})
#: How many times max_in_flight any other request may find in progress.
OTHERS_HEADROOM = 2
#: The refused may come back at most at this share of the rate a process answers.
REFUSED_SHARE = 0.05


def busy_response(in_flight: int, wait: int) -> JSONResponse:
    """The API's error shape, status 429, and when to come back."""
    return JSONResponse(
        {"detail": f"server busy: {in_flight} requests in progress in this process "
                   f"(backpressure.max_in_flight); retry after {wait} s"},
        status_code=429,
        headers={"Retry-After": str(wait)},
    )


def retry_after(settings: BackpressureSettings, away: float, answered: int) -> int:
    """Seconds to tell a refused client: long enough that the ``away``
    clients already refused (the waits told in the last second, summed) come
    back at no more than REFUSED_SHARE of the ``answered`` a second (the most
    this process has answered in a second), within [retry_after,
    retry_after_max]. The rate is taken to be at least max_in_flight a
    second (a full process answering within a second each): a process that
    has not been busy yet does not know what it can do."""
    needed = math.ceil(away / (REFUSED_SHARE * max(answered, settings.max_in_flight)))
    return max(settings.retry_after, min(settings.retry_after_max, needed))


class Window:
    """Seconds of waiting told to those refused in the last whole second and
    in the current one, requests answered in the current one, and the most
    answered in any one second."""

    def __init__(self) -> None:
        self.started = 0.0
        self.told = self.last_told = 0
        self.answered = self.most_answered = 0

    def roll(self, now: float) -> None:
        if now - self.started < 1.0:
            return
        recent = now - self.started < 2.0          # else no request for a second: those waits are over
        self.last_told = self.told if recent else 0
        self.most_answered = max(self.most_answered, self.answered)
        self.told = self.answered = 0
        self.started = now

    def away(self) -> int:
        """About how many refused clients are waiting to come back."""
        return max(self.told, self.last_told)


class Backpressure:
    """The ASGI middleware holding one process's count of requests in progress."""

    def __init__(self, app: ASGIApp, settings: BackpressureSettings) -> None:
        self.app = app
        self.settings = settings
        self.in_flight = 0
        self.window = Window()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in NEVER_SHED:
            await self.app(scope, receive, send)
            return
        window = self.window
        window.roll(time.monotonic())
        limit = self.settings.max_in_flight
        if scope.get("path") not in NEW_WORK:
            limit *= OTHERS_HEADROOM
        if self.in_flight >= limit:
            wait = retry_after(self.settings, window.away(), max(window.answered, window.most_answered))
            window.told += wait
            await busy_response(self.in_flight, wait)(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            window.answered += 1
