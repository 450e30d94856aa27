"""The HTTP client every command uses: server from WMS_URL, token from
WMS_TOKEN or ~/.config/wms/token. Errors become ``ClientError`` with the
server's one-line reason."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any, BinaryIO, NoReturn

import httpx

from wms.core.limits import decode_utf8
from wms.token_file import token_file, write_token_file  # noqa: F401  (the CLI's token file)

DEFAULT_URL = "http://127.0.0.1:8080"
API = "/api/v1"


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


def find_token() -> str:
    token = os.environ.get("WMS_TOKEN", "").strip()
    if token:
        return token
    path = token_file()
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise ClientError(f"no token: set WMS_TOKEN or write one to {path} (wms admin token create)") from None


def server_root(url: str) -> str:
    """The server's address without a trailing ``/api/v1``: WMS_URL may name
    the server (as documented) or its API (as the pilot's --url may)."""
    url = url.rstrip("/")
    return url.removesuffix(API) if url.endswith(API) else url


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 60.0) -> None:
        self.url = server_root(url or os.environ.get("WMS_URL") or DEFAULT_URL)
        self.token = token if token is not None else find_token()
        self.http = httpx.Client(
            base_url=self.url + API, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ClientError(f"cannot reach the WMS server at {self.url}: {exc}") from None
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

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json=body)

    def put_file(self, path: str, handle: BinaryIO) -> Any:
        """Upload a file as the raw body (streamed, never whole in memory)."""
        return self.request("PUT", path, content=_pieces(handle),
                            headers={"Content-Type": "application/octet-stream",
                                     "Content-Length": str(os.fstat(handle.fileno()).st_size)})

    def download(self, path: str, target: BinaryIO) -> None:
        """A raw body into ``target``, piece by piece."""
        try:
            with self.http.stream("GET", path) as response:
                if not response.is_success:
                    response.read()
                    self._fail(response)
                for piece in response.iter_bytes():
                    target.write(piece)
        except httpx.TransportError as exc:
            raise ClientError(f"cannot reach the WMS server at {self.url}: {exc}") from None


def _pieces(handle: BinaryIO, size: int = 1 << 16) -> Iterator[bytes]:
    while piece := handle.read(size):
        yield piece
