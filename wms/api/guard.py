"""The API's outer guard: what every request goes through before a route.

An ASGI middleware, so that it acts before FastAPI reads or parses a body:

1. the path and query may not hold a NUL (``%00``);
2. a body larger than ``limits.request_bytes`` is refused with 413, from its
   Content-Length before anything is read, else while it is read (chunked
   bodies have no Content-Length);
3. a request with a body must carry a valid token before the body is read
   (the route checks the role again, as for any request);
   (file uploads, whose routes read the body themselves against their own
   limit, stop here: ``routes_sandboxes.streams_body``);
4. the body is read (by its deadline, else 408; and when it is whole the
   load shedder admits the request again, else 429: backpressure.py),
   counted, and scanned as bytes: JSON nested deeper than
   ``limits.depth`` is refused, and when a NUL or a lone surrogate may be in
   it (``\\u0000``, ``\\udXXX``, or raw surrogate bytes that Python's JSON
   reader would let through) the strings are checked one by one and the first
   bad one named (``jdls.0.text:3:14: NUL character ...``);
5. the database away (or over ``limits.statement_timeout``) is a 503 with
   Retry-After, wherever it is met; an exception no handler knows is
   logged with the request id and answered as a JSON 500 carrying that id:
   the process and the connection live on.

Every request has an id (its X-Request-ID header when sane, else a new
one: wms.logs): it is in every log line of the request, in the
X-Request-ID header of its answer and in the body of an error answer. When
the request is done, one access log line (logger ``wms.access``) gives
client, method, path, status and time.

Every refusal has the API's one error shape (:func:`error_response`).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from wms.api.deps import caller, clock_now
from wms.api.routes_sandboxes import streams_body
from wms.core.errors import InvalidInput, TooLarge, TooManyRequests, Unauthorized, Unavailable, WmsError
from wms.core.limits import find_bad_character
from wms.db.engine import DATABASE_AWAY, is_statement_timeout
from wms.logs import current_request_id, one_line, request_id_from, shown_query
from wms.services.runtime import Runtime

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("wms.api")
access_log = logging.getLogger("wms.access")

#: Stack of each thread that runs a request, set by `wms server` before the
#: threads start: deep enough for any text wms.core.limits lets through, with
#: room to spare should a pre-scan miss a case.
REQUEST_THREAD_STACK = 64 * 1024 * 1024

#: What a 503 (the database ran out of time) asks the caller to wait.
RETRY_AFTER_SECONDS = 5

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# JSON escapes of NUL and of surrogates, and raw UTF-8-encoded surrogates
# (json.loads reads bytes with "surrogatepass")
_SUSPECT_RE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})|\xed[\xa0-\xbf]")
_JSON_SCAN_RE = re.compile(rb'"(?:[^"\\]|\\.)*+"|(?P<open>[\[{])|(?P<close>[\]}])', re.S)
_QUERY_NUL_RE = re.compile(rb"%00")


def error_body(detail: str, **more: Any) -> dict[str, Any]:
    """The API's one error shape: ``{"detail": "one line", "request_id": ...}``."""
    body: dict[str, Any] = {"detail": one_line(detail), **more}
    request_id = current_request_id.get()
    if request_id is not None:
        body["request_id"] = request_id
    return body


def error_response(exc: WmsError) -> JSONResponse:
    """An error as the API answers it: :func:`error_body` with the error's status."""
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    if exc.status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if isinstance(exc, TooManyRequests):
        headers = {"Retry-After": str(exc.retry_after)}
    if exc.status == 408:
        # The rest of the body may still come, or never: the connection is not read again.
        headers = {"Connection": "close"}
    return JSONResponse(error_body(str(exc)), status_code=int(exc.status), headers=headers)


def database_error_response(runtime: Runtime, exc: Exception) -> JSONResponse:
    """The database away or over its time, as 503 with Retry-After.

    A statement past ``limits.statement_timeout`` says so (it was cancelled,
    so nothing was changed). Otherwise the driver's reason names hosts and
    ports: it goes to the log with the request id, and the caller learns
    only that the database is not answering, as ``/health`` says it."""
    if is_statement_timeout(exc):
        timeout = runtime.config.settings.limits.statement_timeout
        return error_response(Unavailable(f"the database took longer than {timeout:g} s "
                                          "(limits.statement_timeout); nothing was changed"))
    log.warning("database not answering: %s", one_line(str(exc)))
    request_id = current_request_id.get()
    where = f" (request id {request_id}; the server log has the details)" if request_id else ""
    return error_response(Unavailable(f"the database is not answering{where}; try again in "
                                      f"{RETRY_AFTER_SECONDS} s"))


def replay(message: Message, receive: Receive) -> Receive:
    """``receive`` giving ``message`` first: a body read here, passed on whole to the app."""
    replayed = False

    async def again() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return message
        return await receive()

    return again


def internal_error_response(request_id: str) -> JSONResponse:
    return JSONResponse(
        {"detail": f"internal server error (request id {request_id}; the server log has the details)",
         "request_id": request_id},
        status_code=500,
        headers={"X-Request-ID": request_id},
    )


def with_request_id(headers: Any, request_id: str) -> list[tuple[bytes, bytes]]:
    """The response headers with X-Request-ID (unless the route set one)."""
    out = list(headers)
    if not any(name.lower() == b"x-request-id" for name, _ in out):
        out.append((b"x-request-id", request_id.encode("latin-1")))
    return out


def log_access(scope: Scope, status: int | None, seconds: float) -> None:
    """The access log line of one request (never a header: tokens travel there)."""
    if not access_log.isEnabledFor(logging.INFO):
        return
    client = scope.get("client")
    address = client[0] if client else "-"
    query = shown_query(scope.get("query_string", b""))
    target = one_line(scope.get("path", "") + (f"?{query}" if query else ""))
    method = one_line(str(scope.get("method", "-")))
    millis = round(seconds * 1000, 1)
    access_log.info('%s "%s %s" %s %.1f ms', address, method, target, status or "-", millis,
                    extra={"fields": {"client": address, "method": method, "path": target,
                                      "status": status, "duration_ms": millis}})


def json_depth(body: bytes, limit: int) -> bool:
    """True when the JSON *body* nests no deeper than *limit* (strings skipped)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return True
    depth = 0
    for match in _JSON_SCAN_RE.finditer(body):
        kind = match.lastgroup
        if kind == "open":
            depth += 1
            if depth > limit:
                return False
        elif kind == "close":
            depth -= 1
    return True


def first_bad_string(value: Any, path: str = "") -> str | None:
    """``path:line:col: what`` for the first string in a JSON value holding a
    NUL or a lone surrogate (keys included), or None."""
    if isinstance(value, str):
        found = find_bad_character(value)
        if found is None:
            return None
        line, col, what = found
        return f"{path or 'body'}:{line}:{col}: {what} is not allowed"
    if isinstance(value, dict):
        for key, item in value.items():
            shown = key if key.isprintable() and len(key) <= 40 else repr(key[:40])
            where = f"{path}.{shown}" if path else shown
            found_key = first_bad_string(key, f"{path or 'body'}: a key")
            if found_key is not None:
                return found_key
            found_item = first_bad_string(item, where)
            if found_item is not None:
                return found_item
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found_item = first_bad_string(item, f"{path}.{n}" if path else str(n))
            if found_item is not None:
                return found_item
    return None


class InputGuard:
    """The middleware; *runtime* gives the limits and authenticates tokens."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        request_id = request_id_from(headers.get(b"x-request-id"))
        context = current_request_id.set(request_id)
        started_at = time.perf_counter()
        status: int | None = None

        async def tracking_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                # Every answer names its request, so that a user can quote
                # the id of a failed call and the operator find its lines.
                message = {**message, "headers": with_request_id(message.get("headers", ()), request_id)}
            await send(message)

        try:
            await self.guarded(scope, receive, tracking_send)
        except DATABASE_AWAY as exc:    # met before a route: the token's check of a request with a body
            if status is None:
                await database_error_response(self.runtime, exc)(scope, receive, tracking_send)
        except WmsError as exc:
            # From reading the body (backpressure.py): it came too late (408),
            # or when it came the process was full (429).
            if status is None:
                await error_response(exc)(scope, receive, tracking_send)
        except Exception:  # noqa: BLE001 - the last resort: logged, answered, never fatal
            log.exception("request %s failed: %s %s", request_id, scope.get("method"), scope.get("path"))
            if status is None:
                await internal_error_response(request_id)(scope, receive, tracking_send)
        finally:
            log_access(scope, status, time.perf_counter() - started_at)
            current_request_id.reset(context)

    async def guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.check_url(scope)
        if refusal is not None:
            await error_response(refusal)(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        length_header = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        has_body = chunked or (length_header is not None and length_header.strip() not in (b"", b"0"))
        if not has_body and scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        if streams_body(scope.get("method", ""), scope.get("path", "")):
            # A file upload: its route reads the body against its own limit
            # (sandboxes.file_bytes); the token is checked first all the same.
            refusal = await self.authenticate(scope) if has_body else None
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        limits = self.runtime.config.settings.limits
        limit = limits.request_bytes
        if length_header is not None and not chunked:
            text = length_header.strip()
            if not text.isdigit():
                await error_response(InvalidInput("Content-Length is not a number"))(scope, receive, send)
                return
            if len(text) > 18 or int(text) > limit:
                await error_response(self.too_large(limit))(scope, receive, send)
                return
        if has_body:
            refusal = await self.authenticate(scope)
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await error_response(self.too_large(limit))(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        refusal = self.check_body(body, limits.depth)
        if refusal is not None:
            await error_response(refusal)(scope, receive, send)
            return
        await self.app(scope, replay({"type": "http.request", "body": body, "more_body": False}, receive), send)

    @staticmethod
    def too_large(limit: int) -> TooLarge:
        return TooLarge(f"request body too large: more than {limit} bytes (limits.request_bytes)")

    @staticmethod
    def check_url(scope: Scope) -> WmsError | None:
        path = scope.get("path", "")
        found = find_bad_character(path)
        if found is not None:
            return InvalidInput(f"path: {found[2]} is not allowed")
        if _QUERY_NUL_RE.search(scope.get("query_string", b"")):
            return InvalidInput("query: NUL character (U+0000) is not allowed")
        return None

    async def authenticate(self, scope: Scope) -> WmsError | None:
        """The token's check that every route makes, made before the body is read."""
        request = Request(scope)
        try:
            await caller(request, self.runtime, clock_now(request))
        except Unauthorized as exc:
            return exc
        return None

    @staticmethod
    def check_body(body: bytes, depth: int) -> WmsError | None:
        if not json_depth(body, depth):
            return InvalidInput(f"body: JSON nested too deep: more than {depth} levels (limits.depth)")
        if _SUSPECT_RE.search(body) is None:
            return None
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return None  # not JSON: the route's own reading refuses it
        found = first_bad_string(value)
        return InvalidInput(found) if found is not None else None
