"""The states of an advance reservation (specs/003 5.2.3.1, qrstat(1)).

``w`` waiting: granted, start not reached; ``r`` running: start reached;
``x`` exited: end reached, jobs being removed; ``d`` deleted by qrdel;
``E`` error after the start (a reserved queue was lost), ``W`` the same
before the start. An error state returns to ``r``/``w`` when the queue is
back. ``x`` and ``d`` are final.
"""

from __future__ import annotations

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

TRANSITIONS: dict[ARState, frozenset[ARState]] = {
    ARState.WAITING: frozenset({ARState.RUNNING, ARState.WAITING_ERROR, ARState.DELETED, ARState.EXITED}),
    ARState.WAITING_ERROR: frozenset({ARState.WAITING, ARState.ERROR, ARState.DELETED, ARState.EXITED}),
    ARState.RUNNING: frozenset({ARState.EXITED, ARState.ERROR, ARState.DELETED}),
    ARState.ERROR: frozenset({ARState.RUNNING, ARState.EXITED, ARState.DELETED}),
    ARState.EXITED: frozenset(),
    ARState.DELETED: frozenset(),
}


def can_move(current: str, new: str) -> bool:
    return ARState(new) in TRANSITIONS[ARState(current)]


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
