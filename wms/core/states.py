"""Job states and the transitions between them.

The life of a job follows DIRAC's: Received -> Checking -> Waiting ->
Matched -> Running -> Done / Failed / Killed / Stalled. A stalled or
matched job whose pilot vanished goes back to Waiting when it is
rescheduled; an ended one (Done, Failed, Killed) when its owner or an
operator reschedules it (`wms reschedule`), as a new attempt. Any job may
be Deleted (`wms delete`): it leaves every list, and is purged later. Every change is recorded in the status history with its time
and source.

A waiting job may be Held: out of matching (its task queue never draws
it) until every hold on it is released, when it waits again; a held job
can be killed. Grid Engine's three kinds of hold (qhold(1) ``-h u|o|s``)
are kept on the job (``jobs.hold_types``, :class:`HoldType`): the user's,
an operator's, and the system's. The system holds a job whose
Requirements expression fails or runs over its evaluation budget at match
time (wms.core.match.requirements); the minor status says who holds it
and why, as ``wms status`` shows it.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    RECEIVED = "Received"
    CHECKING = "Checking"
    WAITING = "Waiting"
    MATCHED = "Matched"
    RUNNING = "Running"
    DONE = "Done"
    FAILED = "Failed"
    KILLED = "Killed"
    STALLED = "Stalled"
    HELD = "Held"
    DELETED = "Deleted"


class HoldType(StrEnum):
    """Who holds a job: Grid Engine's hold types (qhold -h u|o|s), stored as their letters."""

    USER = "u"
    OPERATOR = "o"
    SYSTEM = "s"


#: The minor status of a job the system holds begins so.
HELD_BY_SYSTEM = "Held by the system"


FINAL_STATES = frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.KILLED, JobStatus.DELETED})

# Which state may follow which; anything else is refused.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.RECEIVED: frozenset({JobStatus.CHECKING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.CHECKING: frozenset({JobStatus.WAITING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.WAITING: frozenset(
        {JobStatus.MATCHED, JobStatus.CHECKING, JobStatus.HELD, JobStatus.FAILED, JobStatus.KILLED}
    ),
    JobStatus.HELD: frozenset({JobStatus.WAITING, JobStatus.KILLED}),
    JobStatus.MATCHED: frozenset({JobStatus.RUNNING, JobStatus.WAITING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.RUNNING: frozenset(
        {JobStatus.DONE, JobStatus.FAILED, JobStatus.KILLED, JobStatus.STALLED}
    ),
    JobStatus.STALLED: frozenset({JobStatus.RUNNING, JobStatus.WAITING, JobStatus.FAILED, JobStatus.KILLED}),
    # Final, but for `wms reschedule`: a new attempt (wms.services.rescheduling).
    JobStatus.DONE: frozenset({JobStatus.WAITING}),
    JobStatus.FAILED: frozenset({JobStatus.WAITING}),
    JobStatus.KILLED: frozenset({JobStatus.WAITING}),
}

# `wms delete`: every job may go (what runs is killed first); a deleted one is
# out of every list, and purged with its output and sandboxes after
# deleted_job_retention (wms.services.deletion).
for _state in JobStatus:
    if _state != JobStatus.DELETED:
        TRANSITIONS[_state] = TRANSITIONS[_state] | {JobStatus.DELETED}
TRANSITIONS[JobStatus.DELETED] = frozenset()

# A job in one of these states can still be killed.
KILLABLE = frozenset(s for s, nxt in TRANSITIONS.items() if JobStatus.KILLED in nxt)
