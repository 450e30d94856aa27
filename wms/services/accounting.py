"""Accounting (specs/003 5.4): finished jobs, each with the advance reservation
it ran in, and per reservation the slot-seconds reserved and used."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from wms.core.identity import Identity
from wms.core.paging import Page, Slice
from wms.core.reservations.states import ARState
from wms.core.states import FINAL_STATES
from wms.db import reservations as ar_db
from wms.db.engine import reading
from wms.services import access
from wms.services.runtime import Runtime


def reservations(runtime: Runtime, identity: Identity, now: datetime) -> list[dict[str, Any]]:
    """Per reservation, by id: slot-seconds reserved and used by its jobs (specs/003 5.4); of the
    reservations the caller may see (visibility.reservations)."""
    return reservations_page(runtime, identity, now).rows


def reservations_page(runtime: Runtime, identity: Identity, now: datetime, page: Page | None = None) -> Slice:
    """Per reservation, by id: slot-seconds reserved and used by its jobs (specs/003 5.4); of the
    reservations the caller may see (visibility.reservations), among the page's ``size``
    reservations after its key (an access list is read row by row: a :class:`Slice`); without,
    every one."""
    policy, usersets = access.policy(runtime), runtime.config.cluster.usersets
    with reading(runtime.engine) as conn:
        rows = ar_db.list_reservations(conn, after=page.after if page else None, limit=page.size if page else None)
        out = []
        for row in rows:
            if not access.may_see_reservation(identity, row, policy, usersets):
                continue
            granted = json.loads(row["granted"])
            slots = sum(g["slots"] for g in granted)
            end = row["end_time"] if row["state"] != ARState.DELETED else min(row["updated"], row["end_time"])
            end = min(end, now)
            reserved = max((end - row["start_time"]).total_seconds(), 0) * slots
            used = 0.0
            jobs = ar_db.jobs_of_reservation(conn, row["ar_id"])
            for job in jobs:
                if job["start_time"] is None:
                    continue
                stop = job["end_time"] or (job["last_update_time"] if job["status"] in FINAL_STATES else now)
                used += max((stop - job["start_time"]).total_seconds(), 0) * (job["slots"] or 1)
            out.append({"ar_id": row["ar_id"], "name": row["name"], "owner": row["owner"],
                        "account": row["account"], "state": row["state"], "slots": slots,
                        "reserved_slot_seconds": round(reserved), "used_slot_seconds": round(used),
                        "jobs": len(jobs)})
    return Slice(out, rows[-1]["ar_id"] if page is not None and len(rows) == page.size else None)


def jobs(runtime: Runtime, identity: Identity, page: Page | None = None) -> list[dict[str, Any]]:
    """One record per finished job, newest first, carrying its reservation id (specs/003 5.4.3.1);
    of the jobs the caller may see (visibility.jobs). With ``page``: those below its key, and one
    more than the page holds when there are more (wms/api/paging.py)."""
    with reading(runtime.engine) as conn:
        seen = access.job_columns_seen(identity, access.policy(runtime))
        if page is None:
            rows = ar_db.finished_jobs(conn, seen)
        else:
            rows = ar_db.finished_jobs(conn, seen, before=page.after, limit=page.size + 1)
    out = []
    for r in rows:
        end = r["end_time"] or r["last_update_time"]
        wall = (end - r["start_time"]).total_seconds() if r["start_time"] and end else 0
        out.append({"JobID": r["job_id"], "Owner": r["owner"], "OwnerGroup": r["owner_group"], "Status": r["status"],
                    "Queue": r["queue"], "Host": r["host"], "Slots": r["slots"],
                    "Start": r["start_time"].isoformat() if r["start_time"] else None,
                    "End": end.isoformat() if end else None, "WallClock": round(max(wall, 0)),
                    "ExitCode": r["exit_code"], "AR": r["reservation_id"]})
    return out
