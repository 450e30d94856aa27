"""qrsub(1): "The highest AR ID is 9999999. If the highest ID is reached, a
wraparound happens and the next unused ID, starting with 1, will be used.\""""

import pytest

from wms.core.errors import Conflict
from wms.core.reservations.ids import MAX_AR_ID, next_id


def test_ids_count_up_from_one():
    assert next_id(0, set()) == 1
    assert next_id(192, {192}) == 193


def test_the_highest_id_is_9999999_then_the_next_unused_from_1():
    assert MAX_AR_ID == 9_999_999
    assert next_id(MAX_AR_ID - 1, set()) == MAX_AR_ID
    assert next_id(MAX_AR_ID, set()) == 1
    assert next_id(MAX_AR_ID, {1, 2, 4}) == 3


def test_ids_in_use_are_skipped_and_never_handed_out_twice():
    assert next_id(3, {4, 5}, highest=6) == 6
    assert next_id(4, {5, 6, 1}, highest=6) == 2
    with pytest.raises(Conflict, match="all 3 advance reservation ids are in use"):
        next_id(1, {1, 2, 3}, highest=3)
