"""Cluster objects a manager may change through any server process (the
complex table, the resource quota sets): every process notices a newer
stored version at most once per interval, with one small read, and then
adopts it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from wms.db import cluster_objects as objects_db
from wms.db.engine import reading

if TYPE_CHECKING:      # the Runtime reads its complex table through this module
    from wms.services.runtime import Runtime




def changed(runtime: Runtime, kind: str, interval: float) -> dict[str, Any] | None:
    """The stored object of ``kind`` (text, version, ...) if its version is not
    the one this process adopted last; looked for at most once per ``interval``
    seconds. Version 0, never stored, means the configuration's applies."""
    state = runtime.caches.stored_version(kind)
    now = time.monotonic()
    if now - state.checked < interval:
        return None
    state.checked = now
    with reading(runtime.engine) as conn:
        if objects_db.version(conn, kind) == state.version:
            return None
        return objects_db.get_object(conn, kind)


def adopted(runtime: Runtime, kind: str, version: int) -> None:
    """This process now uses ``version`` of ``kind`` (it read it, or wrote it itself)."""
    state = runtime.caches.stored_version(kind)
    state.version, state.checked = version, time.monotonic()


def look_again(runtime: Runtime, kind: str) -> None:
    """Compare with the stored version at the next ``changed`` call, whatever the interval."""
    runtime.caches.stored_version(kind).checked = float("-inf")
