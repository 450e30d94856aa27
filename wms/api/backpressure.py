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

A request counts only while the server works on it: from its headers to
its answer, but not while the server waits for its body. A client that
sends ``Content-Length: 100000`` and ten bytes holds a socket, not a place:
the wait gives the place up (only when it really waits: a body already
there keeps it), and the whole body takes one again, or is answered 429
if the process filled meanwhile. The body's own deadline ends the wait
(408: deadlines.py).

One caller holds at most its share of the places: ``identity_share`` of
``max_in_flight`` (a quarter: 8 of 32), any path; its next request is
answered 429 while the others are served. The reports of running jobs
(Running, Done, heartbeats, output, application status) may find twice
the share in progress: a pilot of 8 slots whose short jobs all end at
once sends 8 reports, and one refused waits seconds with its slot idle. A caller is its bearer token as
sent, compared as bytes in the event loop (no database): a forged token is
a caller of its own only until the route refuses it, at once. Requests
without a token (the console's pages, /docs) are callers by client
address. And one caller sends at most ``bodies_per_identity`` bodies to a
process at once (each may hold ``limits.request_bytes`` of memory until
it is whole): the next is refused at its headers.

The health check and the metrics are never shed: a load balancer must not
take a busy server for a dead one, and a busy server is when its metrics
matter most. Nor are the web console's own files (``/ui``): static, read
without a thread or the database, and fetched by a browser a dozen at
once without a token, so that every person behind one proxy address would
be one caller over its share, and the console would load half its code.

How long to wait: ``retry_after`` seconds while few are refused. When
many are, long enough that all those waiting come back at no more than a
twentieth of the most this process has answered in a second (up to
``retry_after_max``).
A refusal is not free: a pilot makes a new connection for each request,
and accepting it, refusing and closing it costs the server about 0.2 ms
of CPU, an eighth of a match, and the pilot's machine as much again
(docs/journal/benchmarks.md, "Refusals held to a twentieth"). A thousand pilots
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

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Generator, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

from wms.api.deadlines import body_deadline, body_timeout
from wms.config.models import BackpressureSettings
from wms.core.errors import TooManyRequests

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: Who a request is: ("token", the bearer token) or ("address", the client's address).
Caller = tuple[str, Any]

#: Paths never refused for load, and the prefix of the console's files.
NEVER_SHED = frozenset({"/api/v1/health", "/metrics"})
CONSOLE_FILES = "/ui"


def never_shed(path: str) -> bool:
    return path in NEVER_SHED or path == CONSOLE_FILES or path.startswith(CONSOLE_FILES + "/")
#: Paths of new work, refused first.
NEW_WORK = frozenset({"/api/v1/matcher/request-job", "/api/v1/matcher/request-jobs"})
#: How many times max_in_flight any other request may find in progress.
OTHERS_HEADROOM = 2
#: The last part of the path of a running job's report (POST /api/v1/jobs/{id}/...).
JOB_REPORTS = frozenset({"pilot-status", "heartbeat", "output", "application-status"})


def is_job_report(path: str) -> bool:
    """A report of a running job: what a pilot of several slots sends for
    each of its jobs at once, and what must not wait behind new work."""
    return path.startswith("/api/v1/jobs/") and path.rsplit("/", 1)[-1] in JOB_REPORTS
#: The refused may come back at most at this share of the rate a process answers.
REFUSED_SHARE = 0.05


def busy(in_flight: int, wait: int) -> TooManyRequests:
    """The process is full."""
    return TooManyRequests(f"server busy: {in_flight} requests in progress in this process "
                           f"(backpressure.max_in_flight); retry after {wait} s", retry_after=wait)


def over_share(caller: Caller, held: int, settings: BackpressureSettings, report: bool = False) -> TooManyRequests:
    """One caller holds its share of the process (twice it, for a job's report)."""
    twice = ", twice that for the reports of running jobs" if report else ""
    return TooManyRequests(
        f"server busy for you: this {caller[0]} has {held} requests in progress in this process, "
        f"its share of {settings.max_in_flight} (backpressure.identity_share {settings.identity_share:g}{twice}); "
        f"retry after {settings.retry_after} s", retry_after=settings.retry_after)


def too_many_bodies(caller: Caller, sending: int, settings: BackpressureSettings) -> TooManyRequests:
    """One caller is sending as many bodies as it may at once."""
    return TooManyRequests(
        f"too many requests at once: this {caller[0]} is sending {sending} request bodies to this process, "
        f"the most one may (backpressure.bodies_per_identity); retry after {settings.retry_after} s",
        retry_after=settings.retry_after)


def refusal_response(refusal: TooManyRequests) -> JSONResponse:
    """The API's error shape, status 429, and when to come back."""
    return JSONResponse({"detail": str(refusal)}, status_code=429,
                        headers={"Retry-After": str(refusal.retry_after)})


def request_head(scope: Scope) -> tuple[Caller, bool, bytes | None]:
    """What the headers say, in one pass: who sends the request, whether a
    body follows (the input guard's rule), and its Content-Length.

    The caller is known without a database: the bearer token as sent (the
    first Authorization header, as the routes read it), or the client's
    address for a request without one. A forged token is a caller of its
    own only until its request is refused, at once, for it."""
    caller: Caller | None = None
    length: bytes | None = None
    chunked = False
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            if caller is None:
                token = value.partition(b" ")[2].strip()
                caller = ("token", token) if token else ("address", None)
        elif name == b"content-length":
            length = value
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
    if caller is None or caller[1] is None:
        client = scope.get("client")
        caller = ("address", client[0] if client else "")
    return caller, chunked or (length is not None and length.strip() not in (b"", b"0")), length


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
    """The ASGI middleware holding one process's count of requests in
    progress, each caller's part of it, and the bodies each caller is sending."""

    def __init__(self, app: ASGIApp, settings: BackpressureSettings) -> None:
        self.app = app
        self.settings = settings
        self.share = settings.share()
        self.in_flight = 0
        self.held: dict[Caller, int] = {}        # requests in progress, by caller
        self.sending: dict[Caller, int] = {}     # bodies being received, by caller
        self.window = Window()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or never_shed(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        self.window.roll(time.monotonic())
        limit = self.settings.max_in_flight
        path = scope.get("path", "")
        if path not in NEW_WORK:
            limit *= OTHERS_HEADROOM
        caller, with_body, length = request_head(scope)
        report = is_job_report(path)
        refusal = self.refusal(caller, limit, report)
        if refusal is None and with_body and self.sending.get(caller, 0) >= self.settings.bodies_per_identity:
            refusal = too_many_bodies(caller, self.sending[caller], self.settings)
        if refusal is not None:
            await refusal_response(refusal)(scope, receive, send)
            return
        request = Admitted(self, caller, limit, report)
        if with_body:
            request.start_sending(receive, length)
            receive = request.receive_body
        try:
            await self.app(scope, receive, send)
        finally:
            request.end()

    def refusal(self, caller: Caller, limit: int, report: bool = False) -> TooManyRequests | None:
        """Why a request may not start now (or again, once its body came), or None.
        ``report``: a running job's report, which may find twice its caller's share in progress."""
        if self.in_flight >= limit:
            window = self.window
            wait = retry_after(self.settings, window.away(), max(window.answered, window.most_answered))
            window.told += wait
            return busy(self.in_flight, wait)
        held = self.held.get(caller, 0)
        if held >= self.share * (OTHERS_HEADROOM if report else 1):
            return over_share(caller, held, self.settings, report)
        return None


class Admitted:
    """One admitted request: counted in progress from its headers to its
    answer, except while the server waits for its body (released when the
    wait suspends, admitted again, or refused, once the body is whole),
    and in its caller's bodies being sent until the body is whole."""

    __slots__ = ("door", "caller", "limit", "report", "counted", "sending", "receive", "length", "asked_at",
                 "received", "timer", "expired")

    def __init__(self, door: Backpressure, caller: Caller, limit: int, report: bool = False) -> None:
        self.door = door
        self.caller = caller
        self.limit = limit
        self.report = report
        self.sending = False
        self.receive: Receive | None = None
        self.length: bytes | None = None
        self.asked_at: float | None = None
        self.received = 0
        self.timer: asyncio.TimerHandle | None = None
        self.expired = False
        self.counted = False
        self.count()

    def count(self) -> None:
        door = self.door
        door.in_flight += 1
        door.held[self.caller] = door.held.get(self.caller, 0) + 1
        self.counted = True

    def release(self) -> None:
        if not self.counted:
            return
        self.counted = False
        door = self.door
        door.in_flight -= 1
        left = door.held[self.caller] - 1
        if left:
            door.held[self.caller] = left
        else:
            del door.held[self.caller]

    def start_sending(self, receive: Receive, length: bytes | None) -> None:
        """The body is to come, through ``receive``; ``Content-Length`` says how long."""
        self.sending = True
        self.receive = receive
        self.length = length
        sending = self.door.sending
        sending[self.caller] = sending.get(self.caller, 0) + 1

    def stop_sending(self) -> None:
        if not self.sending:
            return
        self.sending = False
        sending = self.door.sending
        left = sending[self.caller] - 1
        if left:
            sending[self.caller] = left
        else:
            del sending[self.caller]

    def end(self) -> None:
        was_counted = self.counted
        self.release()
        self.stop_sending()
        if was_counted:
            self.door.window.answered += 1

    async def receive_body(self) -> Message:
        """The app's ``receive`` for a request with a body: the body's
        deadline kept, the request released while it waits for the client.

        Nothing is scheduled for a body already there (nearly every one):
        only a wait that suspends releases the request and sets the
        deadline's timer, which cancels the wait when it passes
        (:class:`Suspensions`). ``asyncio.timeout`` on every read cost a
        pilot's request about five times what the rest of this middleware
        does, a ``call_soon`` to detect the suspension twice."""
        assert self.receive is not None
        if not self.sending:                       # the body is whole: a wait for a disconnect
            return await self.receive()
        if self.asked_at is None:
            self.asked_at = time.monotonic()
        try:
            message = await Suspensions(self.receive(), self.waits)
        except asyncio.CancelledError:
            if not self.expired:
                raise
            self.expired = False
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.stop_sending()
            raise body_timeout(self.received, self.length, time.monotonic() - self.asked_at,
                               self.door.settings) from None
        finally:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
        if message["type"] != "http.request":      # the client went away
            self.stop_sending()
            return message
        self.received += len(message.get("body", b""))
        if not message.get("more_body", False):
            self.stop_sending()
            if not self.counted:
                refusal = self.door.refusal(self.caller, self.limit, self.report)
                if refusal is not None:
                    raise refusal
                self.count()
        return message

    def waits(self) -> None:
        """The server waits for the client: the request is not in progress,
        and the wait may last until the body's deadline."""
        self.release()
        if self.timer is None and self.asked_at is not None:
            deadline = body_deadline(self.asked_at, self.received, self.door.settings)
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(deadline - time.monotonic(), self.expire, asyncio.current_task())

    def expire(self, task: asyncio.Task | None) -> None:
        self.timer = None
        self.expired = True
        if task is not None:
            task.cancel()


class Suspensions:
    """``await Suspensions(awaitable, on_suspend)``: the awaitable's result,
    with ``on_suspend()`` called when it first suspends (and not at all if it
    completes at once). What ``yield from`` does (PEP 380), with a look at
    the first step."""

    __slots__ = ("awaitable", "on_suspend")

    def __init__(self, awaitable: Awaitable[Message], on_suspend: Callable[[], None]) -> None:
        self.awaitable = awaitable
        self.on_suspend = on_suspend

    def __await__(self) -> Generator[Any, Any, Message]:
        steps = self.awaitable.__await__()
        try:
            step = steps.send(None)
        except StopIteration as done:
            return done.value
        self.on_suspend()
        while True:
            try:
                sent = yield step
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the task (a cancellation): passed on
                try:
                    step = steps.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    step = steps.send(sent)
                except StopIteration as done:
                    return done.value
