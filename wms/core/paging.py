"""Pages of a list: the page size and the cursor that says where the next page starts.

Every list of the API that grows with use (jobs, pilots, pools, task queues,
the accounting of finished jobs) answers one page at a time, so that no
request makes the server build an answer the size of the database: 48,000
jobs were a 16.8 MB answer, and a few such requests at once took a server
from 0.3 to 1.2 GB.

Keyset pagination, not OFFSET: a page is the rows whose key (an id, or a
name) comes after the last key of the page before, in key order. So a row
inserted meanwhile never shifts a page (it appears on a later one, or not at
all when its key is behind the reader), and reading page 480 costs what
reading page 1 does.

The cursor is opaque to callers: the list it belongs to, a digest of the
query's filters, the last key, and a check digit string. It is not a secret
and grants nothing (the caller's visibility applies to every page as to the
first); the check only tells a mistyped, cut or hand-made cursor, and one
given for another list or other filters, from a good one, with a 400 that
says which.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wms.core.errors import InvalidInput

#: The cursor's format; a cursor of another version is refused (400), never misread.
VERSION = 1
#: What a cursor may be at most: a key of 255 characters fits many times.
MAX_CURSOR = 2048
#: Defaults of wms.yaml ``paging``: the page a caller gets without ``limit``,
#: and the most one page holds whatever ``limit`` says.
DEFAULT_PAGE_SIZE = 1000
DEFAULT_MAX_PAGE_SIZE = 5000


@dataclass(frozen=True)
class Page:
    """What one request asks for: rows after ``after`` (None: from the start), at most ``size``."""

    # An id, or a name for lists keyed by name (pools); its type is the list's key.
    after: Any
    size: int


@dataclass(frozen=True)
class Slice:
    """A page of a list whose rows the caller sees only some of, decided row by row after the
    database read them (a reservation's access list, say): ``rows``, those seen among the
    ``size`` rows read after the page's key, and ``next_after``, the key of the last row read
    when more may follow (None: this was the last page). Such a page may hold fewer rows than
    asked, even none, and still lead on: the cost of a page is the rows read, never the rows
    the caller happens to see."""

    rows: list[Any]
    next_after: Any


def page_size(asked: int | None, default: int, maximum: int) -> int:
    """The rows a page holds: ``asked`` up to ``maximum`` (a larger ask gets the maximum,
    and the answer's next cursor leads on), ``default`` when nothing was asked."""
    if asked is None:
        return min(default, maximum)
    return max(1, min(asked, maximum))


def _query_digest(query: Mapping[str, Any]) -> str:
    text = json.dumps({k: v for k, v in query.items() if v is not None}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check(body: str) -> str:
    return hashlib.sha256(f"wms-cursor:{body}".encode()).hexdigest()[:12]


def encode_cursor(kind: str, query: Mapping[str, Any], after: int | str) -> str:
    """The cursor of the page that follows the row with key ``after`` of list ``kind``
    read with these filters (``query``: the filters, whatever their values)."""
    body = json.dumps([VERSION, kind, _query_digest(query), after], separators=(",", ":"))
    text = f"{body}|{_check(body)}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str, query: Mapping[str, Any], key: type[int] | type[str] = int) -> int | str:
    """The last key of the page before, from a cursor this server gave out for list
    ``kind`` with the same filters; InvalidInput (400) otherwise, saying why."""
    where = "cursor"
    if len(cursor) > MAX_CURSOR:
        raise InvalidInput(f"{where}: longer than {MAX_CURSOR} characters; pass back the `next` cursor "
                           "of the page before, unchanged")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        body, _, check = text.rpartition("|")
        if not body or check != _check(body):
            raise ValueError("check")
        version, listed, digest, after = json.loads(body)
    except (ValueError, binascii.Error, UnicodeDecodeError, TypeError):
        raise InvalidInput(f"{where}: not a cursor this server gave out (it is opaque: pass back the `next` "
                           "cursor of the page before, unchanged)") from None
    if version != VERSION:
        raise InvalidInput(f"{where}: a cursor of another version ({version!r}, this server reads {VERSION}); "
                           "start again without a cursor")
    if listed != kind:
        raise InvalidInput(f"{where}: a cursor of the {listed!r} list, not of {kind!r}")
    if digest != _query_digest(query):
        raise InvalidInput(f"{where}: given for other filters than this request's; keep the filters of the "
                           "first page, or start again without a cursor")
    if not isinstance(after, key) or isinstance(after, bool):
        raise InvalidInput(f"{where}: not a cursor this server gave out")
    return after
