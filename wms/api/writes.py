"""A response's head and body in one write to the socket.

uvicorn writes a response's head when the application starts it and the
body when it sends it: two ``send()`` calls for every answer, and on the
client's side two wake-ups (it reads the head, then waits for the body).
Over loopback or a LAN each send costs more CPU than the bytes it carries
(the kernel runs the receiver's network path in the sender's call), and
most of the server's answers are a few hundred bytes. So small writes made
in one turn of the event loop are held and go out together at the end of
the turn; a large write goes out at once, with whatever was held before it,
so a big body is neither delayed nor copied more than once.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: Writes up to this many bytes (with what is held already) wait for the end of the turn.
HOLD_MAX = 16 * 1024


class HeldWrites:
    """A transport whose small writes of one event-loop turn go out as one;
    everything else is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held = b""
        self._flush_due = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held:
            data, self._held = self._held + bytes(data), b""
        if len(data) > HOLD_MAX:
            self._transport.write(data)
            return
        self._held = bytes(data)
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send what is held now."""
        self._flush_due = False
        held, self._held = self._held, b""
        if held and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = b""
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
