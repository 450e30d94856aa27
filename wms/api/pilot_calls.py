"""The pilot's job requests, answered without FastAPI's per-request machinery.

Every pilot of the grid posts ``/matcher/request-job`` (or ``request-jobs``)
in a loop, so what a request costs besides the match is paid thousands of
times a second. FastAPI's path for it (routing through every route, the
dependency solver, a hand-over to a request thread per dependency, the
copy of the answer by ``jsonable_encoder``) cost the server as much CPU as
the match itself (docs/benchmarks.md). This middleware, the innermost,
answers the common case directly with the same parts:

* the body read by the input guard, validated by the route's own model;
* the caller from the verified-token cache, admitted by the route's own
  policy (``require``);
* the route's own function, run on one of the process's match threads
  (``backpressure.match_threads``), a lane of their own (lane.py): a
  pilot waits for no submission, and two threads match faster than ten,
  which spent their time taking the interpreter lock from each other;
* errors answered as the app answers them (``error_response``,
  ``database_error_response``).

Anything else (a body the model refuses, a token the cache does not hold
or whose role the route does not admit) goes on to FastAPI unchanged,
which reads, refuses and answers it as for every route: the uncommon
cases keep one implementation, and the OpenAPI document still describes
these routes from their FastAPI declaration.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wms.api.deps import POLICY_ATTRIBUTE, _bearer, clock_now
from wms.api.guard import DATABASE_AWAY, database_error_response, error_response, replay
from wms.api.lane import Lane
from wms.api.openapi import api_routes
from wms.core.errors import Unauthorized, WmsError
from wms.services.runtime import Runtime
from wms.services.tokens import cached_identity

Handler = Callable[..., Any]


@dataclass(frozen=True)
class PilotCall:
    """One route answered here: its model, the roles it admits, its function."""

    route: APIRoute
    model: type[BaseModel]
    roles: tuple[str, ...]
    handler: Handler


def pilot_call(route: APIRoute) -> PilotCall:
    """What FastAPI knows of ``route``: a function of (body, runtime, now, caller)
    whose body is one model and whose caller is ``require``'d."""
    if list(inspect.signature(route.endpoint).parameters) != ["body", "runtime", "now", "caller"]:
        raise ValueError(f"{route.path}: the route must take (body, runtime, now, caller), nothing from its path")
    model = typing.get_type_hints(route.endpoint).get("body")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ValueError(f"{route.path}: the body must be one pydantic model")
    roles = next((getattr(dep.call, POLICY_ATTRIBUTE) for dep in route.dependant.dependencies
                  if hasattr(dep.call, POLICY_ATTRIBUTE)), None)
    if not roles:
        raise ValueError(f"{route.path}: needs a policy with roles")
    return PilotCall(route, model, roles, route.endpoint)


class PilotCalls:
    """The ASGI middleware; ``calls`` maps full paths (``/api/v1/matcher/request-job``) to their routes."""

    def __init__(self, app: ASGIApp, runtime: Runtime, calls: dict[str, PilotCall]) -> None:
        self.app = app
        self.runtime = runtime
        self.calls = calls
        self.lane = Lane(runtime.config.settings.backpressure.match_threads, "match")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = self.calls.get(scope.get("path", "")) if scope["type"] == "http" else None
        if call is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        message = await receive()
        body = message.get("body", b"")
        if message["type"] != "http.request" or message.get("more_body", False):
            await self.app(scope, replay(message, receive), send)   # not one whole body: FastAPI reads it
            return
        answered = await self.answer(call, scope, body, send)
        if not answered:
            await self.app(scope, replay(message, receive), send)

    async def answer(self, call: PilotCall, scope: Scope, body: bytes, send: Send) -> bool:
        """Answer the request, or False to leave it, untouched, to FastAPI."""
        request = Request(scope)
        try:
            payload = call.model.model_validate(json.loads(body))
        except (ValueError, ValidationError, RecursionError):
            return False
        now = clock_now(request)
        try:
            token = _bearer(request)
        except Unauthorized:
            return False
        identity = cached_identity(self.runtime.engine, token, now, self.runtime.caches.verified_tokens)
        if identity is None or identity.role not in call.roles:
            return False
        scope["route"] = call.route     # what FastAPI would have left there (the metrics' label)
        try:
            response = await self.lane.run(call.handler, payload, self.runtime, now, identity)
        except WmsError as exc:
            response = error_response(exc)
        except DATABASE_AWAY as exc:
            response = database_error_response(self.runtime, exc)
        await response(scope, _nothing, send)
        return True


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


def calls_of(app: FastAPI, paths: list[str]) -> dict[str, PilotCall]:
    """The POST routes of ``app`` at ``paths`` (full paths), as PilotCalls answers them."""
    routes = {ctx.path_format: ctx.original_route for ctx in api_routes(app) if "POST" in ctx.original_route.methods}
    missing = [p for p in paths if p not in routes]
    if missing:
        raise ValueError(f"no such POST routes: {missing}")
    return {p: pilot_call(routes[p]) for p in paths}


def install(app: FastAPI, runtime: Runtime, paths: list[str]) -> None:
    """Answer ``paths`` here, inside every other middleware of ``app``."""
    # Appended: the last of the user middleware is the innermost, so the
    # input guard, load shedding and metrics see these requests as any other.
    app.user_middleware.append(Middleware(PilotCalls, runtime=runtime, calls=calls_of(app, paths)))

