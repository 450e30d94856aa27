"""Resource quotas as the first layer of the evaluator (specs/001: quotas
sit on top of global, host and queue; DESIGN.md layer order).

The layer says whether the job may run under every enabled rule set here
(non-consumable limits, limits smaller than the job's need, and, when the
usage is known as in ``wms why``, full instances). The claim then debits
each applying rule instance conditionally, next to the level debits, so
a quota is never exceeded whatever the number of Matchers; the debits go
back with the others when the job ends, is killed or its lease expires.

``ctx.quotas`` is None when no rule set is enabled: the layer then costs
one attribute test and the claim nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import BaseLayer, Debit
from wms.core.match.verdict import ALLOW, Verdict, never, not_now
from wms.core.quotas.evaluate import Charge, JobFacts, QuotaRules, REASON_EXCEEDS, Refusal, exempt, full_detail

QUOTA = "quota"


@dataclass
class QuotaRequest:
    """The compiled rule sets for one pilot request, with its per-task-queue results."""

    rules: QuotaRules
    usage: dict[tuple[str, str], float] | None = None
    _memo: dict[int, tuple[list[Charge], Refusal | None]] = field(default_factory=dict)

    def assess(self, ctx: MatchContext, tq: TaskQueueView) -> tuple[list[Charge], Refusal | None]:
        result = self._memo.get(tq.tq_id)
        if result is None:
            result = self._memo[tq.tq_id] = self.rules.assess(
                facts(ctx, tq), tq.charged, tq.hard, tq.slots, lambda name: host_value(ctx, name), self.usage,
                key=tq.tq_id)
        return result


@dataclass(frozen=True)
class QuotaDebit(Debit):
    """A debit of a rule instance; ``label`` and ``who`` say which, for the reason."""

    label: str = ""
    who: str = ""


def facts(ctx: MatchContext, tq: TaskQueueView) -> JobFacts:
    return job_facts(tq, ctx.request.ref.name, ctx.request.host)


def job_facts(tq: TaskQueueView, queue: str, host: str | None) -> JobFacts:
    """What the filters see of a job of ``tq`` in ``queue`` (Site/CE/Queue) on ``host``."""
    definition = tq.definition
    return JobFacts(user=definition.owner, project=definition.project or None,
                    pe=definition.parallel_environment or None, queue=queue, host=host or None)


def host_value(ctx: MatchContext, name: str) -> Any:
    for level in ctx.levels:
        if level.level == "host":
            value = level.fixed.get(name, level.load.get(name))
            return value
    return None


class QuotaLayer(BaseLayer):
    name = QUOTA

    def check(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        request = ctx.quotas
        if request is None or exempt(tq.definition):
            return ALLOW
        _, refusal = request.assess(ctx, tq)
        if refusal is None:
            return ALLOW
        make = never if refusal.lasting else not_now
        return make(QUOTA, refusal.why, **{"resource": refusal.resource, "rule": refusal.label, **refusal.detail})

    def debits(self, ctx: MatchContext, tq: TaskQueueView) -> list[Debit]:
        """What the job takes from every applying rule instance (none in an advance reservation)."""
        request = ctx.quotas
        if request is None or exempt(tq.definition):
            return []
        charges, _ = request.assess(ctx, tq)
        return [QuotaDebit(QUOTA, c.scope, c.resource, c.amount, c.capacity, label=c.label, who=c.who)
                for c in charges]


QUOTA_LAYER = QuotaLayer()


def full_verdict(ctx: MatchContext, debit: QuotaDebit, used: float) -> Verdict:
    """The instance was full when the claim tried to debit it."""
    detail = full_detail(ctx.complexes, debit.label, debit.resource, used, debit.capacity, debit.who)
    return not_now(QUOTA, REASON_EXCEEDS, resource=debit.resource, rule=debit.label, **detail)
