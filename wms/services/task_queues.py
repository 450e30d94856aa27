"""Task queues as seen by operators and `wms task-queues`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from wms.core.identity import Identity
from wms.core.shares import task_queue_priorities
from wms.db import task_queues as tq_db
from wms.db.engine import reading
from wms.services import access
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime


def list_task_queues(runtime: Runtime, identity: Identity) -> list[dict[str, Any]]:
    """The task queues the caller may see (visibility.task_queues; by default its VO's)."""
    with reading(runtime.engine) as conn:
        rows = tq_db.list_task_queues(conn)
    policy = access.policy(runtime)
    out = []
    for row in rows:
        if not access.may_see_task_queue(identity, row, policy):
            continue
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
