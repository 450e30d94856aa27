"""A pilot token holds at most the slots its pilot declared.

A pilot runs strangers' payloads; a payload that steals its token must
not drain the task queues with it. So a pilot-role token carries the
slots its pilot declared (`POST /pilots/token/renew`, or the queue's
slots per pilot for a SiteDirector pilot), and every claim made with it
debits the job's slots from the pilot's own usage row, ``pilot:<id>`` /
``slots``, with that declaration as its capacity. It is the claim's
conditional debit like any consumable's (wms/db/matching.py): race-free
whatever the number of Matchers, given back when the job ends, is
killed, or goes back to Waiting. The row is made when the slots are
declared, so the claim never has to.

Not a layer of the framework: it decides nothing about a task queue,
only about the caller, and no diagnosis (`wms why`) has a caller to ask
about. A request without a declaration (an operator's, or an older
pilot's token) debits nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass

from wms.core.match.context import PilotRequest, TaskQueueView
from wms.core.match.layer import Debit
from wms.core.match.verdict import Verdict, not_now
from wms.core.reasons import Reason
from wms.core.scopes import pilot_scope

LAYER = "pilot"
RESOURCE = "slots"
REASON_HELD = Reason("pilot-slots-held", "pilot {pilot} holds {used} of its {capacity} declared slots")
REASON_TOO_MANY = Reason("pilot-slots-too-many", "pilot {pilot} holds {used} of its {capacity} declared slots; "
                                                 "a job here takes {amount}")


@dataclass(frozen=True)
class PilotSlotsDebit(Debit):
    """The job's slots taken from its pilot's declaration; ``pilot`` names it in the reason."""

    pilot: str = ""


def usage_key(pilot_id: str) -> tuple[str, str]:
    """The usage row (scope, resource) a pilot's claims debit."""
    return pilot_scope(pilot_id), RESOURCE


def debit(request: PilotRequest, tq: TaskQueueView) -> PilotSlotsDebit | None:
    """The claim's debit of the pilot's declared slots; None when the request has no declaration."""
    if request.declared_slots is None:
        return None
    scope, resource = usage_key(request.pilot_id)
    return PilotSlotsDebit(LAYER, scope, resource, float(tq.slots), float(request.declared_slots),
                           pilot=request.pilot_id)


def with_debit(debits: list[Debit], request: PilotRequest, tq: TaskQueueView) -> list[Debit]:
    """``debits`` (in key order) and the pilot's, in key order: concurrent claimers lock rows in one order."""
    mine = debit(request, tq)
    if mine is None:
        return debits
    return sorted([*debits, mine], key=lambda d: (d.scope, d.resource))


def full_verdict(debit: PilotSlotsDebit, used: float) -> Verdict:
    """The pilot holds too much to take this job now."""
    detail = {"pilot": debit.pilot, "used": _count(used), "capacity": _count(debit.capacity),
              "amount": _count(debit.amount)}
    why = REASON_HELD if debit.amount <= 1 else REASON_TOO_MANY
    return not_now(LAYER, why, **detail)


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
