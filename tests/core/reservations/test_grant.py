"""Granting reservations against the booking calendar (specs/003 5.2.2.1.3)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from wms.core.complexes import ComplexTable
from wms.core.offers import LevelValues
from wms.core.reservations.access import may_create, on_acl, parse_acl, queue_denies
from wms.core.reservations.calendar import Calendar, Use
from wms.core.reservations.grant import (
    NO_QUEUES, NOT_GRANTED, REASON_UNLIMITED_HOST, REASON_UNLIMITED_QUEUE, Candidate, Request, decide,
)
from wms.core.reservations.timespec import Window
from wms.core.errors import InvalidInput

UTC = timezone.utc
T = datetime(2006, 12, 14, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
TABLE = ComplexTable.with_user_complexes([
    {"name": "myapp", "shortcut": "ma", "type": "INT", "relop": "<=", "requestable": "YES",
     "consumable": "YES", "default": 0, "urgency": 0},
])
USERSETS = {"arusers": ["user1"], "denied_users": ["user3"], "staff": ["user1", "user2"], "team": ["@staff"]}
ALLQ = "Site/ce/all.q"


def cand(queue: str = ALLQ, host: str | None = None, slots: int = 1, host_slots: int | None = None,
         params: dict | None = None, myapp: int | None = None, global_myapp: int | None = None) -> Candidate:
    qfixed = {"slots": slots, "qname": queue}
    if myapp is not None:
        qfixed["myapp"] = myapp
    levels = [LevelValues("global", {"myapp": global_myapp} if global_myapp is not None else {}, scope="global")]
    if host is not None:
        hfixed = {"hostname": host}
        if host_slots is not None:
            hfixed["slots"] = host_slots
        levels.append(LevelValues("host", hfixed, scope=f"host:{host}"))
    levels.append(LevelValues("queue", qfixed, scope=f"queue:{queue}"))
    return Candidate(queue, host, params or {}, tuple(levels))


def req(start=T, hours=1, acl=("user1",), **kw) -> Request:
    return Request(window=Window(start, start + hours * HOUR), acl=acl, **kw)


def test_spec_example_host_with_an_unlimited_job_is_not_reserved() -> None:
    # all.q@host1 runs job 3001 without h_rt; all.q@host2 is free.
    cands = [cand(host="host1", slots=2, host_slots=1), cand(host="host2", slots=2, host_slots=1)]
    on_host1 = decide(TABLE, req(hard={"hostname": "host1"}), cands, Calendar(), USERSETS,
                      unlimited_hosts=frozenset({"host1"}))
    assert not on_host1.granted and on_host1.message == NOT_GRANTED
    assert on_host1.reasons == {f"{ALLQ}@host1": REASON_UNLIMITED_HOST.format(host="host1")}
    on_host2 = decide(TABLE, req(hard={"hostname": "host2"}), cands, Calendar(), USERSETS,
                      unlimited_hosts=frozenset({"host1"}))
    assert on_host2.granted
    assert [(a.queue, a.host, a.slots) for a in on_host2.allocations] == [(ALLQ, "host2", 1)]
    assert {(b.scope, b.resource, b.amount) for b in on_host2.bookings} == {
        ("host:host2", "slots", 1.0), (f"queue:{ALLQ}", "slots", 1.0)}


def test_queue_with_an_unlimited_job_is_not_reserved() -> None:
    decision = decide(TABLE, req(), [cand(slots=10)], Calendar(), USERSETS, unlimited_queues=frozenset({ALLQ}))
    assert not decision.granted and decision.reasons == {ALLQ: REASON_UNLIMITED_QUEUE}


def test_spec_example_user_on_the_denied_list() -> None:
    # qrsub -u user1,user2,user3 -q all.q: user3 is in xuser_lists denied_users.
    queue = cand(slots=10, params={"xuser_lists": ["denied_users"]})
    decision = decide(TABLE, req(acl=("user1", "user2", "user3"), queue_patterns=("all.q",)), [queue],
                      Calendar(), USERSETS)
    assert (decision.granted, decision.message) == (False, NO_QUEUES)
    assert decision.reasons == {ALLQ: "user user3 is denied by xuser_lists denied_users"}
    assert decide(TABLE, req(acl=("user1", "user2"), queue_patterns=("all.q",)), [queue], Calendar(),
                  USERSETS).granted


def test_access_list_with_a_user_set_needs_all_its_members() -> None:
    queue = cand(slots=10, params={"user_lists": ["arusers"]})
    assert decide(TABLE, req(acl=("user1",)), [queue], Calendar(), USERSETS).granted
    denied = decide(TABLE, req(acl=("@team",)), [queue], Calendar(), USERSETS)
    assert denied.reasons == {ALLQ: "user user2 is in none of the queue's user_lists (arusers)"}
    assert decide(TABLE, req(acl=("@staff",)), [cand(params={"xuser_lists": "staff"})], Calendar(),
                  USERSETS).reasons == {ALLQ: "user set staff is in the queue's xuser_lists"}


def test_slots_must_be_free_for_the_whole_window() -> None:
    calendar = Calendar()
    # A running job holds the only slot until 12:30 (its h_rt end).
    calendar.add((f"queue:{ALLQ}", "slots"), Use(T - HOUR, T + HOUR / 2, 1))
    denied = decide(TABLE, req(), [cand(slots=1)], calendar, USERSETS)
    assert not denied.granted
    assert denied.reasons[ALLQ] == "queue slots: 1 needed, 0 of 1 free during the window"
    assert decide(TABLE, req(start=T + HOUR / 2), [cand(slots=1)], calendar, USERSETS).granted


def test_reservations_do_not_overlap_on_the_same_slots() -> None:
    calendar = Calendar()
    first = decide(TABLE, req(), [cand(slots=1)], calendar, USERSETS)
    for b in first.bookings:
        calendar.add((b.scope, b.resource), Use(T, T + HOUR, b.amount))
    assert not decide(TABLE, req(start=T + HOUR / 2), [cand(slots=1)], calendar, USERSETS).granted
    assert decide(TABLE, req(start=T + HOUR), [cand(slots=1)], calendar, USERSETS).granted   # back to back


def test_consumables_at_every_level() -> None:
    # slots:host1=2,host2=1 and complex_values host1=myapp=2,host2=myapp=1 (the qrstat -ar example).
    cands = [cand(host="host1", slots=8, host_slots=2), cand(host="host2", slots=8, host_slots=1)]
    decision = decide(TABLE, req(pe="mpi", slots_min=3, slots_max=3, hard={"myapp": 1, "hostname": "host*"}),
                      cands, Calendar(), USERSETS)
    assert decision.granted
    assert sorted((a.host, a.slots) for a in decision.allocations) == [("host1", 2), ("host2", 1)]
    global_limited = decide(TABLE, req(hard={"myapp": 3}), [cand(slots=8, global_myapp=2)], Calendar(), USERSETS)
    assert global_limited.reasons[ALLQ] == "global myapp: 3 needed, 2 of 2 free during the window"


def test_slot_range_takes_what_fits() -> None:
    decision = decide(TABLE, req(pe="mpi", slots_min=2, slots_max=8), [cand(slots=5)], Calendar(), USERSETS)
    assert decision.granted and decision.allocations[0].slots == 5
    assert not decide(TABLE, req(pe="mpi", slots_min=6, slots_max=8), [cand(slots=5)], Calendar(), USERSETS).granted


def test_sequential_request_takes_one_queue() -> None:
    decision = decide(TABLE, req(slots_min=2, slots_max=2), [cand("S/c/a", slots=1), cand("S/c/b", slots=1)],
                      Calendar(), USERSETS)
    assert not decision.granted


def test_queue_selection_switches() -> None:
    queues = [cand("S/c/a", params={"qtype": "BATCH"}), cand("S/c/b", params={"ckpt_list": ["blcr"]}),
              cand("S/c/c", params={"pe_list": ["smp"]})]
    assert [a.queue for a in decide(TABLE, req(interactive=True), queues, Calendar(), USERSETS).allocations] \
        == ["S/c/b"]
    assert [a.queue for a in decide(TABLE, req(ckpt="blcr"), queues, Calendar(), USERSETS).allocations] \
        == ["S/c/b"]
    only_c = decide(TABLE, req(queue_patterns=("c",)), queues, Calendar(), USERSETS)
    assert [a.queue for a in only_c.allocations] == ["S/c/c"]
    no_pe = decide(TABLE, req(pe="mpi", queue_patterns=("c",)), queues, Calendar(), USERSETS)
    assert no_pe.message == NO_QUEUES and no_pe.reasons == {"S/c/c": "parallel environment mpi is not in the "
                                                                        "queue's pe_list"}
    at_host = decide(TABLE, req(queue_patterns=("*@host2",)), [cand(host="host1"), cand(host="host2")],
                     Calendar(), USERSETS)
    assert [a.host for a in at_host.allocations] == ["host2"]


def test_request_the_queue_does_not_offer() -> None:
    decision = decide(TABLE, req(hard={"qname": "other"}), [cand()], Calendar(), USERSETS)
    assert decision.message == NO_QUEUES and ALLQ in decision.reasons


def test_calendar_peak() -> None:
    calendar = Calendar()
    key = ("q", "slots")
    calendar.add(key, Use(T, T + 2 * HOUR, 1))
    calendar.add(key, Use(T + HOUR, None, 2))      # no runtime limit: for ever
    assert calendar.peak(key, T - HOUR, T) == 0
    assert calendar.peak(key, T, T + HOUR) == 1
    assert calendar.peak(key, T + 90 * timedelta(minutes=1), T + 10 * HOUR) == 3
    assert calendar.peak(key, T + 3 * HOUR, T + 4 * HOUR) == 2


def test_creators_and_access_lists() -> None:
    assert may_create("user", "user1", USERSETS) and not may_create("user", "user2", USERSETS)
    assert may_create("manager", "x", USERSETS) and may_create("operator", "x", USERSETS)
    assert parse_acl(["user1,@staff", "user1"], USERSETS) == ("user1", "@staff")
    with pytest.raises(InvalidInput, match="unknown user set 'nope'"):
        parse_acl(["@nope"], USERSETS)
    assert on_acl("user2", ("@team",), USERSETS) and not on_acl("user3", ("@team",), USERSETS)
    assert queue_denies({"xuser_lists": "NONE"}, frozenset({"user3"}), (), USERSETS) is None


def test_alloc_rules() -> None:
    queues = [cand("S/c/a", slots=4), cand("S/c/b", slots=4)]
    fill = decide(TABLE, req(allocation="$fill_up", slots_min=6, slots_max=6), queues, Calendar(), USERSETS)
    assert sorted(a.slots for a in fill.allocations) == [2, 4]
    per_queue = decide(TABLE, req(allocation="3", slots_min=6, slots_max=6), queues, Calendar(), USERSETS)
    assert [a.slots for a in per_queue.allocations] == [3, 3]
    one_queue = decide(TABLE, req(allocation="$pe_slots", slots_min=6, slots_max=6), queues, Calendar(), USERSETS)
    assert not one_queue.granted
    assert decide(TABLE, req(allocation="$pe_slots", slots_min=4, slots_max=4), queues, Calendar(),
                  USERSETS).allocations[0].slots == 4


def test_a_job_consumable_is_charged_once() -> None:
    table = ComplexTable.with_user_complexes([
        {"name": "lic", "shortcut": "lic", "type": "INT", "relop": "<=", "requestable": "YES",
         "consumable": "JOB", "default": 0, "urgency": 0}])
    queues = [Candidate("S/c/a", None, {}, (LevelValues("global", {"lic": 1}, scope="global"),
                                            LevelValues("queue", {"slots": 2}, scope="queue:S/c/a"))),
              Candidate("S/c/b", None, {}, (LevelValues("global", {"lic": 1}, scope="global"),
                                            LevelValues("queue", {"slots": 2}, scope="queue:S/c/b")))]
    decision = decide(table, req(pe="mpi", slots_min=4, slots_max=4, hard={"lic": 1}), queues, Calendar(), USERSETS)
    assert decision.granted
    assert sum(b.amount for b in decision.bookings if b.resource == "lic") == 1
