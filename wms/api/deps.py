"""Dependencies every route takes: the runtime, the clock and the caller.

``require(*roles)`` is the access policy of a route; tests/api checks that
every route declares one (``public`` for the few that need no token).

The dependencies are coroutines: FastAPI hands a plain function to a
request thread and back, which for these (an attribute, the clock, a
token found in the cache) cost more than the work itself. Only a token
the cache does not hold is read on a thread.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Callable

import anyio.to_thread
from fastapi import Depends, Request

from wms.core.errors import Forbidden, Unauthorized
from wms.core.identity import Identity
from wms.core.oidc_tokens import looks_like_jwt
from wms.services import job_tokens
from wms.services.runtime import Runtime
from wms.services.tokens import authenticate, cached_identity

POLICY_ATTRIBUTE = "wms_policy"


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


def clock_now(request: Request) -> datetime:
    """The app's clock (a test's), else the time now in UTC."""
    clock = getattr(request.app.state, "clock", None)
    return clock() if clock is not None else datetime.now(timezone.utc)


async def get_now(request: Request) -> datetime:
    return clock_now(request)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
NowDep = Annotated[datetime, Depends(get_now)]


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
    return token.strip()


async def caller(request: Request, runtime: Runtime, now: datetime) -> Identity:
    """Who sent ``request``: from the verified-token cache, else read on a request thread.

    A job token (``wmsj_``) is never cached: its job's row is read on every
    use, so that it stops working the moment its attempt ends."""
    token = _bearer(request)
    if looks_like_jwt(token):
        return await _oidc_caller(runtime, token, now)
    if job_tokens.is_job_token(token):
        return await anyio.to_thread.run_sync(job_tokens.authenticate, runtime, token, now)
    cache = runtime.caches.verified_tokens
    identity = cached_identity(runtime.engine, token, now, cache)
    if identity is None:
        identity = await anyio.to_thread.run_sync(authenticate, runtime.engine, token, now, cache)
    return identity


async def _oidc_caller(runtime: Runtime, token: str, now: datetime) -> Identity:
    """An identity provider's access token: checked here when its issuer's keys
    are kept, else on a request thread, which may fetch them."""
    verifier = runtime.oidc
    if verifier is None:
        raise Unauthorized("this server accepts no OpenID Connect tokens")
    identity = verifier.identity_if_cached(token, now)
    if identity is None:
        identity = await anyio.to_thread.run_sync(verifier.identity, token, now)
    return identity


def require(*roles: str) -> Callable[..., Any]:
    """A dependency admitting callers whose token has one of ``roles``."""

    async def check(request: Request, runtime: RuntimeDep, now: NowDep) -> Identity:
        identity = await caller(request, runtime, now)
        if identity.role not in roles:
            raise Forbidden(f"role {identity.role!r} may not do this (needs {' or '.join(roles)})")
        return identity

    setattr(check, POLICY_ATTRIBUTE, roles)
    return check


def public() -> None:
    """The policy of routes that need no token (health)."""


setattr(public, POLICY_ATTRIBUTE, ())
