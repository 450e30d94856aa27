"""The pilot's connections to the server: one kept alive per thread.

A pilot calls the server many times a minute (job requests, heartbeats,
status reports, output). A new TCP connection for each call costs a round
trip more, and over HTTPS a TLS handshake more, on both sides; the server
pays the handshake in CPU for every pilot. So each thread of the pilot
keeps its connection and sends its next call on it.

A server closes a connection left idle (uvicorn after 5 s, nginx after
75 s by default). A connection idle for longer than ``KEEP_IDLE`` is not
reused but opened anew, and a call that finds its reused connection
closed before any answer came is sent again at once on a new one: the
server closed it between two calls, so the call did not reach it. What
fails on a new connection is the caller's to retry (pilot/client.py).

Where the environment names an HTTP proxy for the server's address
(``http_proxy`` / ``https_proxy`` without a matching ``no_proxy``), calls go
through urllib as before, one connection each: a proxy decides its own
keep-alive.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, BinaryIO, Protocol, cast
from urllib.parse import urlsplit

# Below uvicorn's timeout_keep_alive (5 s), the shortest of the servers a
# pilot meets: an older connection is more likely closed than not.
KEEP_IDLE = 4.0

# What a reused connection raises when the server closed it while idle.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class Answer(Protocol):
    """What a call gives back: an HTTP answer being read."""

    status: int
    headers: Any

    def read(self, amount: int = ...) -> bytes: ...


class Connections:
    """Sends calls to one server (``url``: scheme, host and port), one kept-alive
    connection per calling thread."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.proxied = _proxied(url)
        self._tls = ssl.create_default_context() if self.scheme == "https" else None
        self._local = threading.local()
        self.opened = 0         # connections opened so far (all threads)
        self._count = threading.Lock()

    def send(self, method: str, url: str, target: str, body: bytes | BinaryIO | None,
             headers: Mapping[str, str], timeout: float) -> Answer:
        """Send one call and return its answer, whatever its status. ``url``
        is the whole URL (for a proxy), ``target`` its path and query."""
        if self.proxied:
            return _through_urllib(method, url, body, headers, timeout)
        connection, reused = self._connection(timeout)
        try:
            return _exchange(connection, method, target, body, headers)
        except _STALE:
            self._drop()
            if not reused:
                raise
        except BaseException:
            # A call that failed otherwise (a time-out, a reset mid-answer) leaves the
            # connection in the middle of an exchange: it can carry no other call.
            self._drop()
            raise
        # The server closed the idle connection before it read the call: send it again on a new one.
        connection, _ = self._connection(timeout)
        try:
            return _exchange(connection, method, target, body, headers)
        except BaseException:
            self._drop()
            raise

    def finished(self, answer: Answer) -> None:
        """After the caller read what it wanted of ``answer``: a connection whose
        answer was not read to its end cannot carry the next call."""
        if self.proxied:
            close = getattr(answer, "close", None)
            if close is not None:
                close()
            return
        if isinstance(answer, http.client.HTTPResponse) and not answer.isclosed():
            answer.close()
            self._drop()
        else:
            self._local.last_used = time.monotonic()

    def close(self) -> None:
        """Close this thread's connection (the others close with their threads)."""
        self._drop()

    def _drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
        self._local.connection = None

    def _connection(self, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection and whether it served a call before."""
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        idle = time.monotonic() - getattr(self._local, "last_used", 0.0)
        if connection is not None and (idle > KEEP_IDLE or connection.sock is None):
            connection.close()
            connection = None
        if connection is None:
            if self._tls is not None:
                connection = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self._tls)
            else:
                connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            self._local.connection = connection
            with self._count:
                self.opened += 1
            return connection, False
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection, True


def _exchange(connection: http.client.HTTPConnection, method: str, target: str,
              body: bytes | BinaryIO | None, headers: Mapping[str, str]) -> http.client.HTTPResponse:
    if body is not None and not isinstance(body, bytes):
        body.seek(0)
    connection.request(method, target, body=body, headers=dict(headers))
    return connection.getresponse()


def _proxied(url: str) -> bool:
    """Whether the environment sends calls to ``url`` through a proxy."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.netloc)


def _through_urllib(method: str, url: str, body: bytes | BinaryIO | None, headers: Mapping[str, str],
                    timeout: float) -> Answer:
    if body is not None and not isinstance(body, bytes):
        body.seek(0)
    request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        # An answer with an error status (its code, always set): the caller reads it like any other.
        return cast(Answer, exc)
