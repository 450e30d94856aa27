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

The health check and the metrics are never shed: a load balancer must not
take a busy server for a dead one, and a busy server is when its metrics
matter most.

The count lives in the process's event loop, the only thread that changes
it, so it needs no lock; with ``wms server --workers N`` each worker has its
own bound.
"""

from __future__ import annotations

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

#: Set in the scope of a refused request, for the metrics.
SHED_KEY = "wms.shed"


def busy_response(in_flight: int, settings: BackpressureSettings) -> JSONResponse:
    """The API's error shape, status 429, and when to come back."""
    return JSONResponse(
        {"detail": f"server busy: {in_flight} requests in progress in this process "
                   f"(backpressure.max_in_flight); retry after {settings.retry_after} s"},
        status_code=429,
        headers={"Retry-After": str(settings.retry_after)},
    )


class Backpressure:
    """The ASGI middleware holding one process's count of requests in progress."""

    def __init__(self, app: ASGIApp, settings: BackpressureSettings) -> None:
        self.app = app
        self.settings = settings
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in NEVER_SHED:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.settings.max_in_flight:
            scope[SHED_KEY] = True
            await busy_response(self.in_flight, self.settings)(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
