"""Usage-row scopes, built and read in one module (core/scopes.py); runtime limits read in one function."""

from __future__ import annotations

import math

import pytest

from wms.core.quantities import time_limit
from wms.core.resources import QueueRef
from wms.core.scopes import GLOBAL_SCOPE, host_scope, inside_reservation, queue_scope, reservation_scope


def test_scopes_round_trip():
    queue = queue_scope(QueueRef("LCG.CERN.ch", "ce01.cern.ch", "long"))
    assert queue == "queue:LCG.CERN.ch/ce01.cern.ch/long" and host_scope("wn1") == "host:wn1"
    for inner in (GLOBAL_SCOPE, host_scope("wn1"), queue):
        assert inside_reservation(reservation_scope(12, inner)) == (12, inner)
    assert inside_reservation(queue) is None and inside_reservation("rqs:set/1:user") is None


@pytest.mark.parametrize("value, seconds", [
    (None, None), (math.inf, None), ("infinity", None), ("INFINITY", None),
    (3600, 3600.0), (3600.0, 3600.0), ("1:00:00", 3600.0), ("90", 90.0),
])
def test_a_runtime_limit_is_a_finite_number_of_seconds_or_none(value, seconds):
    assert time_limit(value) == seconds
