"""Backing off a queue whose pilots run nothing.

A pilot the SiteDirector sends for waiting jobs may find nothing to run:
another pilot took the jobs first (the normal case, now and then), or the
jobs are of a kind the queue's pilots never take (a request a pilot's host
never offers, an expression its description never satisfies): then every
pilot sent ends empty, and without a brake the SiteDirector sends more at
each run, for ever. So, per queue and VO (a pilot runs one VO's jobs), the
SiteDirector counts the rounds of pilots (one round: those it sent in one
run) that all ended without running anything since the last pilot there
that ran a job. One such round is the normal churn of a busy queue (the
jobs were taken by other pilots first); after the second in a row it
pauses sending for ``base`` seconds, after each further one twice as long
as after the one before, at most ``cap``, counted from when the last of
them ended. A pilot there that runs a job (a match) resets the count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

#: Empty rounds that cost no pause: one is the normal churn of a busy queue
#: (its jobs were taken by other pilots, or killed, before these started).
FREE_ROUNDS = 1


@dataclass(frozen=True)
class PilotOutcome:
    """What became of one pilot: when it was sent, when it was last seen
    (its end, when ``ended``), and how many jobs it ran."""

    submitted: datetime
    last_seen: datetime
    jobs_run: int
    ended: bool


def empty_rounds(outcomes: Iterable[PilotOutcome]) -> tuple[int, datetime | None]:
    """The rounds of pilots that ended empty since the last pilot that ran a
    job, and when the last of them ended; *outcomes* newest first. A round
    one of whose pilots ran a job is not empty, whatever its others did."""
    ends: dict[datetime, datetime] = {}      # round (when it was sent) -> when its last pilot ended
    for outcome in outcomes:
        if outcome.jobs_run > 0:
            ends.pop(outcome.submitted, None)
            break
        if not outcome.ended:
            continue            # still waiting or running: not yet empty
        ends[outcome.submitted] = max(ends.get(outcome.submitted, outcome.last_seen), outcome.last_seen)
    return len(ends), max(ends.values(), default=None)


def pause(rounds: int, base: float, cap: float) -> timedelta:
    """How long to wait after ``rounds`` empty rounds: none for the first
    (FREE_ROUNDS), then base, 2 x base, ... at most cap."""
    if rounds <= FREE_ROUNDS:
        return timedelta(0)
    return timedelta(seconds=min(base * 2 ** min(rounds - FREE_ROUNDS - 1, 62), cap))


def paused_until(outcomes: Iterable[PilotOutcome], base: float, cap: float) -> datetime | None:
    """When the SiteDirector may send pilots again (None: it need not wait)."""
    rounds, last_end = empty_rounds(outcomes)
    if rounds <= FREE_ROUNDS or last_end is None:
        return None
    return last_end + pause(rounds, base, cap)
