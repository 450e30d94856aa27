"""The states of an advance reservation (specs/003 5.2.3.1, qrstat(1)).

``w`` waiting: granted, start not reached; ``r`` running: start reached;
``x`` exited: end reached, jobs being removed; ``d`` deleted by qrdel;
``E`` error after the start (a reserved queue was lost), ``W`` the same
before the start. An error state returns to ``r``/``w`` when the queue is
back. ``x`` and ``d`` are final.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class ARState(StrEnum):
    WAITING = "w"
    RUNNING = "r"
    EXITED = "x"
    DELETED = "d"
    ERROR = "E"
    WAITING_ERROR = "W"


ACTIVE = frozenset({ARState.WAITING, ARState.RUNNING, ARState.ERROR, ARState.WAITING_ERROR})
FINAL = frozenset({ARState.EXITED, ARState.DELETED})
# States in which the reservation holds its resources in the usage rows.
STARTED = frozenset({ARState.RUNNING, ARState.ERROR})

def due_state(current: str, start: datetime, end: datetime, now: datetime, lost: bool) -> ARState:
    """Where a reservation should be at ``now``: by its window, and in error when a reserved queue is lost."""
    state = ARState(current)
    if state in FINAL:
        return state
    if now >= end:
        return ARState.EXITED
    started = now >= start
    if lost:
        return ARState.ERROR if started else ARState.WAITING_ERROR
    return ARState.RUNNING if started else ARState.WAITING


def usable(state: str, hard_error: bool) -> bool:
    """Whether jobs of the reservation may be dispatched now (specs/003 -he)."""
    return state == ARState.RUNNING or (state == ARState.ERROR and not hard_error)


# ---------------------------------------------------------------- what a move reports and mails
# qrsub -m: b mails when the reservation starts, e when it ends, a when it
# goes into or out of error. A report key says what happened, for the
# reservation_manager agent's one-line report.
@dataclass(frozen=True)
class Effects:
    report: str
    mails: tuple[str, ...] = ()


def effects_of(current: str, target: ARState, mail_options: str, message: str = "") -> Effects:
    """What moving a reservation from ``current`` to ``target`` reports and mails (the events as worded in mail)."""
    state = ARState(current)
    wants = set(mail_options)
    if target is ARState.EXITED:
        return Effects("ended", ("ended",) if "e" in wants else ())
    if state is ARState.WAITING_ERROR and target is ARState.ERROR:
        return Effects("started")           # started while still in error: no new mail
    if target is ARState.RUNNING and state is ARState.WAITING:
        return Effects("started", ("started",) if "b" in wants else ())
    if target in (ARState.ERROR, ARState.WAITING_ERROR):
        return Effects("error", (f"is in error state: {message}",) if "a" in wants else ())
    mails = ["is valid again"] if "a" in wants else []
    if target is ARState.RUNNING and state is ARState.WAITING_ERROR and "b" in wants:
        mails.append("started")
    return Effects("recovered", tuple(mails))
