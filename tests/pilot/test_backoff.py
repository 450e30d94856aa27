"""When a pilot asks again (pilot/backoff.py): Retry-After read as RFC 9110
says (delay-seconds or an HTTP date), waits stretched by jitter, longer
after each empty answer."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pilot.backoff import MAX_RETRY_AFTER, busy_delay, empty_delay, retry_after

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("header, seconds", [
    ("1", 1.0),
    (" 30 ", 30.0),
    ("0", 0.0),
    ("Wed, 25 Nov 2026 12:00:10 GMT", 10.0),      # an HTTP date: the time left until then
    ("Wed, 25 Nov 2026 11:59:00 GMT", 0.0),       # already past: ask again now
    ("86400", MAX_RETRY_AFTER),                   # a day: no pilot waits that long on one header
    (None, None),
    ("", None),
    ("soon", None),
    ("-5", None),
    ("1.5", None),                                # not delay-seconds (a whole number)
])
def test_retry_after_header(header, seconds):
    assert retry_after(header, NOW) == seconds


@pytest.mark.parametrize("rand, delay", [(0.0, 2.0), (0.5, 2.5), (0.999, 2.999)])
def test_a_busy_server_is_waited_at_least_what_it_asked(rand, delay):
    assert busy_delay(2.0, lambda: rand) == pytest.approx(delay)


@pytest.mark.parametrize("empty, rand, delay", [
    (1, 0.5, 5.0),       # the first empty answer: poll
    (2, 0.5, 10.0),      # then doubled
    (3, 0.5, 20.0),
    (4, 0.5, 40.0),      # 8 x poll at most
    (9, 0.5, 40.0),
    (1, 0.0, 2.5),       # jitter: between half and one and a half times
    (1, 0.999, 7.495),
])
def test_empty_answers_back_off_with_jitter(empty, rand, delay):
    assert empty_delay(5.0, empty, lambda: rand) == pytest.approx(delay)
