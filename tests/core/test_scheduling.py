"""The static scheduling rules (core/scheduling.py), table-driven."""

from __future__ import annotations

import pytest

from wms.core import scheduling as s
from wms.core.resources import QueueRef

REF = QueueRef("LCG.CERN.ch", "ce01.cern.ch", "long")
PARAMS = {"Platform": "x86_64-el9", "CPUTime": 172800, "Tags": ["GPU", "MultiProcessor"], "NumberOfProcessors": 8}


@pytest.mark.parametrize(
    "request_, params, expected",
    [
        (s.SchedulingRequest(), PARAMS, None),
        (s.SchedulingRequest(sites=("LCG.CERN.ch",)), PARAMS, None),
        (s.SchedulingRequest(sites=("LCG.RAL.uk",)), PARAMS, s.REASON_SITE),
        (s.SchedulingRequest(banned_sites=("LCG.CERN.ch",)), PARAMS, s.REASON_BANNED),
        (s.SchedulingRequest(platforms=("x86_64-el9",)), PARAMS, None),
        (s.SchedulingRequest(platforms=("aarch64-el9", "x86_64-el9")), PARAMS, None),
        (s.SchedulingRequest(platforms=("aarch64-el9",)), PARAMS, s.REASON_PLATFORM),
        # A queue that declares no Platform leaves the check to the pilot.
        (s.SchedulingRequest(platforms=("aarch64-el9",)), {}, None),
        (s.SchedulingRequest(cpu_time=172800), PARAMS, None),
        (s.SchedulingRequest(cpu_time=172801), PARAMS, s.REASON_CPUTIME),
        (s.SchedulingRequest(cpu_time=10**7), {}, None),
        (s.SchedulingRequest(tags=("GPU",)), PARAMS, None),
        (s.SchedulingRequest(tags=("GPU", "WholeNode")), PARAMS, s.REASON_TAGS),
        (s.SchedulingRequest(tags=("GPU",)), {"tag": "GPU"}, None),
        (s.SchedulingRequest(processors=8), PARAMS, None),
        (s.SchedulingRequest(processors=9), PARAMS, s.REASON_PROCESSORS),
        (s.SchedulingRequest(processors=2), {}, s.REASON_PROCESSORS),
    ],
)
def test_rejection(request_, params, expected):
    assert s.rejection(request_, REF, params) == expected


@pytest.mark.parametrize(
    "cpu_time, expected",
    [(1, 360), (360, 360), (361, 1800), (3600, 3600), (3601, 21600), (1209600, 1209600), (2000000, 2000000)],
)
def test_cpu_time_segment(cpu_time, expected):
    segments = [360, 1800, 3600, 21600, 43200, 86400, 172800, 345600, 604800, 1209600]
    assert s.cpu_time_segment(cpu_time, segments) == expected


def test_no_queue_message_lists_reasons_in_order():
    assert s.no_queue_message({}) == "No eligible queue"
    assert (
        s.no_queue_message({s.REASON_TAGS: 2, s.REASON_BANNED: 1})
        == "No eligible queue: banned site (1), missing tags (2)"
    )


