"""Dependencies every route takes: the runtime, the clock and the caller.

``require(*roles)`` is the access policy of a route; tests/api checks that
every route declares one (``public`` for the few that need no token).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Callable

from fastapi import Depends, Request

from wms.core.errors import Forbidden, Unauthorized
from wms.core.identity import Identity
from wms.services.runtime import Runtime
from wms.services.tokens import authenticate

POLICY_ATTRIBUTE = "wms_policy"


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


def get_now(request: Request) -> datetime:
    clock = getattr(request.app.state, "clock", None)
    return clock() if clock is not None else datetime.now(timezone.utc)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
NowDep = Annotated[datetime, Depends(get_now)]


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
    return token.strip()


def require(*roles: str) -> Callable[..., Identity]:
    """A dependency admitting callers whose token has one of ``roles``."""

    def check(request: Request, runtime: RuntimeDep, now: NowDep) -> Identity:
        identity = authenticate(runtime.engine, _bearer(request), now, runtime.caches.verified_tokens)
        if identity.role not in roles:
            raise Forbidden(f"role {identity.role!r} may not do this (needs {' or '.join(roles)})")
        return identity

    setattr(check, POLICY_ATTRIBUTE, roles)
    return check


def public() -> None:
    """The policy of routes that need no token (health)."""


setattr(public, POLICY_ATTRIBUTE, ())
