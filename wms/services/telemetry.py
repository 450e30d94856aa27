"""What the services count for the Prometheus metrics (docs/metrics.md).

The metric objects live here, beside the code that records them; the API
(wms/api/metrics.py) only exposes them. Every label takes values from a
short fixed set (layer names, causes, outcomes), never from a request, so
the number of series stays bounded.

Under ``wms server --workers N`` prometheus-client's multiprocess mode keeps
each worker's values in a file of PROMETHEUS_MULTIPROC_DIR and sums them
when scraped; the gauges here say how (``livesum``: the live processes'
values added up).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge
from sqlalchemy import event
from sqlalchemy.engine import Engine

from wms.db import pilots as pilots_db
from wms.db.engine import reading

MATCHED = "matched"
NO_MATCH = "no_match"

# The layer label of a no-match that no layer decided.
NO_CANDIDATE = "no_waiting_job"        # no waiting job the pilot's pools and VO may take
TAKEN = "taken"                        # the jobs tried were taken by other Matchers first
RULES_CHANGING = "rules_changing"      # resource quota sets kept changing under the request

# Causes of claim retries.
CONFLICT = "conflict"                  # a deadlock or serialization failure: the transaction ran again
DOES_NOT_FIT = "does_not_fit"          # a debit found its consumable full: the next task queue is tried
RULES_CHANGED = "rules_changed"        # the quota sets changed: the request started again

MATCH_REQUESTS = Counter(
    "wms_match_requests", "Pilot match requests answered, by outcome and, for a no-match, the deciding layer",
    ["outcome", "layer"],
)
CLAIM_RETRIES = Counter(
    "wms_claim_retries", "Claims tried again within a match request, by cause", ["cause"],
)
POOL_IN_USE = Gauge(
    "wms_db_pool_connections_in_use", "Database connections checked out of the pools of the server processes",
    multiprocess_mode="livesum",
)
POOL_LIMIT = Gauge(
    "wms_db_pool_connections_limit", "Most connections the pools of the server processes may open",
    multiprocess_mode="livesum",
)


def match_answered(layer: str | None) -> None:
    """One match request answered: a job (``layer`` None) or a no-match decided by ``layer``."""
    if layer is None:
        MATCH_REQUESTS.labels(MATCHED, "").inc()
    else:
        MATCH_REQUESTS.labels(NO_MATCH, layer).inc()


def claim_retried(cause: str) -> None:
    CLAIM_RETRIES.labels(cause).inc()


def watch_pool(engine: Engine) -> None:
    """Count the connections ``engine`` lends out (once per engine)."""
    if getattr(engine, "_wms_pool_watched", False):
        return
    engine._wms_pool_watched = True  # type: ignore[attr-defined]
    pool = engine.pool
    size = getattr(pool, "size", None)
    overflow = getattr(pool, "_max_overflow", 0)
    if callable(size):
        POOL_LIMIT.inc(size() + max(0, overflow))
    event.listen(engine, "checkout", lambda *_: POOL_IN_USE.inc())
    event.listen(engine, "checkin", lambda *_: POOL_IN_USE.dec())


# ---------------------------------------------------------------- read when scraped
# Task queues shown one by one in wms_waiting_jobs; the rest are summed
# under task_queue="other", so that a million small task queues cannot
# flood the time-series database.
TASK_QUEUE_SERIES = 500


@dataclass(frozen=True)
class DatabaseCounts:
    waiting: list[tuple[str, str, int]]     # (task queue id or "other", VO, waiting jobs)
    pilots: dict[str, int]                  # pilots by state (every state, 0 included)
    ran_nothing: int = 0                    # pilots that ended without running a job


def database_counts(engine: Engine) -> DatabaseCounts:
    """What the database says now: waiting jobs per task queue, pilots by state, pilots that ran nothing."""
    with reading(engine) as conn:
        waiting = pilots_db.waiting_jobs_by_task_queue(conn)
        pilots = pilots_db.count_all_by_state(conn)
        ran_nothing = pilots_db.count_ran_nothing(conn)
    waiting.sort(key=lambda row: -row[3])
    shown = [(str(tq_id), vo or "", n) for tq_id, _, vo, n in waiting[:TASK_QUEUE_SERIES]]
    others: dict[str, int] = {}
    for _, _, vo, n in waiting[TASK_QUEUE_SERIES:]:
        others[vo or ""] = others.get(vo or "", 0) + n
    shown += [("other", vo, n) for vo, n in sorted(others.items())]
    return DatabaseCounts(shown, {**dict.fromkeys(pilots_db.PILOT_STATES, 0), **pilots}, ran_nothing)
