"""The Matcher's reservation layer and debits (core/match/reservations.py), table-driven."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from wms.core.complexes import ComplexTable
from wms.core.match.context import MatchContext, PilotRequest, TaskQueueView
from wms.core.match.layer import Debit
from wms.core.match.reservations import (
    REASON_HARD_ERROR, REASON_NO_RUNTIME_LIMIT, REASON_OTHER_HOST, REASON_OTHER_QUEUE, REASON_UNKNOWN,
    ReservationLayer, ReservationView, Snapshot, adjust_debits,
)
from wms.core.match.verdict import Code
from wms.core.scheduling import SchedulingRequest
from wms.core.task_queues import TaskQueueDefinition

NOW = datetime(2030, 1, 1, 10, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)
Q = "S/c/q"
QS = f"queue:{Q}"


def view(ar_id=1, state="r", start=NOW, hours=2, hard=False, host=None, amount=2.0, queue=Q) -> ReservationView:
    return ReservationView(ar_id, state, start, start + hours * HOUR, hard, ("u",),
                           ((f"queue:{queue}", "slots", amount, queue, host),))


def ctx(*views, host="wn1") -> MatchContext:
    request = PilotRequest(site="S", ce="c", queue="q", host=host, pilot_id="p")
    return MatchContext(request=request, levels=(), usage={}, complexes=ComplexTable.builtin(), pilot_ad={},
                        resources_for=lambda vo: None,
                        reservations=Snapshot(NOW, tuple(views), 60) if views else None)


def tq(reservation=None, h_rt=None) -> TaskQueueView:
    hard = {"h_rt": h_rt} if h_rt is not None else {}
    return TaskQueueView(1, 1, TaskQueueDefinition("u", "g", "vo", None, SchedulingRequest(), reservation=reservation),
                         hard, {})


@pytest.mark.parametrize("views, job, host, code, reason", [
    ((), tq(), "wn1", Code.OK, ""),                                        # no reservation: nothing to check
    ((view(),), tq(h_rt=600.0), "wn1", Code.OK, ""),
    ((view(),), tq(), "wn1", Code.NOT_NOW, REASON_NO_RUNTIME_LIMIT.format(ids="1")),
    ((view(host="h2"),), tq(), "wn1", Code.OK, ""),                        # bound to h2 only
    ((view(host="h2"),), tq(), "h2", Code.NOT_NOW, REASON_NO_RUNTIME_LIMIT.format(ids="1")),
    ((view(queue="S/c/other"),), tq(), "wn1", Code.OK, ""),
    ((view(),), tq(reservation=1, h_rt=600.0), "wn1", Code.OK, ""),
    ((view(),), tq(reservation=2), "wn1", Code.NOT_NOW, REASON_UNKNOWN.format(ar_id=2)),
    ((view(state="E", hard=True),), tq(reservation=1), "wn1", Code.NOT_NOW, REASON_HARD_ERROR.format(ar_id=1)),
    ((view(state="E"),), tq(reservation=1), "wn1", Code.OK, ""),
    ((view(queue="S/c/other"),), tq(reservation=1), "wn1", Code.NOT_NOW, REASON_OTHER_QUEUE.format(ar_id=1)),
    ((view(host="h2"),), tq(reservation=1), "wn1", Code.NOT_NOW, REASON_OTHER_HOST.format(ar_id=1, host="wn1")),
])
def test_layer(views, job, host, code, reason):
    verdict = ReservationLayer().check(ctx(*views, host=host), job)
    assert (verdict.code, verdict.reason) == (code, reason)


def test_waiting_reservation_not_running_yet():
    verdict = ReservationLayer().check(ctx(view(state="w", start=NOW + HOUR)), tq(reservation=1))
    assert verdict.reason == "advance reservation 1 is not running (state w, starts 01/01/2030 11:00:00)"


DEBIT = Debit("queue", QS, "slots", 1.0, 4.0)


@pytest.mark.parametrize("views, job, expected", [
    ((view(state="r"),), tq(h_rt=600.0), DEBIT),                                   # running: already held
    ((view(state="w", start=NOW + HOUR),), tq(h_rt=600.0), DEBIT),                # ends before the start
    ((view(state="w", start=NOW + HOUR),), tq(h_rt=3600.0), Debit("queue", QS, "slots", 1.0, 2.0)),  # overlaps
    ((view(state="w", start=NOW + 10 * HOUR),), tq(), Debit("queue", QS, "slots", 1.0, 2.0)),  # no h_rt: for ever
    ((view(state="r"),), tq(reservation=1), Debit("queue", f"ar:1|{QS}", "slots", 1.0, 2.0)),  # debited from the AR
])
def test_debits(views, job, expected):
    assert adjust_debits(ctx(*views), job, [DEBIT]) == [expected]


QUEUE_PHASE = [
    ((), tq(), Code.OK, ""),
    ((view(),), tq(), Code.NOT_NOW, REASON_NO_RUNTIME_LIMIT.format(ids="1")),    # held as a whole
    ((view(host="h2"),), tq(), Code.OK, ""),                                      # some hosts only: a pilot's
    ((view(),), tq(reservation=2), Code.NOT_NOW, REASON_UNKNOWN.format(ar_id=2)),
    ((view(state="w", start=NOW + HOUR),), tq(reservation=1), Code.NOT_NOW,
     "advance reservation 1 is not running (state w, starts 01/01/2030 11:00:00)"),
    ((view(state="E", hard=True),), tq(reservation=1), Code.NOT_NOW, REASON_HARD_ERROR.format(ar_id=1)),
    ((view(queue="S/c/other"),), tq(reservation=1), Code.NOT_NOW, REASON_OTHER_QUEUE.format(ar_id=1)),
    ((view(host="h2"),), tq(reservation=1), Code.OK, ""),                         # the host is a pilot's
]


@pytest.mark.parametrize("views, job, code, reason", QUEUE_PHASE)
def test_the_queue_phase_judges_the_queue_whatever_host(views, job, code, reason):
    verdict = ReservationLayer().queue(ctx(*views, host=""), job)
    assert (verdict.code, verdict.reason) == (code, reason)


@pytest.mark.parametrize("views, job, code, reason", QUEUE_PHASE)
@pytest.mark.parametrize("host", ["", "wn1", "h2"])
def test_the_request_phase_denies_whatever_the_queue_phase_denies(views, job, code, reason, host):
    """So the Matcher never hands out a job the SiteDirector sends no pilot for; and with no pilot
    asking (`wms why`) it is the queue phase's verdict."""
    verdict = ReservationLayer().check(ctx(*views, host=host), job)
    if code is not Code.OK:
        assert (verdict.code, verdict.reason) == (code, reason)
    elif not host:
        assert verdict.allowed
