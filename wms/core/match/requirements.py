"""The job's own requirements against the pilot's queue and the pilot.

Static part (NEVER, cached per task queue and queue): the scheduling
keywords (``core.scheduling``: Site,
BannedSite, Platform, CPUTime, Tags, NumberOfProcessors against the
queue's parameters) and a ClassAd Requirements expression that is False
on the queue's ad alone. Dynamic part (this pilot only): the pilot's own
Platform, the CPU time it has left, and the expression against the
queue's ad joined with the pilot's description (specs/004: it must be
True; Undefined or Error mean no match). The job's own ad, as far as the
expression reads it (core/pools.py), is MY in both.

An expression the ClassAd library raises on, or one that takes more than
its evaluation budget (``limits.evaluation_ms``, wms.core.evaluation), is
a HOLD: its task queue's waiting jobs are held by the system and not
evaluated again, rather than evaluated (and failing) at every pilot
request that draws them. A task queue holds jobs of identical
requirements, so all of them are held; the reason says so.
"""

from __future__ import annotations

from wms.core import classad, evaluation, scheduling
from wms.core.errors import InvalidInput
from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import BaseLayer
from wms.core.match.verdict import ALLOW, Verdict, hold, never, not_now
from wms.core.reasons import Reason

LAYER = "requirements"

# The queue parameters' own rules (core/scheduling.py) name themselves.
REASON_QUEUE_PARAMETERS = Reason("queue-parameters", "{rule}")
REASON_PILOT_PLATFORM = Reason("pilot-platform", "pilot platform {platform} not among {wanted}")
REASON_CPU_TIME_LEFT = Reason("pilot-cpu-time", "job needs {needed} s of CPU time, the pilot has {left} s left")
REASON_EXPRESSION_STATIC = Reason("expression-false-for-queue", "Requirements expression is false for this queue")
REASON_EXPRESSION = Reason("expression-not-true", "Requirements expression is not true on this pilot")
REASON_EXPRESSION_FAILED = Reason(
    "expression-failed",
    "Requirements expression cannot be evaluated on a pilot of {queue}: {error} "
    "(this holds every waiting job of task queue {tq}: the same requirements)")
REASON_EXPRESSION_OVER_BUDGET = Reason(
    "expression-over-budget",
    "{budget} on a pilot of {queue} (this holds every waiting job of task queue {tq}: the same requirements)")


class RequirementsLayer(BaseLayer):
    name = LAYER

    def static(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        """What the configuration alone decides: cacheable."""
        definition = tq.definition
        reason = scheduling.rejection(definition.request, ctx.request.ref, ctx.queue_params(tq.vo))
        if reason is not None:
            return never(LAYER, REASON_QUEUE_PARAMETERS, rule=reason)
        expression = definition.requirements_expr
        if expression:
            try:
                static = classad.eval_bool(expression, definition.requirements_ad, ctx.queue_ad(tq.vo))
            except InvalidInput:
                static = None       # the queue's ad alone does not decide: the request phase says why
            if static is False:
                return never(LAYER, REASON_EXPRESSION_STATIC)
        return ALLOW

    def check(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        """What depends on the pilot that asks (nothing when judged without one)."""
        if ctx.without_pilot:
            return ALLOW
        definition = tq.definition
        pilot = ctx.request
        platforms = definition.request.platforms
        if platforms and pilot.platform and pilot.platform not in platforms:
            return not_now(LAYER, REASON_PILOT_PLATFORM, platform=pilot.platform, wanted=",".join(platforms))
        needed = definition.request.cpu_time
        if pilot.cpu_time_left is not None and needed > pilot.cpu_time_left:
            return not_now(LAYER, REASON_CPU_TIME_LEFT, needed=needed, left=int(pilot.cpu_time_left))
        expression = definition.requirements_expr
        if expression:
            my = definition.requirements_ad
            target = {**ctx.queue_ad(tq.vo), **ctx.pilot_ad}
            try:
                verdict, seconds = evaluation.judged(lambda: classad.eval_bool(expression, my, target),
                                                     ctx.evaluation_limit)
            except InvalidInput as exc:     # the expression raises on this pilot: held, not evaluated again
                return hold(LAYER, REASON_EXPRESSION_FAILED, error=exc.message, queue=ctx.request.ref.name,
                            tq=tq.tq_id)
            if seconds is not None:
                return hold(LAYER, REASON_EXPRESSION_OVER_BUDGET, queue=ctx.request.ref.name, tq=tq.tq_id,
                            budget=evaluation.over_budget_message("Requirements", seconds,
                                                                  ctx.evaluation_limit))
            if verdict is not True:
                return not_now(LAYER, REASON_EXPRESSION)
        return ALLOW
