"""Task queues as seen by operators and `wms task-queues`."""

from __future__ import annotations

import json
from typing import Any

from wms.db.engine import reading
from wms.db import task_queues as tq_db
from wms.services.runtime import Runtime


def list_task_queues(runtime: Runtime) -> list[dict[str, Any]]:
    with reading(runtime.engine) as conn:
        rows = tq_db.list_task_queues(conn)
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
