"""The SiteDirector's pause at a queue whose pilots run nothing (wms/core/pilot_backoff.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from wms.core.pilot_backoff import PilotOutcome, empty_rounds, pause, paused_until

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


def ended(round_: int, jobs: int = 0, at: int | None = None) -> PilotOutcome:
    """A pilot of round ``round_`` (sent at minute ``round_``), ended at minute ``at`` (default: a minute later)."""
    return PilotOutcome(T0 + round_ * MINUTE, T0 + (at if at is not None else round_ + 1) * MINUTE, jobs, True)


@pytest.mark.parametrize(("rounds", "seconds"), [(0, 0), (1, 0), (2, 60), (3, 120), (4, 240), (7, 1920), (8, 3600),
                                                 (500, 3600)])
def test_the_pause_doubles_with_each_empty_round_after_the_first_up_to_the_cap(rounds, seconds):
    assert pause(rounds, 60, 3600) == timedelta(seconds=seconds)


def test_nine_empty_pilots_of_one_round_are_one_round():
    assert empty_rounds([ended(5)] * 9 + [ended(4)] * 3) == (2, T0 + 6 * MINUTE)


def test_a_pilot_that_ran_a_job_ends_the_count():
    history = [ended(8), ended(7), ended(6, jobs=1), ended(5), ended(4)]     # newest first
    assert empty_rounds(history) == (2, T0 + 9 * MINUTE)
    assert paused_until([ended(6, jobs=2), ended(5), ended(4)], 60, 3600) is None


def test_a_round_one_of_whose_pilots_ran_a_job_is_not_empty():
    # Round 6's empty pilot ended after its busy one: the round still ran a job.
    assert empty_rounds([ended(7), ended(6, at=9), ended(6, jobs=1), ended(5)]) == (1, T0 + 8 * MINUTE)


def test_a_pilot_still_running_is_not_empty_yet():
    running = PilotOutcome(T0 + 9 * MINUTE, T0 + 9 * MINUTE, 0, False)
    assert empty_rounds([running, ended(3)]) == (1, T0 + 4 * MINUTE)


def test_one_empty_round_is_free_and_the_pause_counts_from_the_end_of_the_last_empty_pilot():
    assert paused_until([ended(1)], 60, 3600) is None
    assert paused_until([ended(3), ended(2, at=10), ended(1)], 60, 3600) == T0 + 10 * MINUTE + 2 * MINUTE
    assert paused_until([], 60, 3600) is None
