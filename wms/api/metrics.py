"""GET /metrics: the Prometheus text format (docs/metrics.md).

Three sources in one answer:

* what this module counts for every HTTP request: requests by method,
  route template and status, their latency, requests in progress. The
  route is the template (``/api/v1/jobs/{job_id}``), never the raw path, and
  a path no route knows is ``unmatched``: the label values stay few;
* what the services count (wms/services/telemetry.py): match requests by
  outcome and deciding layer, claim retries, database connections in use;
* what the database says at the moment of the scrape: waiting jobs per task
  queue and pilots by state. Those are read by whichever process answers, so
  they are the same whatever the number of processes.

``wms server --workers N``: each worker writes its counts to files in
PROMETHEUS_MULTIPROC_DIR (prometheus-client's multiprocess mode, set up by
:func:`shared_metrics_directory` before the workers start), and the worker
that answers a scrape adds up every worker's, so any worker gives the
totals. Without workers the process's own registry is read.

No token is needed: Prometheus scrapes with none by default, and nothing
here names a user or a job. Keep /metrics to the monitoring network at the
reverse proxy (docs/deployment.md).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import Depends, FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy.exc import SQLAlchemyError
from starlette.responses import Response
from starlette.routing import compile_path

from wms.api.deps import public
from wms.api.worker_directory import directory_in_environment
from wms.services import telemetry
from wms.services.runtime import Runtime

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("wms.api")

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# From a refused request (a millisecond) to a pilot queued behind a thousand others (seconds).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUESTS = Counter("wms_http_requests", "HTTP requests answered, by method, route template and status",
                   ["method", "route", "status"])
LATENCY = Histogram("wms_http_request_duration_seconds", "Time to answer an HTTP request, by method and route",
                    ["method", "route"], buckets=LATENCY_BUCKETS)
PROCESSES = Gauge("wms_server_processes", "Server processes (workers) answering requests",
                  multiprocess_mode="livesum")
IN_FLIGHT = Gauge("wms_http_requests_in_flight", "HTTP requests the server processes are working on",
                  multiprocess_mode="livesum")
REQUEST_THREADS = Gauge("wms_request_threads", "Requests the server processes run at once, pilots' job requests "
                        "aside (backpressure.request_threads each)", multiprocess_mode="livesum")
RECONNECTS = Counter("wms_connections_rebalanced", "Kept-alive connections a worker over its share asked "
                     "to connect again (Connection: close)")
MATCH_THREADS = Gauge("wms_match_threads", "Pilots' job requests the server processes run at once "
                      "(backpressure.match_threads each)", multiprocess_mode="livesum")


class Templates:
    """The API's path templates, from its OpenAPI description (read once, when first needed)."""

    def __init__(self, api: FastAPI) -> None:
        self.api = api
        self._patterns: list[tuple[re.Pattern[str], str]] | None = None
        self._known: frozenset[str] = frozenset()

    def patterns(self) -> list[tuple[re.Pattern[str], str]]:
        if self._patterns is None:
            try:
                paths = list(self.api.openapi().get("paths", {}))
            except Exception:  # noqa: BLE001 - counting must never break an answer
                log.exception("metrics: the API's path templates could not be read; unrouted requests "
                              "are counted as unmatched")
                paths = []
            self._known = frozenset(paths)
            self._patterns = [(compile_path(t)[0], t) for t in paths]
        return self._patterns

    def known(self, template: str) -> bool:
        self.patterns()
        return template in self._known


def route_template(templates: Templates, scope: Scope) -> str:
    """The template of the route that served (or would serve) the request, or ``unmatched``."""
    route = scope.get("route")
    path = scope.get("path", "")
    if route is not None:
        template = _with_prefix(route, path)
        # Only the API's own templates: a prefix taken from a path is never a label value.
        return template if templates.known(template) else getattr(route, "path", UNMATCHED)
    # Not routed: refused before routing (load shedding, the input guard) or
    # unknown. The API's templates say which route it was meant for.
    for regex, template in templates.patterns():
        if regex.match(path):
            return template
    return UNMATCHED


def _with_prefix(route: Any, path: str) -> str:
    """The route's template with the prefix of the router it was included
    under (``/api/v1``): the part of ``path`` before what the route matched.
    The route object FastAPI leaves in the scope knows its own part only."""
    template = getattr(route, "path", UNMATCHED)
    regex = getattr(route, "path_regex", None)
    if regex is None or regex.match(path):
        return template
    cut = path.find("/", 1)
    while cut != -1:
        if regex.match(path[cut:]):
            return path[:cut] + template
        cut = path.find("/", cut + 1)
    return template


class HttpMetrics:
    """The ASGI middleware counting every HTTP request (the outermost one, so refusals count too)."""

    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self.templates = Templates(api)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500        # what the client gets if nothing is sent (the server closes the connection)
        started = time.perf_counter()
        recorded = False

        def record() -> None:
            nonlocal recorded
            recorded = True
            IN_FLIGHT.dec()
            method = scope.get("method", "")
            method = method if method in METHODS else "other"
            route = route_template(self.templates, scope)
            REQUESTS.labels(method, route, str(status)).inc()
            LATENCY.labels(method, route).observe(time.perf_counter() - started)

        async def watching_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body") and not recorded:
                # Counted before the last byte leaves: a client that has its
                # answer finds it counted in its next scrape.
                record()
            await send(message)

        IN_FLIGHT.inc()
        try:
            await self.app(scope, receive, watching_send)
        finally:
            if not recorded:
                record()


class DatabaseCollector:
    """Waiting jobs per task queue and pilots by state, read when scraped."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("wms_metrics_database_up", "1 when the database answered this scrape, else 0")
        try:
            counts = telemetry.database_counts(self.runtime.engine)
        except SQLAlchemyError as exc:
            log.warning("metrics: the database did not answer: %s", str(exc).splitlines()[0])
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        waiting = GaugeMetricFamily("wms_waiting_jobs", "Waiting jobs per task queue (the largest ones; "
                                    "the rest summed as task_queue=\"other\")", labels=["task_queue", "vo"])
        for tq, vo, n in counts.waiting:
            waiting.add_metric([tq, vo], n)
        yield waiting
        pilots = GaugeMetricFamily("wms_pilots", "Pilots the SiteDirector submitted, by state", labels=["state"])
        for state, n in sorted(counts.pilots.items()):
            pilots.add_metric([state], n)
        yield pilots
        empty = GaugeMetricFamily("wms_pilots_ran_nothing", "Pilots the SiteDirector submitted that ended "
                                  "without running a job")
        empty.add_metric([], counts.ran_nothing)
        yield empty


class _ThisProcess:
    """The process's own registry, as a collector of the scrape's registry."""

    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()


def forget_dead_processes(directory: str) -> None:
    """Drop the live gauges of workers that died (uvicorn starts new ones):
    their connections and requests are no longer in use. Their counters stay,
    as totals must."""
    for path in Path(directory).glob("gauge_live*_*.db"):
        try:
            pid = int(path.stem.rsplit("_", 1)[1])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, directory)
        except PermissionError:
            continue


def exposition(runtime: Runtime) -> bytes:
    """The whole text of one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    directory = os.environ.get(MULTIPROCESS_ENV)
    if directory:
        forget_dead_processes(directory)
        multiprocess.MultiProcessCollector(registry, path=directory)
    else:
        registry.register(_ThisProcess())  # type: ignore[arg-type]
    registry.register(DatabaseCollector(runtime))  # type: ignore[arg-type]
    return generate_latest(registry)


def install(app: FastAPI, runtime: Runtime) -> None:
    """Count every request of ``app`` and serve GET /metrics."""
    telemetry.watch_pool(runtime.engine)
    PROCESSES.inc()
    app.add_middleware(HttpMetrics, api=app)
    limiter: list[anyio.CapacityLimiter] = []

    @app.get("/metrics", tags=["metrics"], dependencies=[Depends(public)], include_in_schema=False)
    async def metrics() -> Response:
        # A thread of its own (one scrape at a time): a scrape never waits
        # behind the request threads of a busy server.
        if not limiter:
            limiter.append(anyio.CapacityLimiter(1))
        body = await anyio.to_thread.run_sync(exposition, runtime, limiter=limiter[0])
        return Response(body, media_type=CONTENT_TYPE_LATEST)


@contextmanager
def shared_metrics_directory() -> Iterator[str]:
    """PROMETHEUS_MULTIPROC_DIR for the worker processes about to start:
    the one in the environment if set (its owner empties it between runs),
    else a new directory removed at the end."""
    with directory_in_environment(MULTIPROCESS_ENV, "wms-metrics-") as directory:
        yield str(directory)
