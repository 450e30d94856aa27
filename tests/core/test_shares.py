"""Group shares split among task queues by waiting jobs (core/shares.py)."""

from __future__ import annotations

from wms.core.shares import task_queue_priorities


def test_a_group_share_is_split_by_waiting_jobs():
    rows = [(1, "a", 30), (2, "a", 10), (3, "b", 5)]
    assert task_queue_priorities(rows, {"a": 1000, "b": 4000}) == {1: 750_000, 2: 250_000, 3: 4_000_000}


def test_unknown_groups_get_the_default_share_and_nothing_drops_below_one():
    assert task_queue_priorities([(1, "x", 1)], {}) == {1: 1000}
    assert task_queue_priorities([(1, "a", 1), (2, "a", 10**9)], {"a": 0}) == {1: 1, 2: 1}
