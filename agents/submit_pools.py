"""SubmitPoolRefresher: keeps the pool-to-queue map in step with the
Resources configuration (specs/002: "refreshed at regular intervals").

A plain function, safe to run twice at once: each pool's rows are replaced
in a transaction and the re-examination is a conditional update.
"""

from __future__ import annotations

from datetime import datetime

from wms.services.pools import refresh_submit_pools
from wms.services.runtime import Runtime


def refresh(runtime: Runtime, now: datetime) -> dict[str, int]:
    """Recompute every pool's eligible queues; returns counts for the log."""
    return refresh_submit_pools(runtime, now)
