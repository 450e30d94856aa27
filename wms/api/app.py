"""The FastAPI application: routers under /api/v1, errors mapped once.

``create_app(runtime)`` takes everything explicitly, so tests build an app
on a SQLite runtime with their own clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError

from wms import __version__
from wms.api import (
    routes_console, routes_jobs, routes_matcher, routes_pilots, routes_pools, routes_quotas, routes_reservations,
)
from wms.api.console import mount_console
from wms.api.deps import public
from wms.api.guard import InputGuard, error_response, one_line
from wms.core.errors import Unavailable, WmsError
from wms.db.engine import is_statement_timeout
from wms.services.runtime import Runtime

API_PREFIX = "/api/v1"


def create_app(runtime: Runtime, clock: Callable[[], datetime] | None = None) -> FastAPI:
    app = FastAPI(title="WMS", version=__version__, docs_url="/docs", openapi_url="/openapi.json")
    app.state.runtime = runtime
    app.state.clock = clock

    app.add_middleware(InputGuard, runtime=runtime)

    @app.exception_handler(WmsError)
    def wms_error(request: Request, exc: WmsError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(OperationalError)
    def database_error(request: Request, exc: OperationalError) -> JSONResponse:
        if not is_statement_timeout(exc):
            raise exc  # the guard logs it and answers 500 with a request id
        timeout = runtime.config.settings.limits.statement_timeout
        return error_response(Unavailable(f"the database took longer than {timeout:g} s "
                                          "(limits.statement_timeout); nothing was changed"))

    @app.exception_handler(RequestValidationError)
    def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        # Only where and what: "ctx" may hold the validator's exception object
        # and "input" bytes, which JSON cannot carry, or a whole JDL.
        errors = [{"type": e.get("type"), "loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg"))}
                  for e in exc.errors()]
        return JSONResponse({"detail": one_line(f"{where}: {first.get('msg')}"), "errors": errors}, status_code=422)

    @app.get(f"{API_PREFIX}/health", tags=["health"], dependencies=[Depends(public)])
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    app.include_router(routes_jobs.router, prefix=API_PREFIX)
    app.include_router(routes_jobs.match_router, prefix=API_PREFIX)
    app.include_router(routes_pools.router, prefix=API_PREFIX)
    app.include_router(routes_matcher.router, prefix=API_PREFIX)
    app.include_router(routes_pilots.router, prefix=API_PREFIX)
    app.include_router(routes_reservations.router, prefix=API_PREFIX)
    app.include_router(routes_quotas.router, prefix=API_PREFIX)
    app.include_router(routes_console.router, prefix=API_PREFIX)
    mount_console(app)
    return app
