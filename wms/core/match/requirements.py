"""The job's own requirements against the pilot's queue and the pilot.

Static part (NEVER, cached per task queue and queue): the scheduling
keywords (``core.scheduling``: Site,
BannedSite, Platform, CPUTime, Tags, NumberOfProcessors against the
queue's parameters) and a ClassAd Requirements expression that is False
on the queue's ad alone. Dynamic part (this pilot only): the pilot's own
Platform, the CPU time it has left, and the expression against the
queue's ad joined with the pilot's description (specs/004: it must be
True; Undefined or Error mean no match).
"""

from __future__ import annotations

from wms.core import classad, scheduling
from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import BaseLayer
from wms.core.match.verdict import ALLOW, Verdict, never, not_now
from wms.core.reasons import Reason

LAYER = "requirements"

# The queue parameters' own rules (core/scheduling.py) name themselves.
REASON_QUEUE_PARAMETERS = Reason("queue-parameters", "{rule}")
REASON_PILOT_PLATFORM = Reason("pilot-platform", "pilot platform {platform} not among {wanted}")
REASON_CPU_TIME_LEFT = Reason("pilot-cpu-time", "job needs {needed} s of CPU time, the pilot has {left} s left")
REASON_EXPRESSION_STATIC = Reason("expression-false-for-queue", "Requirements expression is false for this queue")
REASON_EXPRESSION = Reason("expression-not-true", "Requirements expression is not true on this pilot")


class RequirementsLayer(BaseLayer):
    name = LAYER

    def static(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        """What the configuration alone decides: cacheable."""
        definition = tq.definition
        request = scheduling.SchedulingRequest.from_definition(definition)
        reason = scheduling.rejection(request, ctx.request.ref, ctx.queue_params(tq.vo))
        if reason is not None:
            return never(LAYER, REASON_QUEUE_PARAMETERS, rule=reason)
        expression = definition.get("requirements_expr")
        if expression and classad.eval_bool(expression, {}, ctx.queue_ad(tq.vo)) is False:
            return never(LAYER, REASON_EXPRESSION_STATIC)
        return ALLOW

    def check(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        """What depends on the pilot that asks (nothing when judged without one)."""
        if ctx.without_pilot:
            return ALLOW
        definition = tq.definition
        pilot = ctx.request
        platforms = definition.get("platforms") or []
        if platforms and pilot.platform and pilot.platform not in platforms:
            return not_now(LAYER, REASON_PILOT_PLATFORM, platform=pilot.platform, wanted=",".join(platforms))
        needed = int(definition.get("cpu_time") or 0)
        if pilot.cpu_time_left is not None and needed > pilot.cpu_time_left:
            return not_now(LAYER, REASON_CPU_TIME_LEFT, needed=needed, left=int(pilot.cpu_time_left))
        expression = definition.get("requirements_expr")
        if expression:
            target = {**ctx.queue_ad(tq.vo), **ctx.pilot_ad}
            if classad.eval_bool(expression, {}, target) is not True:
                return not_now(LAYER, REASON_EXPRESSION)
        return ALLOW
