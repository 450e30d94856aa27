"""Answers read from servers we do not run (a CE, an identity provider),
never more of them than we mean to hold.

A server that streams without end, or sends a document far larger than its
kind ever is, must not fill this process's memory: the body is read in
chunks and the reading stops at the limit.
"""

from __future__ import annotations

import httpx


class TooLarge(Exception):
    """The answer went past the limit; the rest of it was not read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"an answer of more than {limit} bytes")


def read_limited(answer: httpx.Response, limit: int) -> bytes:
    """The whole body of a streamed answer, at most ``limit`` bytes; TooLarge past it."""
    body = bytearray()
    for chunk in answer.iter_bytes():
        body += chunk
        if len(body) > limit:
            raise TooLarge(limit)
    return bytes(body)
