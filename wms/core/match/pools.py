"""The SubmitPool layer: a task queue goes only to the queues its pool may use.

A SubmitPool's queues are computed when its first job is filed
(JobScheduling); getSubmitPoolsForQueue inverts that map, and a pilot
says (or is told) which pools its queue serves: ``ctx.request.pools``. A
task queue without a pool may go anywhere; a request that names no pools
is not restricted by them.
"""

from __future__ import annotations

from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import BaseLayer
from wms.core.match.verdict import ALLOW, Verdict, never
from wms.core.reasons import Reason

LAYER = "pools"
REASON_POOL = Reason("not-in-submit-pool", "not in the job's SubmitPool {pool}")


def admits(pools: tuple[str, ...] | frozenset[str] | set[str] | None, pool: str | None) -> bool:
    """Whether a queue serving ``pools`` may run a task queue of ``pool``."""
    return pool is None or pools is None or pool in pools


class PoolsLayer(BaseLayer):
    name = LAYER

    def static(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        if admits(ctx.request.pools, tq.submit_pool):
            return ALLOW
        return never(LAYER, REASON_POOL, pool=tq.submit_pool)
