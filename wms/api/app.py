"""The FastAPI application: routers under /api/v1, errors mapped once.

``create_app(runtime)`` takes everything explicitly, so tests build an app
on a SQLite runtime with their own clock.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Callable

import anyio.to_thread

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from wms import __version__
from wms.api import (
    routes_console, routes_jobs, routes_matcher, routes_pilots, routes_pools, routes_quotas, routes_reservations,
    routes_sandboxes,
)
from wms.api import metrics, pilot_calls
from wms.api.backpressure import Backpressure
from wms.api.console import mount_console
from wms.api.deps import public
from wms.api import openapi
from wms.api.responses import Health
from wms.api.guard import DATABASE_AWAY, InputGuard, database_error_response, error_body, error_response, one_line
from wms.core.errors import WmsError
from wms.db.engine import database_problem
from wms.services.runtime import Runtime

API_PREFIX = "/api/v1"
# Seconds a 503 of the health check asks a caller to wait before asking again.
HEALTH_RETRY_AFTER_S = 5

log = logging.getLogger("wms.api")

API_DESCRIPTION = """Jobs, task queues and pilots (DIRAC) under Grid Engine's resource policy.

Every call but `/health` carries a bearer token (`Authorization: Bearer ...`; the
Authorize button here takes one): make one with `wms admin token create`. Every
error answers `{"detail": "one line: what, where, why"}` with a 4xx status for
anything the caller sent; 422 adds `errors`, one entry per wrong field.
"""


def validation_detail(error: dict) -> str:
    """The one line of a 422: where (``jdls.0.text``, ``query.limit``; ``body``
    for the body as a whole) and what pydantic found wrong there."""
    loc = [str(p) for p in error.get("loc", ())]
    if error.get("type") == "json_invalid":
        # pydantic's location is then the character offset in the body
        reason = (error.get("ctx") or {}).get("error", "")
        at = f" at character {loc[-1]}" if len(loc) > 1 else ""
        return one_line(f"body: not valid JSON{at}" + (f": {reason}" if reason else ""))
    where = ".".join(p for p in loc if p != "body") or "body"
    return one_line(f"{where}: {error.get('msg')}")


def fixed_paths(app: FastAPI) -> dict[str, list[str]]:
    """The methods of each route path without parameters (``/api/v1/jobs/kill``: POST)."""
    out: dict[str, list[str]] = {}
    for route in openapi.api_routes(app):
        if "{" not in route.path_format:
            out[route.path_format] = sorted({*out.get(route.path_format, ()), *route.original_route.methods})
    return out


def misread_methods(request: Request, exc: RequestValidationError) -> list[str]:
    """The methods of the fixed path ``request`` named, when a route with a
    parameter took it for a value with another method: ``GET /jobs/kill``
    read as the job ``kill`` (422) is a method ``/jobs/kill`` does not take
    (405, as for any fixed path). Empty when that is not what happened."""
    if not any(error.get("loc", ("",))[0] == "path" for error in exc.errors()):
        return []
    app = request.app
    paths = getattr(app.state, "fixed_paths", None)
    if paths is None:
        paths = app.state.fixed_paths = fixed_paths(app)
    allowed = paths.get(request.url.path, [])
    return allowed if request.method not in allowed else []


def create_app(runtime: Runtime, clock: Callable[[], datetime] | None = None) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The routes run in request threads (anyio's, 40 by default). More of
        # them than the pool keeps connections made each one past the pool
        # open and close a connection per request: a fork of a PostgreSQL
        # backend, a MariaDB handshake in Python; under 32 pilots and more
        # that doubled the server's CPU per match. The others wait in the
        # event loop, which costs nothing, up to backpressure.max_in_flight.
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = runtime.config.settings.request_threads()
        metrics.REQUEST_THREADS.set(limiter.total_tokens)
        metrics.MATCH_THREADS.set(runtime.config.settings.backpressure.match_threads)
        yield

    app = FastAPI(title="WMS", version=__version__, docs_url="/docs", openapi_url="/openapi.json",
                  description=API_DESCRIPTION, lifespan=lifespan)
    app.state.runtime = runtime
    app.state.clock = clock

    app.add_middleware(InputGuard, runtime=runtime)
    # Added after, so run before: shed load before any work, count everything.
    app.add_middleware(Backpressure, settings=runtime.config.settings.backpressure)
    metrics.install(app, runtime)

    @app.exception_handler(WmsError)
    def wms_error(request: Request, exc: WmsError) -> JSONResponse:
        return error_response(exc)

    def database_error(request: Request, exc: Exception) -> JSONResponse:
        return database_error_response(runtime, exc)

    for away in DATABASE_AWAY:
        app.add_exception_handler(away, database_error)

    @app.exception_handler(HTTPException)
    def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        """Starlette's own refusals (no such path, method not allowed) in the one shape, saying what to do."""
        path = one_line(request.url.path)
        detail = {404: f"no such path: {path} (the API is under {API_PREFIX}; /docs lists every route)",
                  405: f"method {request.method} is not allowed on {path} (/docs lists what is)"}
        return JSONResponse(error_body(detail.get(exc.status_code, str(exc.detail))),
                            status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        allowed = misread_methods(request, exc)
        if allowed:
            return http_error(request, HTTPException(405, headers={"Allow": ", ".join(allowed)}))
        # Only where and what: "ctx" may hold the validator's exception object
        # and "input" bytes, which JSON cannot carry, or a whole JDL.
        errors = [{"type": e.get("type"), "loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg"))}
                  for e in exc.errors()]
        return JSONResponse(error_body(validation_detail(exc.errors()[0]), errors=errors), status_code=422)

    @app.get(f"{API_PREFIX}/health", tags=["health"], dependencies=[Depends(public)], **openapi.answers(Health, 503))
    def health() -> JSONResponse:
        """"ok" only when the database answers; else 503 and what is not ok.

        Public (a load balancer asks it), so the answer names the part that
        fails and leaves the driver's reason, which names hosts, to the log.
        """
        problem = database_problem(runtime.engine)
        if problem is None:
            return JSONResponse({"status": "ok", "version": __version__, "database": "ok"})
        log.warning("health: the database does not answer: %s", problem)
        return JSONResponse(error_body("database: not answering (the server log says why)", status="not ok",
                                       version=__version__, database="not answering"),
                            status_code=503, headers={"Retry-After": str(HEALTH_RETRY_AFTER_S)})

    app.include_router(routes_jobs.router, prefix=API_PREFIX)
    app.include_router(routes_jobs.match_router, prefix=API_PREFIX)
    app.include_router(routes_pools.router, prefix=API_PREFIX)
    app.include_router(routes_matcher.router, prefix=API_PREFIX)
    app.include_router(routes_pilots.router, prefix=API_PREFIX)
    app.include_router(routes_reservations.router, prefix=API_PREFIX)
    app.include_router(routes_quotas.router, prefix=API_PREFIX)
    app.include_router(routes_sandboxes.router, prefix=API_PREFIX)
    app.include_router(routes_console.router, prefix=API_PREFIX)
    mount_console(app, [entry.issuer for entry in runtime.config.settings.identity_providers
                        if entry.console_client_id is not None])
    openapi.install(app)
    pilot_calls.install(app, runtime, [f"{API_PREFIX}/matcher/request-job", f"{API_PREFIX}/matcher/request-jobs"])
    return app
