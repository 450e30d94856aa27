"""One page of a list route: the page asked for, and where the next one is.

The answer's body stays the list it always was (INTERFACE.md: `wms jobs
--json` is a list), so a client that reads one page reads what it did;
where more rows follow, two headers say how to get them:

* ``Link: </api/v1/jobs?status=Waiting&cursor=C>; rel="next"`` (RFC 8288),
  the request's own path and filters with the next cursor;
* ``X-Next-Cursor: C``, the cursor alone.

No header: this was the last page (a page may hold fewer rows than asked, or
none, where the caller sees only some of the rows read: only the missing
header ends the list). The cursor rules are in wms/core/paging.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Query, Request, Response

from wms.core import paging
from wms.core.limits import INT32_MAX
from wms.services.runtime import Runtime

NEXT_HEADER = "X-Next-Cursor"

Cursor = Annotated[str | None, Query(min_length=1, max_length=paging.MAX_CURSOR,
                                     description="the X-Next-Cursor of the page before (opaque)")]
Limit = Annotated[int | None, Query(ge=1, le=INT32_MAX,
                                    description="rows of this page; more than paging.max_page_size gets that many")]


def page_of(runtime: Runtime, kind: str, query: Mapping[str, Any], cursor: str | None, limit: int | None,
            key: type[int] | type[str] = int) -> paging.Page:
    """The page a request asks for: after its cursor's key, of ``limit`` rows within the configured bounds."""
    settings = runtime.config.settings.paging
    after = paging.decode_cursor(cursor, kind, query, key) if cursor is not None else None
    return paging.Page(after=after, size=paging.page_size(limit, settings.page_size, settings.max_page_size))


def answer(request: Request, response: Response, kind: str, query: Mapping[str, Any], page: paging.Page,
           rows: list[dict[str, Any]], key_field: str) -> list[dict[str, Any]]:
    """The rows of the page; with the next page's headers when the service found one row more than the page."""
    if len(rows) <= page.size:
        return rows
    rows = rows[:page.size]
    _lead_on(request, response, kind, query, rows[-1][key_field])
    return rows


def answer_slice(request: Request, response: Response, kind: str, query: Mapping[str, Any],
                 part: paging.Slice) -> list[Any]:
    """The rows of a page read as a :class:`wms.core.paging.Slice`; the next page's headers
    when it says more may follow."""
    if part.next_after is not None:
        _lead_on(request, response, kind, query, part.next_after)
    return part.rows


def _lead_on(request: Request, response: Response, kind: str, query: Mapping[str, Any], after: int | str) -> None:
    cursor = paging.encode_cursor(kind, query, after)
    response.headers[NEXT_HEADER] = cursor
    url = request.url.include_query_params(cursor=cursor)
    response.headers["Link"] = f'<{url.path}?{url.query}>; rel="next"'
