"""Advance reservation ids (qrsub(1)): 1 up to 9999999, then a wraparound
to the next id not in use, starting with 1."""

from __future__ import annotations

from collections.abc import Collection

from wms.core.errors import Conflict

MAX_AR_ID = 9_999_999


def next_id(last: int, in_use: Collection[int], highest: int = MAX_AR_ID) -> int:
    """The id after ``last`` that no reservation in use holds; wraps from ``highest`` to 1."""
    if len(in_use) >= highest:
        raise Conflict(f"denied: all {highest} advance reservation ids are in use")
    candidate = last if 0 < last <= highest else 0
    for _ in range(highest):
        candidate = candidate + 1 if candidate < highest else 1
        if candidate not in in_use:
            return candidate
    raise Conflict(f"denied: all {highest} advance reservation ids are in use")
