"""date_time and the reservation window (specs/003 5.1.3.1, 5.2.2.1.1; sge_types(1))."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from wms.core.errors import InvalidInput
from wms.core.reservations.timespec import make_window, parse_date_time, parse_time_span

UTC = timezone.utc
NOW = datetime(2006, 12, 14, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, expected", [
    ("12141200", datetime(2006, 12, 14, 12, 0, tzinfo=UTC)),            # MMDDhhmm: this year
    ("12141200.30", datetime(2006, 12, 14, 12, 0, 30, tzinfo=UTC)),
    ("0612141200", datetime(2006, 12, 14, 12, 0, tzinfo=UTC)),          # YY
    ("9912141200", datetime(1999, 12, 14, 12, 0, tzinfo=UTC)),          # 69..99 -> 19YY
    ("200701121200", datetime(2007, 1, 12, 12, 0, tzinfo=UTC)),         # CCYY
    ("01121200", datetime(2006, 1, 12, 12, 0, tzinfo=UTC)),             # the spec's -a 01121200
])
def test_date_time(text: str, expected: datetime) -> None:
    assert parse_date_time(text, NOW) == expected


def test_date_time_in_the_submitters_zone() -> None:
    plus_one = timezone(timedelta(hours=1))
    assert parse_date_time("12141200", NOW, plus_one) == datetime(2006, 12, 14, 11, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, problem", [
    ("1214120", "is not a date_time: expected"),
    ("12141200.3", "expected"),
    ("13141200", "month must be in 1..12"),
    ("12321200", "day is out of range"),
    ("12142500", "hour must be in 0..23"),
    ("12/14/2006", "expected"),
    ("", "expected"),
])
def test_bad_date_time(text: str, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem):
        parse_date_time(text, NOW)


@pytest.mark.parametrize("text, seconds", [("1:0:0", 3600), ("0:30:0", 1800), ("24:0:10", 86410), ("600", 600)])
def test_duration_in_time_format(text: str, seconds: int) -> None:
    assert parse_time_span(text) == seconds


@pytest.mark.parametrize("text", ["0", "0:0:0", "-1:0:0", "infinity", "1:30", "1h"])
def test_bad_duration(text: str) -> None:
    with pytest.raises(InvalidInput, match="duration"):
        parse_time_span(text)


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2006, 12, 14, hour, minute, tzinfo=UTC)


def test_window_from_start_and_duration() -> None:
    window = make_window(NOW, at(12), None, 3600)
    assert (window.start, window.end, window.duration) == (at(12), at(13), 3600)


def test_window_from_start_and_end() -> None:
    assert make_window(NOW, at(12), at(13), None).duration == 3600


def test_window_starts_now_without_a_start() -> None:
    window = make_window(NOW, None, None, 600)
    assert (window.start, window.end) == (NOW, NOW + timedelta(seconds=600))


def test_all_three_agreeing_are_accepted() -> None:
    assert make_window(NOW, at(12), at(13), 3600).end == at(13)


def test_dissonant_window_is_refused() -> None:
    # The spec's example: 12:00 to 13:00 with a duration of 2 hours.
    with pytest.raises(InvalidInput) as caught:
        make_window(NOW, at(12), at(13), 7200)
    assert str(caught.value) == ("start 12/14/2006 12:00:00, end 12/14/2006 13:00:00 and duration 02:00:00 "
                                 "disagree: the end minus the start is 01:00:00")


@pytest.mark.parametrize("start, end, duration, message", [
    (at(12), None, None, r"give the end \(-e\) or the duration \(-d\)"),
    (at(12), at(11), None, "is not after the start"),
    (at(12), at(12), None, "is not after the start"),
    (at(8), at(9, 30), None, "the end 12/14/2006 09:30:00 is already past"),
    (at(8), None, 3600, "is already past"),
])
def test_bad_windows(start, end, duration, message) -> None:
    with pytest.raises(InvalidInput, match=message):
        make_window(NOW, start, end, duration)


def test_changed_end_keeps_a_past_start() -> None:
    from wms.core.reservations.timespec import changed_end

    started = NOW - timedelta(hours=1)
    assert changed_end(started, NOW, None, 7200) == NOW + timedelta(hours=1)
    with pytest.raises(InvalidInput, match="is already past"):
        changed_end(started, NOW, None, 1800)
    with pytest.raises(InvalidInput, match="disagree"):
        changed_end(started, NOW, NOW + timedelta(hours=2), 3600)
