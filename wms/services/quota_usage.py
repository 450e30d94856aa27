"""What running jobs hold of the resource quota sets, counted afresh when
the sets change.

specs/001: the sets "limit the resources used at a single time by a
consumer" and "all of the configured rule sets apply all of the time". A
set that is added, changed or enabled while jobs run must count those
jobs at once (Grid Engine's qmaster debits a new or changed set for every
running job), or it would let as many more start as its limit. So every
change of the sets recounts, in the transaction that stores it, what each
Matched and Running job holds of the new rule instances, and rewrites
their usage rows. The usage guard (wms/db/matching.py) keeps claims and
releases out meanwhile, and a claim made with the old sets is refused
afterwards (it names the version it applied).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from wms.core.match.levels import stored_task_queue_view
from wms.core.match.quotas import job_facts
from wms.core.quotas.evaluate import QuotaRules, exempt
from wms.core.quotas.filters import Groups
from wms.core.quotas.model import RuleSet
from wms.db import matching as match_db
from wms.db import quotas as quotas_db
from wms.services.runtime import Runtime


def recount(runtime: Runtime, conn: Connection, sets: list[RuleSet], groups: Groups) -> int:
    """Rewrite every job's rule-instance debits and the instances' usage for ``sets``.

    The caller holds the usage guard for recounting (``lock_usage_for_recount``)
    in ``conn``'s transaction. Returns how many jobs hold something now.
    """
    table = runtime.read_stored_complexes()
    rules = QuotaRules(sets, groups, table)
    held: list[tuple[int, str, str, float]] = []
    if rules:
        jobs = quotas_db.holding_jobs(conn)
        tq_ids = sorted({job["task_queue_id"] for job in jobs if job["task_queue_id"] is not None})
        views = {row["tq_id"]: stored_task_queue_view(row, table)
                 for row in match_db.get_task_queues(conn, tq_ids)}
        for job in jobs:
            view = views.get(job["task_queue_id"])
            if view is None or exempt(view.definition):
                continue
            facts = job_facts(view, job["queue"], job["host"])
            held += [(job["job_id"], *item) for item in rules.held(facts, view.charged, view.slots)]
    quotas_db.replace_instance_debits(conn, held)
    return len({job_id for job_id, *_ in held})
