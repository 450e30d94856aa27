"""The HTTP client every command uses: server from WMS_URL, token from
WMS_TOKEN or ~/.config/wms/token. Errors become ``ClientError`` with the
server's one-line reason.

A busy server (429, or 503, with ``Retry-After``) is waited out: the CLI
waits what it is told plus a little jitter (at most ``MAX_WAIT`` seconds a
wait), says so in one line on stderr, and asks again, up to ``RETRIES``
times and ``MAX_TOTAL`` seconds in all; then it fails with one line naming
the status and the last Retry-After. Only what is safe to send again is
retried (docs/deployment.md, "Backpressure"): a GET always; any other
method on 429 only, which backpressure answers before the request is
handled. A 503 on a POST may come after part of the work was done (a
statement time-out in a request of several transactions), so it is
reported, not repeated.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from collections.abc import Iterator
from typing import Any, BinaryIO, NoReturn

import httpx

from wms.core.limits import decode_utf8
from wms.token_file import token_file, write_token_file  # noqa: F401  (the CLI's token file)

DEFAULT_URL = "http://127.0.0.1:8080"
#: The header of a paged list's answer naming the next page's cursor (wms/api/paging.py).
NEXT_HEADER = "X-Next-Cursor"
API = "/api/v1"

#: Times a busy answer is asked again, the longest wait and the most waited in all (seconds).
RETRIES = 3
MAX_WAIT = 30.0
MAX_TOTAL = 60.0
#: Methods whose request may be sent again after any busy answer.
SAFE_METHODS = frozenset({"GET", "HEAD"})


class ClientError(Exception):
    """A request failed; ``str()`` is the one line to print."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def read_text_file(path: str | Path, source: str | None = None) -> str:
    """A text file's content; OSError as ``open`` raises it, InvalidInput
    (``file:line:col: not valid UTF-8 text``) for bytes that are not UTF-8."""
    return decode_utf8(Path(path).read_bytes(), str(source or path))


def read_stdin() -> str:
    """Standard input as UTF-8 text (InvalidInput as read_text_file)."""
    return decode_utf8(sys.stdin.buffer.read(), "<stdin>")


def find_token(server: str | None = None) -> str:
    """The token to send to ``server``: WMS_TOKEN, else the access token of `wms login`
    at that server (renewed when it runs out), else ~/.config/wms/token."""
    from wms.cli import login      # here: login imports this module's neighbours

    token = os.environ.get("WMS_TOKEN", "").strip()
    if token:
        return token
    try:
        signed_in = login.access_token(server)
    except login.LoginError as exc:
        raise ClientError(str(exc)) from None
    if signed_in is not None:
        return signed_in
    path = token_file()
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise ClientError(f"no token: run wms login, set WMS_TOKEN or write one to {path} "
                          "(wms admin token create)") from None


def server_root(url: str) -> str:
    """The server's address without a trailing ``/api/v1``: WMS_URL may name
    the server (as documented) or its API (as the pilot's --url may)."""
    url = url.rstrip("/")
    return url.removesuffix(API) if url.endswith(API) else url


def busy_wait(method: str, response: httpx.Response) -> float | None:
    """Seconds the server asks to wait before this request is sent again, or
    None when it must not be: not busy, no readable Retry-After, or a 503 on a
    request that may have done part of its work."""
    status = response.status_code
    if not (status == 429 or (status == 503 and method in SAFE_METHODS)):
        return None
    header = response.headers.get("Retry-After", "").strip()
    return float(header) if header.isdigit() else None


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 60.0,
                 sleep: Callable[[float], Any] = time.sleep) -> None:
        self.url = server_root(url or os.environ.get("WMS_URL") or DEFAULT_URL)
        self.token = token if token is not None else find_token(self.url)
        self.http = httpx.Client(
            base_url=self.url + API, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout
        )
        self.sleep = sleep

    def _send(self, method: str, path: str, body: Callable[[], dict[str, Any]] | None = None, *,
              stream: bool = False, **kwargs: Any) -> httpx.Response:
        """One request, sent again while the server is busy (see the module's note);
        ``body`` gives a streamed body afresh for each try."""
        waited = 0.0
        for retry in range(RETRIES + 1):
            try:
                request = self.http.build_request(method, path, **kwargs, **(body() if body else {}))
                response = self.http.send(request, stream=stream)
            except httpx.TransportError as exc:
                raise ClientError(f"cannot reach the WMS server at {self.url}: {exc}") from None
            asked = busy_wait(method, response)
            if asked is None:
                return response
            response.read()
            delay = min(asked + random.uniform(0, 1), MAX_WAIT)
            if retry == RETRIES or waited + delay > MAX_TOTAL:
                raise ClientError(f"server busy: HTTP {response.status_code} after {retry} retr"
                                  f"{'y' if retry == 1 else 'ies'} ({waited:.0f} s); it last asked to retry "
                                  f"after {asked:.0f} s", response.status_code)
            print(f"server busy, retrying in {delay:.0f} s", file=sys.stderr, flush=True)
            self.sleep(delay)
            waited += delay
        raise AssertionError("unreachable")

    def request(self, method: str, path: str, body: Callable[[], dict[str, Any]] | None = None,
                **kwargs: Any) -> Any:
        response = self._send(method, path, body, **kwargs)
        if response.is_success:
            return response.json()
        self._fail(response)

    @staticmethod
    def _fail(response: httpx.Response) -> NoReturn:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = None
        raise ClientError(str(detail or f"HTTP {response.status_code} {response.reason_phrase}"), response.status_code)

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def pages(self, path: str, *, limit: int | None = None, **params: Any) -> Iterator[list[Any]]:
        """The rows of a paged list, one page at a time, following each answer's
        ``X-Next-Cursor`` (docs/api.md, "Pages"); at most ``limit`` rows in all."""
        query = {k: v for k, v in params.items() if v is not None}
        left = limit
        while True:
            if left is not None:
                query["limit"] = left
            response = self._send("GET", path, params=query)
            if not response.is_success:
                self._fail(response)
            rows = response.json()
            if left is not None:
                rows = rows[:left]
                left -= len(rows)
            yield rows
            # Only a missing cursor ends the list: a page may be short, or empty, where the
            # caller sees only some of the rows the server read for it.
            cursor = response.headers.get(NEXT_HEADER)
            if not cursor or left == 0:
                return
            query["cursor"] = cursor

    def every(self, path: str, **params: Any) -> list[Any]:
        """Every row of a paged list, all pages read (for output that needs the whole list at once)."""
        return [row for rows in self.pages(path, **params) for row in rows]

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json=body)

    def put_file(self, path: str, handle: BinaryIO) -> Any:
        """Upload a file as the raw body (streamed, never whole in memory)."""
        def content() -> dict[str, Any]:
            handle.seek(0)
            return {"content": _pieces(handle)}

        return self.request("PUT", path, content,
                            headers={"Content-Type": "application/octet-stream",
                                     "Content-Length": str(os.fstat(handle.fileno()).st_size)})

    def download(self, path: str, target: BinaryIO) -> None:
        """A raw body into ``target``, piece by piece."""
        response = self._send("GET", path, stream=True)
        try:
            if not response.is_success:
                response.read()
                self._fail(response)
            for piece in response.iter_bytes():
                target.write(piece)
        except httpx.TransportError as exc:
            raise ClientError(f"cannot reach the WMS server at {self.url}: {exc}") from None
        finally:
            response.close()


def _pieces(handle: BinaryIO, size: int = 1 << 16) -> Iterator[bytes]:
    while piece := handle.read(size):
        yield piece
