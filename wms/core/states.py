"""Job states and the transitions between them.

The life of a job follows DIRAC's: Received -> Checking -> Waiting ->
Matched -> Running -> Done / Failed / Killed / Stalled. A stalled or
matched job whose pilot vanished goes back to Waiting when it is
rescheduled. Every change is recorded in the status history with its time
and source.
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


FINAL_STATES = frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.KILLED})

# Which state may follow which; anything else is refused.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.RECEIVED: frozenset({JobStatus.CHECKING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.CHECKING: frozenset({JobStatus.WAITING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.WAITING: frozenset({JobStatus.MATCHED, JobStatus.CHECKING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.MATCHED: frozenset({JobStatus.RUNNING, JobStatus.WAITING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.RUNNING: frozenset(
        {JobStatus.DONE, JobStatus.FAILED, JobStatus.KILLED, JobStatus.STALLED}
    ),
    JobStatus.STALLED: frozenset({JobStatus.RUNNING, JobStatus.WAITING, JobStatus.FAILED, JobStatus.KILLED}),
    JobStatus.DONE: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.KILLED: frozenset(),
}

# A job in one of these states can still be killed.
KILLABLE = frozenset(s for s, nxt in TRANSITIONS.items() if JobStatus.KILLED in nxt)


def can_move(current: str, new: str) -> bool:
    """True when a job in ``current`` may move to ``new``."""
    return JobStatus(new) in TRANSITIONS[JobStatus(current)]
