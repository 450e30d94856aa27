"""The access policy of every route of an app, read from the routes themselves.

FastAPI (from 0.12x) keeps an included router as one entry of ``app.routes``
holding the router and its prefix, rather than copying its routes into the
app; :func:`api_routes` walks both shapes, so the meta-test of policies and
the console's "what may I do" see every route.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from fastapi.routing import APIRoute

from wms.api.deps import POLICY_ATTRIBUTE


def api_routes(routes: Iterable[Any], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """(full path, route) of every APIRoute, through included routers."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
        elif hasattr(route, "original_router"):   # an included router (newer FastAPI)
            context = getattr(route, "include_context", None)
            yield from api_routes(route.original_router.routes, prefix + getattr(context, "prefix", ""))


def policy(route: APIRoute) -> tuple[str, ...] | None:
    """The roles the route's policy admits (() for a public route); None: the route declares none."""
    for dependency in route.dependant.dependencies:
        if hasattr(dependency.call, POLICY_ATTRIBUTE):
            return getattr(dependency.call, POLICY_ATTRIBUTE)
    return None


def role_table(routes: Iterable[Any], prefix: str) -> dict[str, tuple[str, ...]]:
    """"METHOD /path" below ``prefix`` -> the roles its policy admits."""
    table: dict[str, tuple[str, ...]] = {}
    for path, route in api_routes(routes):
        if path.startswith(prefix):
            for method in route.methods:
                table[f"{method} {path[len(prefix):]}"] = policy(route) or ()
    return table
