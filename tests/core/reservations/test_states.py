"""AR states (specs/003 5.2.3.1): w, r, x, d and the error states E/W."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from wms.core.reservations.states import ARState, Effects, due_state, effects_of, usable

T0 = datetime(2006, 12, 18, 10, 0, tzinfo=timezone.utc)
T1 = T0 + timedelta(hours=24)


@pytest.mark.parametrize("current, now, lost, expected", [
    ("w", T0 - timedelta(seconds=1), False, "w"),
    ("w", T0, False, "r"),
    ("r", T1 - timedelta(seconds=1), False, "r"),
    ("r", T1, False, "x"),
    ("w", T1, False, "x"),          # never started (agent down): still ends
    ("w", T0 - timedelta(hours=1), True, "W"),
    ("W", T0 - timedelta(hours=1), False, "w"),   # valid again
    ("r", T0 + timedelta(hours=1), True, "E"),
    ("E", T0 + timedelta(hours=1), False, "r"),
    ("W", T0, True, "E"),
    ("d", T0, False, "d"),
    ("x", T0, False, "x"),
])
def test_due_state(current: str, now: datetime, lost: bool, expected: str) -> None:
    assert due_state(current, T0, T1, now, lost) == expected


@pytest.mark.parametrize("state, hard, expected", [
    (ARState.RUNNING, False, True), (ARState.RUNNING, True, True),
    (ARState.ERROR, False, True),   # soft: usable with what is left
    (ARState.ERROR, True, False),   # hard: no job dispatched
    (ARState.WAITING, False, False),
])
def test_usable(state, hard, expected) -> None:
    assert usable(state, hard) is expected


# qrsub(1) -m: b at the beginning, e at the end, a when the reservation
# goes into or out of error; n or no -m: no mail.
@pytest.mark.parametrize("current, target, mail, expected", [
    ("w", ARState.RUNNING, "b", Effects("started", ("started",))),
    ("w", ARState.RUNNING, "e", Effects("started")),
    ("r", ARState.EXITED, "e", Effects("ended", ("ended",))),
    ("w", ARState.EXITED, "bea", Effects("ended", ("ended",))),      # never started: ends all the same
    ("r", ARState.EXITED, "b", Effects("ended")),
    ("r", ARState.ERROR, "a", Effects("error", ("is in error state: queue all.q lost",))),
    ("w", ARState.WAITING_ERROR, "ab", Effects("error", ("is in error state: queue all.q lost",))),
    ("W", ARState.ERROR, "abe", Effects("started")),                  # started while in error: no new mail
    ("E", ARState.RUNNING, "a", Effects("recovered", ("is valid again",))),
    ("W", ARState.WAITING, "a", Effects("recovered", ("is valid again",))),
    ("W", ARState.RUNNING, "ab", Effects("recovered", ("is valid again", "started"))),
    ("W", ARState.RUNNING, "n", Effects("recovered")),
])
def test_what_a_move_reports_and_mails(current: str, target: ARState, mail: str, expected: Effects) -> None:
    assert effects_of(current, target, mail, "queue all.q lost") == expected
