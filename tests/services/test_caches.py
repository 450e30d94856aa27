"""What a process keeps between requests (services/caches.py): named, typed, each with its lifetime."""

from __future__ import annotations

import time

import pytest

from tests.helpers import wait_until
from wms.services import caches as caches_module
from wms.core.complexes import ComplexTable
from wms.core.match.framework import StaticVerdicts
from wms.core.quotas.filters import Groups
from wms.core.quotas.parser import parse_rule_sets
from wms.services.caches import Caches, QuotaState, Timed, Waiting


class Clock:
    """The caches' monotonic clock, moved by hand: a value grows old without waiting."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(caches_module, "time", clock)
    return clock


def test_a_timed_value_is_reloaded_when_stale_or_forgotten(clock):
    loads = []
    value = Timed(ttl=3600)
    assert value.get(lambda: loads.append(1) or len(loads)) == 1
    assert value.get(lambda: loads.append(1) or len(loads)) == 1          # fresh: not reloaded
    value.forget()
    assert value.get(lambda: loads.append(1) or len(loads)) == 2
    clock.now += 7200                                                       # now stale
    assert value.get(lambda: loads.append(1) or len(loads)) == 3


def test_forgetting_the_waiting_work_starts_a_new_generation_and_leaves_the_old_one_whole():
    waiting = Waiting(ttl=3600)
    old = waiting.current(lambda: [(1, 10, None)], list)
    assert waiting.current(lambda: [(2, 10, None)], list) is old
    waiting.forget()
    new = waiting.current(lambda: [(2, 10, None)], list)
    assert new is not old and new.task_queues == [(2, 10, None)]
    assert old.task_queues == [(1, 10, None)]                               # a request still using it is not disturbed


def test_one_thread_reads_the_next_generation_aside_while_requests_use_the_last(clock):
    import threading

    waiting = Waiting(ttl=3600)
    old = waiting.current(lambda: [(1, 10, None)], list)
    clock.now += 7200                                                       # now stale
    reading, release = threading.Event(), threading.Event()

    def slow_read():
        reading.set()
        release.wait(10)
        return [(2, 10, None)]

    unread = []
    assert waiting.current(lambda: unread.append(1) or [], slow_read) is old    # answered at once, with the last list
    assert reading.wait(10)
    assert waiting.current(lambda: unread.append(1) or [], slow_read) is old and unread == []   # no second read
    release.set()
    wait_until(lambda: waiting.current(lambda: unread.append(1) or [], slow_read).task_queues == [(2, 10, None)],
               timeout=10, what="the list read aside in use")
    assert unread == []


def test_a_list_read_across_a_forget_is_not_kept():
    """Jobs made waiting while the list was read may be missing from it: the next request reads again."""
    waiting = Waiting(ttl=3600)
    reads = []

    def read_while_jobs_arrive():
        reads.append(1)
        if len(reads) == 1:
            waiting.forget()
        return [(len(reads), 10, None)]

    assert waiting.current(read_while_jobs_arrive, list).task_queues == [(1, 10, None)]
    assert waiting.current(read_while_jobs_arrive, list).task_queues == [(2, 10, None)]     # read again
    assert waiting.current(read_while_jobs_arrive, list).task_queues == [(2, 10, None)] and len(reads) == 2


def test_a_new_complex_table_drops_what_was_parsed_against_the_old_one_only():
    caches = Caches()
    caches.task_queue_views[1] = object()
    caches.levels["S/c/q"] = (object(), object())
    caches.usage_rows.add(("global", "slots"))
    caches.stored_version("complexes").version = 3
    static = caches.static_verdicts
    caches.complex_table_changed()
    assert caches.task_queue_views == {} and caches.levels == {} and caches.quota_state is None
    assert isinstance(caches.static_verdicts, StaticVerdicts) and caches.static_verdicts is not static
    assert caches.usage_rows == {("global", "slots")}                       # rows exist whatever the table
    assert caches.stored == {}                                              # re-adopted against the new table


def test_a_failed_read_aside_keeps_the_last_list_and_says_so(caplog, clock):
    import threading

    waiting = Waiting(ttl=3600)
    old = waiting.current(lambda: [(1, 10, None)], list)
    clock.now += 7200
    reads = []

    def failing():
        reads.append(1)
        raise OSError("database gone")

    assert waiting.current(list, failing) is old
    wait_until(lambda: "reading the waiting task queues failed" in caplog.text, timeout=10, what="the warning")
    wait_until(lambda: not any(t.name == "wms-waiting-reader" for t in threading.enumerate()),
               timeout=10, what="the reading thread done")
    assert waiting.current(list, failing) is old and len(reads) == 1     # kept another ttl, not read again at once


def test_quota_state_compiles_its_sets_once_at_first_use_and_none_when_none_is_enabled():
    table = ComplexTable.builtin()
    sets = tuple(parse_rule_sets("{\n name a\n enabled true\n limit users {roland} to slots=2\n}\n"
                                 "{\n name b\n enabled false\n limit to slots=0\n}\n", table))
    state = QuotaState(1, sets, table, Groups(usersets={}, hostgroups={}))
    assert "rules" not in vars(state)                                       # nothing compiled on adoption
    rules = state.rules
    assert rules is not None and [s.name for s in rules.sets] == ["a"] and state.rules is rules
    assert QuotaState(2, sets[1:], table, Groups(usersets={}, hostgroups={})).rules is None
