"""The reservation layer of the Matcher (specs/003 5.2.2.1.3 item 2, 5.3.2.2, 5.3.2.3).

* A job of a reservation is matched only while the reservation runs (state
  r, or E with soft error handling), only on the queues (and hosts) it was
  granted, and it is debited from the reservation: its consumables are
  charged to the reservation's own usage rows ``ar:<id>|<scope>``, whose
  capacity is what the reservation booked there.
* Any other job: one without a runtime limit (h_rt) is never matched to a
  queue that holds a reservation (waiting or running), or, when the
  reservation is bound to hosts, to those hosts of the queue, so it cannot
  hold reserved slots at the start; one with h_rt is matched if it ends (h_rt
  plus duration_offset) before the reservations it overlaps start, or if it
  fits beside them: the capacity its debits are checked against is reduced
  by what those reservations booked. A running reservation already holds
  its bookings in the usage rows, so only waiting ones reduce capacities.

The queue phase judges the queue alone (a reservation's state, the queues
it holds, the ones it holds as a whole); the request phase the same and
the pilot's host. With no reservation the layer returns at once
(``ctx.reservations`` is None).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Sequence

from wms.core.match.context import MatchContext, TaskQueueView
from wms.core.match.layer import BaseLayer, Debit
from wms.core.match.verdict import ALLOW, Verdict, not_now
from wms.core.quantities import time_limit
from wms.core.reservations.states import STARTED, usable
from wms.core.reasons import Reason
from wms.core.scopes import reservation_scope

LAYER = "reservation"
REASON_UNKNOWN = Reason("reservation-unknown", "advance reservation {ar_id} does not exist or has ended")
REASON_NOT_RUNNING = Reason("reservation-not-running",
                            "advance reservation {ar_id} is not running (state {state}, starts {start})")
REASON_HARD_ERROR = Reason("reservation-hard-error", "advance reservation {ar_id} is in error state and its "
                           "error handling is hard (-he yes)")
REASON_OTHER_QUEUE = Reason("reservation-other-queue", "advance reservation {ar_id} holds nothing in this queue")
REASON_OTHER_HOST = Reason("reservation-other-host", "advance reservation {ar_id} holds nothing on host {host}")
REASON_NO_RUNTIME_LIMIT = Reason("no-runtime-limit-beside-reservation", "jobs without a runtime limit (h_rt) never "
                                 "run in a queue holding an advance reservation ({ids})")


@dataclass(frozen=True)
class ReservationView:
    ar_id: int
    state: str
    start: datetime
    end: datetime
    hard_error: bool
    acl: tuple[str, ...]
    # (scope, resource, amount, queue, host or None)
    bookings: tuple[tuple[str, str, float, str, str | None], ...]


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    reservations: tuple[ReservationView, ...]
    duration_offset: float = 0.0
    _by_id: dict[int, ReservationView] = field(init=False, repr=False, compare=False)
    _held: dict[str, list[tuple[int, str | None]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Looked up per task queue: index once.
        held: dict[str, list[tuple[int, str | None]]] = {}
        for view in self.reservations:
            for queue, host in sorted({(b[3], b[4]) for b in view.bookings}, key=lambda qh: (qh[0], qh[1] or "")):
                held.setdefault(queue, []).append((view.ar_id, host))
        object.__setattr__(self, "_by_id", {r.ar_id: r for r in self.reservations})
        object.__setattr__(self, "_held", held)

    def get(self, ar_id: int) -> ReservationView | None:
        return self._by_id.get(ar_id)

    def holding(self, queue: str, host: str | None) -> list[int]:
        """The reservations that booked ``queue`` as a whole, or on ``host`` (None: as a whole only)."""
        return sorted({ar_id for ar_id, bound in self._held.get(queue, ()) if bound is None or bound == host})


def _h_rt(tq: TaskQueueView) -> float | None:
    return time_limit(tq.hard.get("h_rt"))


class ReservationLayer(BaseLayer):
    name = LAYER

    def queue(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        """What the reservations decide for the queue whatever pilot asks (the
        queue phase: the SiteDirector sends no pilot for a reservation that
        has not started, or that holds nothing in the queue)."""
        return _judged(ctx, tq, None)

    def check(self, ctx: MatchContext, tq: TaskQueueView) -> Verdict:
        """The queue phase's judgement and, with a pilot asking, its host's."""
        if ctx.reservations is None and tq.definition.reservation is None:
            return ALLOW        # no reservation anywhere: the common case, asked of every task queue
        return _judged(ctx, tq, ctx.request.host or None)

    def adjust(self, ctx: MatchContext, tq: TaskQueueView, debits: Sequence[Debit]) -> list[Debit]:
        return adjust_debits(ctx, tq, debits)


def _judged(ctx: MatchContext, tq: TaskQueueView, host: str | None) -> Verdict:
    """The layer's verdict on the pilot's queue, and on ``host`` unless None
    (no pilot asks: what holds for every host of the queue). One function
    for both phases, so the request phase denies whatever the queue phase does."""
    snap: Snapshot | None = ctx.reservations
    ar_id = tq.definition.reservation
    if ar_id is None:
        if snap is None or _h_rt(tq) is not None:
            return ALLOW
        holding = snap.holding(ctx.request.ref.name, host)
        if holding:
            return not_now(LAYER, REASON_NO_RUNTIME_LIMIT, ids=", ".join(map(str, holding)))
        return ALLOW
    view = snap.get(ar_id) if snap is not None else None
    if view is None:
        return not_now(LAYER, REASON_UNKNOWN, ar_id=ar_id)
    if not usable(view.state, view.hard_error):
        if view.state == "E":
            return not_now(LAYER, REASON_HARD_ERROR, ar_id=ar_id)
        return not_now(LAYER, REASON_NOT_RUNNING, ar_id=ar_id, state=view.state,
                       start=view.start.strftime("%m/%d/%Y %H:%M:%S"))
    queue = ctx.request.ref.name
    hosts = {b[4] for b in view.bookings if b[3] == queue}
    if not hosts:
        return not_now(LAYER, REASON_OTHER_QUEUE, ar_id=ar_id)
    if host is not None and None not in hosts and host not in hosts:
        return not_now(LAYER, REASON_OTHER_HOST, ar_id=ar_id, host=host)
    return ALLOW


def adjust_debits(ctx: MatchContext, tq: TaskQueueView, debits: Sequence[Debit]) -> list[Debit]:
    """The claim's debits with reservations applied (see the module docstring)."""
    snap: Snapshot | None = ctx.reservations
    if snap is None:
        return list(debits)
    ar_id = tq.definition.reservation
    if ar_id is not None:
        view = snap.get(ar_id)
        if view is None:
            return list(debits)
        held: dict[tuple[str, str], float] = {}
        for scope, resource, amount, _, _ in view.bookings:
            held[(scope, resource)] = held.get((scope, resource), 0.0) + amount
        return [dataclasses.replace(d, scope=reservation_scope(ar_id, d.scope), capacity=held[(d.scope, d.resource)])
                if (d.scope, d.resource) in held else d for d in debits]
    h_rt = _h_rt(tq)
    ends = None if h_rt is None else snap.now + timedelta(seconds=h_rt + snap.duration_offset)
    reduce: dict[tuple[str, str], float] = {}
    for view in snap.reservations:
        if view.state in STARTED or view.end <= snap.now or (ends is not None and view.start >= ends):
            continue
        for scope, resource, amount, _, _ in view.bookings:
            reduce[(scope, resource)] = reduce.get((scope, resource), 0.0) + amount
    if not reduce:
        return list(debits)
    return [dataclasses.replace(d, capacity=d.capacity - reduce[(d.scope, d.resource)])
            if (d.scope, d.resource) in reduce else d for d in debits]
