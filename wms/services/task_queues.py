"""Task queues as seen by operators and `wms task-queues`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from wms.core.identity import Identity
from wms.core.paging import Page
from wms.core.shares import task_queue_priorities
from wms.db import task_queues as tq_db
from wms.db.engine import reading
from wms.services import access
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime


def list_task_queues(runtime: Runtime, identity: Identity, page: Page | None = None) -> list[dict[str, Any]]:
    """The task queues the caller may see (visibility.task_queues; by default its VO's), by id.
    With ``page``: those after its key, and one more than the page holds when there are more
    (wms/api/paging.py)."""
    with reading(runtime.engine) as conn:
        rows = tq_db.list_task_queues(conn, any_of=access.task_queue_columns_seen(identity, access.policy(runtime)),
                                      after=page.after if page else None, limit=page.size + 1 if page else None)
    out = []
    for row in rows:
        definition = json.loads(row["definition"])
        out.append(
            {
                "TaskQueue": row["tq_id"],
                "Owner": row["owner"],
                "OwnerGroup": row["owner_group"],
                "VO": row["vo"],
                "SubmitPool": row["submit_pool"] or "",
                "CPUTime": row["cpu_time"],
                "Priority": row["priority"],
                "WaitingJobs": row.get("waiting_jobs", 0),
                "Definition": definition,
            }
        )
    return out


def recompute_priorities(runtime: Runtime, now: datetime) -> dict[str, int]:
    """TaskQueuePriorities agent: each group's share split among its task queues by waiting jobs."""
    with reading(runtime.engine) as conn:
        waiting = tq_db.waiting_per_task_queue(conn)
    priorities = task_queue_priorities(waiting, runtime.config.operations.Shares)
    changed = run_in_transaction(runtime.engine, lambda conn: tq_db.set_priorities(conn, priorities))
    if changed:
        # The Matcher draws with the priorities it cached with its candidates.
        runtime.caches.waiting.forget()
    return {"task_queues": len(priorities), "changed": changed}
