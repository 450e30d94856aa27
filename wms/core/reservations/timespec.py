"""Reservation times: sge_types(1) date_time and the time window of qrsub.

date_time is ``[[CC]YY]MMDDhhmm[.SS]`` in the submitter's local time:
* without a year the current year is taken (as touch(1) and Grid Engine do);
* a two-digit year ``YY`` means 19YY for 69..99 and 20YY for 00..68;
* seconds default to 0.
The window (specs/003 5.2.2.1.1 "dissonant time window values"): the start
is ``-a`` (default: now), and exactly the end ``-e`` or the duration ``-d``
or both must be given; when start, end and duration are all given they must
agree, or the request is refused. A window must end after it starts and
after now.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from wms.core.errors import InvalidInput
from wms.core.quantities import format_time, parse_time

_DATE_TIME = re.compile(r"(?P<digits>\d{8}|\d{10}|\d{12})(?:\.(?P<seconds>\d{2}))?")


def parse_date_time(text: str, now: datetime, tz: tzinfo | None = None) -> datetime:
    """An aware datetime from ``[[CC]YY]MMDDhhmm[.SS]`` read in ``tz`` (default: ``now``'s zone)."""
    if not isinstance(text, str):
        raise InvalidInput(f"a date_time must be text, got {text!r}")
    match = _DATE_TIME.fullmatch(text.strip())
    if not match:
        raise InvalidInput(f"{text!r} is not a date_time: expected [[CC]YY]MMDDhhmm[.SS] "
                           "(e.g. 12141200 or 200612141200.30)")
    zone = tz or now.tzinfo
    digits = match.group("digits")
    local_now = now.astimezone(zone)
    if len(digits) == 12:
        year, rest = int(digits[:4]), digits[4:]
    elif len(digits) == 10:
        short = int(digits[:2])
        year, rest = (1900 + short if short >= 69 else 2000 + short), digits[2:]
    else:
        year, rest = local_now.year, digits
    month, day, hour, minute = (int(rest[i:i + 2]) for i in range(0, 8, 2))
    second = int(match.group("seconds") or 0)
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=zone)
    except ValueError as exc:
        raise InvalidInput(f"{text!r} is not a date_time: {exc}") from None


def parse_time_span(text: str | int | float) -> float:
    """A duration in sge_types(1) TIME format (``1:0:0``, ``3600``); positive and finite."""
    try:
        seconds = parse_time(text)
    except InvalidInput as exc:
        raise InvalidInput(f"duration: {exc.message}") from None
    if math.isinf(seconds) or seconds <= 0:
        raise InvalidInput(f"duration: {text!r} must be a positive, finite time")
    return seconds


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    @property
    def duration(self) -> float:
        return (self.end - self.start).total_seconds()


REASON_NO_END = "give the end (-e) or the duration (-d) of the reservation"
REASON_DISSONANT = ("start {start}, end {end} and duration {duration} disagree: "
                    "the end minus the start is {actual}")
REASON_END_BEFORE_START = "the end {end} is not after the start {start}"
REASON_END_PASSED = "the end {end} is already past"
REASON_START_PASSED = "the start {start} is already past"

# A start given to the minute is accepted during that minute.
START_GRACE = timedelta(seconds=60)



def format_time_span(seconds: float) -> str:
    """A duration as qrstat writes it: ``0:10:10``, ``24:0:10`` (h:m:s without padding)."""
    total = int(seconds)
    return f"{total // 3600}:{total % 3600 // 60}:{total % 60}"

def make_window(now: datetime, start: datetime | None, end: datetime | None, duration: float | None) -> Window:
    """The reservation's window from -a, -e and -d (specs/003 5.2.2.1.1); refused with the reason."""
    begin = start if start is not None else now
    if end is None and duration is None:
        raise InvalidInput(REASON_NO_END)
    if duration is not None and end is not None:
        actual = (end - begin).total_seconds()
        if abs(actual - duration) >= 1:
            raise InvalidInput(REASON_DISSONANT.format(start=_show(begin), end=_show(end),
                                                       duration=format_time(duration), actual=format_time(actual)))
    try:
        finish = end if end is not None else begin + timedelta(seconds=_given(duration))
    except (OverflowError, ValueError):  # past datetime's year 9999, or an infinite duration
        raise InvalidInput(f"the duration {format_time(_given(duration))} ends past the year 9999") from None
    if finish <= begin:
        raise InvalidInput(REASON_END_BEFORE_START.format(end=_show(finish), start=_show(begin)))
    if finish <= now:
        raise InvalidInput(REASON_END_PASSED.format(end=_show(finish)))
    if start is not None and start < now - START_GRACE:
        raise InvalidInput(REASON_START_PASSED.format(start=_show(start)))
    return Window(begin, finish)


def _given(duration: float | None) -> float:
    """A duration the caller has checked is there (an end or a duration is always given)."""
    assert duration is not None
    return duration


def changed_end(start: datetime, now: datetime, end: datetime | None, duration: float | None) -> datetime:
    """The new end of a granted window (qralter -e / -d): the start stays, even if already past."""
    if end is None and duration is None:
        raise InvalidInput(REASON_NO_END)
    if end is not None and duration is not None:
        actual = (end - start).total_seconds()
        if abs(actual - duration) >= 1:
            raise InvalidInput(REASON_DISSONANT.format(start=_show(start), end=_show(end),
                                                       duration=format_time(duration), actual=format_time(actual)))
    finish = end if end is not None else start + timedelta(seconds=_given(duration))
    if finish <= start:
        raise InvalidInput(REASON_END_BEFORE_START.format(end=_show(finish), start=_show(start)))
    if finish <= now:
        raise InvalidInput(REASON_END_PASSED.format(end=_show(finish)))
    return finish


def _show(moment: datetime) -> str:
    return moment.strftime("%m/%d/%Y %H:%M:%S")
