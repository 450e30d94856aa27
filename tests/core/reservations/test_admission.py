"""A job asking for an advance reservation (specs/003 5.3.2.1, 5.2.2.1.1):
its h_rt must fit in what is left of the reservation, less the duration
offset, and it may ask for no more than the reservation holds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from wms.core.complexes import ComplexTable
from wms.core.errors import InvalidInput
from wms.core.reservations.admission import runtime_limit
from wms.core.reservations.calendar import job_end

START = datetime(2006, 12, 18, 10, 0, tzinfo=timezone.utc)
END = START + timedelta(hours=2)
TABLE = ComplexTable.with_user_complexes([
    {"name": "compiler_lic", "shortcut": "cl", "type": "INT", "relop": "<=", "requestable": True,
     "consumable": True, "default": 0, "urgency": 0},
])
HELD = [("slots", 4.0), ("compiler_lic", 1.0)]   # qrsub -pe 4 -l compiler_lic=1 -d 2:0:0


def limit(hard=None, slots=1, now=START, offset=60):
    return runtime_limit(7, START, END, hard or {}, slots, HELD, now, offset, TABLE)


def test_every_job_of_the_reservation_may_run_its_duration_less_the_offset():
    assert limit() == 7200 - 60
    assert limit({"h_rt": "1:00:00", "compiler_lic": 1}) == 7140
    assert limit(slots=4) == 7140


@pytest.mark.parametrize("hard, slots, now, message", [
    ({"h_rt": "2:00:00"}, 1, START,
     "-ar: h_rt 02:00:00 is longer than the reservation's duration minus duration_offset (01:59:00)"),
    ({"h_rt": "1:00:00"}, 1, START + timedelta(minutes=90),
     "-ar: h_rt 01:00:00 does not end before advance reservation 7 ends (00:29:00 left)"),
    ({"compiler_lic": 2}, 1, START, "-ar: compiler_lic=2 is more than advance reservation 7 holds (1)"),
    ({}, 5, START, "-ar: 5 slots requested, advance reservation 7 holds 4"),
])
def test_what_does_not_fit_is_named(hard, slots, now, message):
    with pytest.raises(InvalidInput) as refused:
        limit(hard, slots, now)
    assert refused.value.message == message


def test_a_reservation_shorter_than_the_offset_takes_no_job():
    with pytest.raises(InvalidInput, match="shorter than duration_offset: no job fits"):
        limit(offset=7200)


def test_a_running_job_holds_until_its_h_rt_and_the_offset_have_passed():
    assert job_end(START, 3600, 60) == START + timedelta(seconds=3660)
    assert job_end(START, None, 60) is None       # no runtime limit: for ever
