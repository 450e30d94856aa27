"""How long a client may take to send its request: headers, then body.

A client that opens a connection and sends nothing, or its headers a
byte at a time (slowloris), or a ``Content-Length: 100000`` and ten bytes
of it, costs the server a socket and a little memory for as long as it
likes, unless something ends it. uvicorn ends only an idle kept-alive
connection (``timeout_keep_alive``, 5 s after an answer): a new
connection, a request's headers and its body have no limit there.

* **Headers**: a new connection, or the first byte of a request on a
  kept-alive one, starts a clock of ``backpressure.header_seconds``; the
  end of the headers stops it. Past it the connection is closed, with a
  408 when part of a request had come (:class:`HeaderDeadline`, the HTTP
  protocol `wms server` runs).
* **Body**: the server asks for the body; it must come within
  ``backpressure.body_seconds``, plus one second for every
  ``backpressure.body_min_rate`` bytes received (:func:`body_deadline`,
  Apache's mod_reqtimeout ``body=20,MinRate=500``). A slow but honest
  client keeps its time as long as it averages the minimum rate: a pilot
  on a 4 kbit/s link still sends a 100 kB body. Past it, 408 and the
  connection is closed (the rest of the body is never read). The clock
  starts when the server first asks for the body, not at the headers: the
  time the server spends before (checking the token, waiting for a
  thread) is not the client's.

The body's clock is kept by the load shedder (backpressure.py), which
does not count a request as in progress while it waits for its body.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from wms.config.models import BackpressureSettings
from wms.core.errors import RequestTimeout


def body_deadline(asked_at: float, received: int, settings: BackpressureSettings) -> float:
    """When the rest of a body is late: ``asked_at`` (the clock's reading when
    the server first asked for it) plus ``body_seconds``, plus a second for
    every ``body_min_rate`` bytes of it ``received`` so far."""
    return asked_at + settings.body_seconds + received / settings.body_min_rate


def body_timeout(received: int, length: bytes | None, seconds: float, settings: BackpressureSettings) -> RequestTimeout:
    """The 408 of a body that did not come in time, in one line."""
    of = f" of {int(length)}" if length is not None and length.strip().isdigit() else ""
    return RequestTimeout(
        f"request body too slow: {received}{of} bytes received in {seconds:.1f} s; a body has "
        f"{settings.body_seconds:g} s (backpressure.body_seconds) and 1 s more for every "
        f"{settings.body_min_rate} bytes received (backpressure.body_min_rate)")


class HeaderDeadline(HttpToolsProtocol):
    """uvicorn's HTTP protocol (httptools) with a deadline on each request's headers.

    ``seconds`` is set once per process, from wms.yaml, before the server
    serves (wms/server.py): uvicorn makes one protocol object per
    connection and hands it only its own configuration.
    """

    seconds: ClassVar[float] = BackpressureSettings().header_seconds

    _header_timer: asyncio.TimerHandle | None = None
    _begun = False

    @classmethod
    def configure(cls, settings: BackpressureSettings) -> None:
        cls.seconds = settings.header_seconds

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._begun = True
        if self._header_timer is None:          # a kept-alive connection's next request
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        self._begun = False
        super().on_headers_complete()

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self.seconds, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._begun:
            self.transport.write(header_timeout_answer(self.seconds))
        self.transport.close()


def header_timeout_answer(seconds: float) -> bytes:
    """The 408 of headers that did not come in time (no request exists yet to answer through the app)."""
    body = (b'{"detail": "request headers not received within %s s (backpressure.header_seconds)"}'
            % f"{seconds:g}".encode())
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))

