"""The SubmitPool layer: a task queue goes only to the queues its pool may use.

A SubmitPool's queues are computed when its first job is filed
(JobScheduling); getSubmitPoolsForQueue inverts that map, and a pilot
says (or is told) which pools its queue serves: ``ctx.request.pools``. A
task queue without a pool may go anywhere; a request that names no pools
is not restricted by them.

The denial says which requirement of the pool the queue lacks (the pool's
own rule, core/pools.py ``queue_rejection``) when the context holds the
pool's requirements (``ctx.pool_rules``: `wms why`, `wms match-queues`,
`wms submit`'s warning); the Matcher and the SiteDirector, which never
show it, decide without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import BaseLayer
from wms.core.match.verdict import ALLOW, Verdict, never
from wms.core.pools import queue_rejection
from wms.core.reasons import Reason

LAYER = "pools"
REASON_POOL = Reason("not-in-submit-pool", "not in the job's SubmitPool {pool}")
# The same refusal with the pool's own cause (the code stays: programs see one refusal).
REASON_POOL_CAUSE = Reason("not-in-submit-pool", "not in the job's SubmitPool {pool}: {cause}")


@dataclass(frozen=True)
class PoolRules:
    """The requirements of the pools a judgement may name, to say why a queue is not in one."""

    # Pool id -> its stored document (core/pools.py pool_document).
    documents: Mapping[str, Mapping[str, Any]]
    # The declared types of queue parameters (operations.yaml JobDescription.Parameters).
    types: Mapping[str, str]


def admits(pools: tuple[str, ...] | frozenset[str] | set[str] | None, pool: str | None) -> bool:
    """Whether a queue serving ``pools`` may run a task queue of ``pool``."""
    return pool is None or pools is None or pool in pools


class PoolsLayer(BaseLayer):
    name = LAYER

    def static(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        pool = tq.submit_pool
        if pool is None or admits(ctx.request.pools, pool):
            return ALLOW
        rules = ctx.pool_rules
        document = rules.documents.get(pool) if rules is not None else None
        if rules is None or document is None:
            return never(LAYER, REASON_POOL, pool=pool)
        params = ctx.resources_for(tq.vo).queue_parameters(ctx.request.ref)
        cause = queue_rejection(document, params, rules.types)
        if cause is None:       # the pool's rule admits the queue now: the map was computed before
            return never(LAYER, REASON_POOL, pool=pool)
        return never(LAYER, REASON_POOL_CAUSE, pool=pool, cause=cause)


def listed_reason(verdict: Verdict) -> str:
    """A denial as a list of one job's queues gives it (`wms match-queues -v`,
    `wms submit`'s warning): a pool's denial by its cause alone (the list is
    about this job's pool), any other by its reason."""
    if verdict.why is REASON_POOL_CAUSE:
        return str(verdict.detail["cause"])
    return verdict.reason
