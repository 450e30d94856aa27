"""The roles each route's own access policy admits, read from the app, so
that the console offers exactly what the server would let the caller do."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from wms.api.deps import POLICY_ATTRIBUTE


def role_table(app: FastAPI, prefix: str) -> dict[str, tuple[str, ...]]:
    """"METHOD /path" below ``prefix`` -> the roles its policy admits (() for a public route)."""
    table: dict[str, tuple[str, ...]] = {}
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute) or not context.path.startswith(prefix):
            continue
        roles = next((getattr(d.call, POLICY_ATTRIBUTE) for d in route.dependant.dependencies
                      if hasattr(d.call, POLICY_ATTRIBUTE)), ())
        for method in context.methods or ():
            table[f"{method} {context.path[len(prefix):]}"] = roles
    return table
