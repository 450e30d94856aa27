"""The console's overview: jobs by state, pilots by state, recent matches,
full queues; in one answer, so the page refreshes with one request.

Users count the jobs and matches they may see (as `wms jobs` lists them,
under the visibility policy); operators and managers everyone's, and the
pilots, which are an administrator's view (as `wms pilots`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from wms.core.identity import Identity
from wms.core.states import JobStatus
from wms.db import overview as overview_db
from wms.db.engine import reading
from wms.services import access
from wms.services.diagnosis import queues_overview
from wms.services.runtime import Runtime

#: "Matches in the last minutes": how far back the overview counts.
RECENT_MINUTES = 10


def slot_usage(row: dict[str, Any]) -> tuple[int, int, int] | None:
    """(reserved, used, total) from a `wms queues` row's "resv/used/tot" ("-": not configured)."""
    parts = str(row.get("resv/used/tot", "")).split("/")
    if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
        return None
    resv, used, total = (int(p) for p in parts)
    return resv, used, total


def full_consumables(row: dict[str, Any]) -> list[str]:
    """The names of the row's consumables with nothing left ("used/total" with used >= total > 0)."""
    full = []
    slots = slot_usage(row)
    if slots is not None and slots[2] > 0 and slots[0] + slots[1] >= slots[2]:
        full.append("slots")
    for name, shown in sorted(row.get("Consumables", {}).items()):
        used, _, total = str(shown).partition("/")
        try:
            if float(total) > 0 and float(used) >= float(total):
                full.append(name)
        except ValueError:
            continue  # "exclusive", "3 jobs", sizes with units: not a plain count
    return full


def overview(runtime: Runtime, identity: Identity, now: datetime) -> dict[str, Any]:
    seen = access.job_columns_seen(identity, access.policy(runtime))
    since = now - timedelta(minutes=RECENT_MINUTES)
    with reading(runtime.engine) as conn:
        jobs = overview_db.jobs_by_status(conn, seen)
        matches = overview_db.matches_since(conn, since, seen)
        pilots = overview_db.pilots_by_state(conn) if identity.role in access.ADMINS else None
    full = []
    for row in queues_overview(runtime):
        names = full_consumables(row)
        if names:
            full.append({"Kind": row["Kind"], "Name": row["Name"], "Full": names})
    return {
        "Jobs": {status.value: jobs.get(status.value, 0) for status in JobStatus},
        "Pilots": pilots,
        "RecentMatches": matches,
        "RecentMinutes": RECENT_MINUTES,
        "FullQueues": full,
        "Time": now.isoformat(),
    }
