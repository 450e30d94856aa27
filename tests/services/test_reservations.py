"""Advance reservations on SQLite, PostgreSQL and MariaDB (specs/003): qrsub's
grant and refusals, qrstat, qrdel, qralter, the lifecycle and the Matcher."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from tests.helpers import as_pilot, patience, run_concurrently, wait_until
from tests.reservations_config import (
    ALLQ, CE, MANAGER, OPERATOR, OTHERQ, SITE, USER1, USER2, reservation_config,
)
from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from wms.core.match.context import PilotRequest
from wms.core.reservations.ids import MAX_AR_ID
from wms.db import matching as match_db
from wms.db import reservations as ar_db
from wms.services import accounting as accounting_service
from wms.services import diagnosis
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services import leases
from wms.services import quotas as quotas_service
from wms.services import reservations as ar
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

T0 = datetime(2030, 12, 14, 10, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)
UNLIMITED = '[ Executable = "/bin/sleep"; Arguments = "100"; CPUTime = 300; ]'


def limited(h_rt: str = "0:30:0", extra: str = "") -> str:
    return f'[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ h_rt = "{h_rt}"{extra} ]; ]'


@pytest.fixture
def runtime(engine, tmp_path) -> Runtime:
    return Runtime.create(reservation_config(tmp_path / "config"), engine)


def spec(**kw) -> ar.ReservationSpec:
    fields = {"start": T0 + 2 * HOUR, "duration": "0:30:0", "users": ["user1"]}
    fields.update(kw)
    return ar.ReservationSpec(**fields)


def pilot(queue="all.q", host="host1", pid="p1") -> PilotRequest:
    return PilotRequest(site=SITE, ce=CE, queue=queue, host=host, pilot_id=pid, slots=1,
                        load={"arch": "lx-amd64"}, platform="x86_64-el9", cpu_time_left=200000)


def submit(runtime, text, now=T0, identity=USER1, ar_id=None):
    return submit_jobs(runtime, identity, [("job.jdl", text)], SubmitOptions(reservation=ar_id), now)


def run_job(runtime, job_id, request, now=T0):
    result = matcher.request_job(runtime, request, now)
    assert result.job is not None and result.job["JobID"] == job_id, result.reason
    leases.pilot_status(runtime, as_pilot(request.pilot_id), job_id, request.pilot_id, "Running", "", None, now)


def usage(runtime):
    with runtime.engine.connect() as conn:
        return {k: v for k, v in match_db.all_usage(conn).items() if v}


# ---------------------------------------------------------------- the spec's examples
def test_host_running_a_job_without_runtime_limit_is_not_reserved(runtime):
    # qstat -f: job 3001 (no h_rt) runs in all.q@host1; all.q@host2 is free.
    [job] = submit(runtime, UNLIMITED)
    run_job(runtime, job, pilot(host="host1"))
    with pytest.raises(ar.ReservationDenied) as denied:
        ar.submit(runtime, USER1, spec(resources={"h": "host1"}), T0)
    assert str(denied.value).startswith("denied: Reservation can't be granted")
    assert "jobs without a runtime limit (h_rt) run on host host1" in str(denied.value)
    granted = ar.submit(runtime, USER1, spec(resources={"h": "host2"}), T0)
    assert granted["message"] == f"Your advance reservation {granted['ar_id']} has been granted"
    assert granted["granted"] == [{"queue": ALLQ, "host": "host2", "slots": 1}]
    # qsub -l h=host2 job_script (no h_rt): never matched to a queue with a reservation.
    [other] = submit(runtime, '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ h = "host2" ]; ]')
    result = matcher.request_job(runtime, pilot(host="host2", pid="p2"), T0)
    assert result.job is None
    assert "jobs without a runtime limit (h_rt) never run in a queue holding an advance reservation" in result.reason


def test_user_on_the_denied_list(runtime):
    # all.q: xuser_lists denied_users, whose entries are user3.
    with pytest.raises(ar.ReservationDenied) as denied:
        ar.submit(runtime, USER1, spec(users=["user1", "user2", "user3"], queues=["all.q"]), T0)
    assert str(denied.value) == (f"error: no queue instances to reserve ({ALLQ}: user user3 is denied by "
                                 "xuser_lists denied_users)")
    assert ar.submit(runtime, USER1, spec(users=["user1", "user2"], queues=["all.q"]), T0)["ar_id"] >= 1


def test_only_managers_operators_and_arusers_create(runtime):
    with pytest.raises(Forbidden, match="user2 is neither manager nor operator nor member of the arusers"):
        ar.submit(runtime, USER2, spec(users=["user2"]), T0)
    assert ar.submit(runtime, OPERATOR, spec(), T0)["ar_id"]
    assert ar.submit(runtime, MANAGER, spec(), T0)["ar_id"]


def test_dissonant_window_is_refused(runtime):
    with pytest.raises(InvalidInput, match="disagree"):
        ar.submit(runtime, USER1, spec(end=T0 + 3 * HOUR, duration="2:0:0"), T0)
    with pytest.raises(InvalidInput, match="give the end"):
        ar.submit(runtime, USER1, spec(duration=None), T0)
    assert ar.show(runtime, USER1) == []


def test_slots_are_never_booked_twice_and_windows_may_touch(runtime):
    first = ar.submit(runtime, USER1, spec(queues=["all.q"], pe="mpi", pe_slots="2"), T0)
    assert sum(g["slots"] for g in first["granted"]) == 2
    with pytest.raises(ar.ReservationDenied, match="can't be granted"):
        ar.submit(runtime, USER1, spec(start=T0 + 2 * HOUR + HOUR / 4, queues=["all.q"]), T0)
    assert ar.submit(runtime, USER1, spec(start=T0 + 2 * HOUR + HOUR / 2, queues=["all.q"]), T0)["ar_id"]


def test_running_jobs_count_until_their_h_rt_ends(runtime):
    jobs = submit(runtime, limited("1:0:0")) + submit(runtime, limited("1:0:0"))
    for i, job in enumerate(jobs):
        run_job(runtime, job, pilot(pid=f"p{i}", host=f"wn{i}"))
    # Both all.q slots are busy until 11:00 plus the duration offset.
    with pytest.raises(ar.ReservationDenied, match="queue slots: 1 needed, 0 of 2 free"):
        ar.submit(runtime, USER1, spec(start=T0 + HOUR / 2, queues=["all.q"]), T0)
    assert ar.submit(runtime, USER1, spec(start=T0 + HOUR + timedelta(minutes=1), queues=["all.q"]), T0)


def test_verify_only_checks(runtime):
    result = ar.submit(runtime, USER1, spec(verify=True), T0)
    assert result["verified"] is True and result["message"] == "verification: found possible assignment"
    assert ar.show(runtime, USER1) == []
    refused = ar.submit(runtime, USER1, spec(verify=True, users=["user3"], queues=["all.q"]), T0)
    assert refused["verified"] is False and "no queue instances to reserve" in refused["message"]


def test_max_advance_reservations(engine, tmp_path):
    runtime = Runtime.create(reservation_config(tmp_path / "c", max_advance_reservations=1), engine)
    ar.submit(runtime, USER1, spec(), T0)
    with pytest.raises(ar.TooManyReservations, match=r"maximum number of advance reservations \(1\)"):
        ar.submit(runtime, USER1, spec(start=T0 + 5 * HOUR), T0)


def test_concurrent_grants_never_overbook(runtime):
    # other.q has 4 slots; 8 requests for 1 slot each at the same moment.
    results, errors = run_concurrently(
        lambda i: ar.submit(runtime, USER1, spec(queues=["other.q"]), T0), 8)
    assert len(results) == 4
    assert all(isinstance(e, ar.ReservationDenied) for e in errors) and len(errors) == 4
    rows = ar.show(runtime, USER1)
    assert sum(g["slots"] for r in rows for g in r["granted"]) == 4
    assert sorted(r["ar_id"] for r in results) == [1, 2, 3, 4]


def test_concurrent_grants_in_different_queues_get_different_ids(runtime):
    # No scope lock in common: only the id is handed out one grant at a time.
    results, errors = run_concurrently(
        lambda i: ar.submit(runtime, USER1, spec(queues=["all.q" if i % 2 else "other.q"]), T0)["ar_id"], 4)
    assert errors == [] and sorted(results) == [1, 2, 3, 4]


def test_bad_switches_are_refused_whole(runtime):
    cases = [
        (spec(resources={"nosuch": 1}), "unknown"),
        (spec(pe="nope", pe_slots="2"), "unknown parallel environment 'nope'"),
        (spec(pe="mpi", pe_slots="4-2"), "is empty"),
        (spec(pe="mpi", pe_slots="32"), "parallel environment mpi has 16"),
        (spec(mail_options="bx"), "-m: 'bx' must be"),
        (spec(mail_options="bn"), "-m"),
        (spec(mail_list=["a b"]), "-M"),
        (spec(name="1abc"), "-N"),
        (spec(users=["@nosuch"]), "unknown user set"),
        (spec(pe="mpi", pe_slots="2", allocation="$fill_up"), "-pe and -alloc exclude each other"),
        (spec(allocation="$bad", pe_slots="2"), "-alloc: '\\$bad' is not an allocation rule"),
        (spec(queues=[" "]), "-q: empty queue name"),
        (spec(start=T0 - 2 * HOUR), "is already past"),
    ]
    for bad, message in cases:
        with pytest.raises(InvalidInput, match=message):
            ar.submit(runtime, USER1, bad, T0)
    assert ar.show(runtime, USER1) == []


# ---------------------------------------------------------------- qrstat
def test_qrstat_detail(runtime):
    granted = ar.submit(runtime, USER1, spec(name="project_xy", users=["user1", "user2"], pe="mpi", pe_slots="2",
                                               resources={"h": "host*", "myapp": 1}, mail_options="be",
                                               mail_list=["u1@example.org"]), T0)
    [row] = ar.show(runtime, USER1, [str(granted["ar_id"])])
    assert row["name"] == "project_xy" and row["state"] == "w" and row["owner"] == "user1"
    assert row["acl"] == ["user1", "user2"] and row["duration"] == "0:30:0"
    assert row["slots"] == "host1=1,host2=1"
    assert row["complex_values"] == "host1=myapp=1,host2=myapp=1"
    assert ar.show(runtime, USER1, ["project_*"]) == [row]
    assert ar.show(runtime, USER1, users=["user2"]) == []
    with pytest.raises(NotFound, match="advance reservation 999 does not exist"):
        ar.show(runtime, USER1, ["999"])


# ---------------------------------------------------------------- qrdel
def test_qrdel_removes_jobs_then_the_reservation(runtime):
    ar_id = ar.submit(runtime, USER1, spec(start=T0, queues=["other.q"], name="mine"), T0)["ar_id"]
    ar.manage(runtime, T0)
    [job] = submit(runtime, limited("0:10:0"), ar_id=ar_id)
    run_job(runtime, job, pilot(queue="other.q"))
    with pytest.raises(Forbidden, match="not allowed to delete"):
        ar.delete(runtime, USER2, [str(ar_id)], False, T0)
    with pytest.raises(NotFound, match="advance reservation mine does not exist"):
        ar.delete(runtime, USER2, ["mine"], False, T0)       # a name selects the caller's own
    assert ar.delete(runtime, USER1, ["mine"], True, T0) == [f"user1 deleted advance reservation {ar_id}"]
    assert jobs_service.job_status(runtime, MANAGER, [job])[0]["Status"] == "Killed"
    assert usage(runtime) == {}
    assert ar.show(runtime, USER1) == []
    assert ar.show(runtime, USER1, [str(ar_id)])[0]["state"] == "d"
    with pytest.raises(NotFound):
        ar.delete(runtime, USER1, ["mine"], False, T0)


def test_qrdel_without_f_holds_the_slots_until_the_pilots_stopped_the_jobs(runtime):
    """qrdel(1): the reservation goes only once its jobs are gone; -f does not wait for the execution side."""
    timeout = timedelta(seconds=runtime.config.settings.heartbeat_timeout)
    ar_id = ar.submit(runtime, USER1, spec(start=T0, queues=["other.q"]), T0)["ar_id"]
    [job] = submit(runtime, limited("0:10:0"), ar_id=ar_id)
    run_job(runtime, job, pilot(queue="other.q"))
    messages = ar.delete(runtime, USER1, [str(ar_id)], False, T0)
    assert messages == [f"user1 deleted advance reservation {ar_id}",
                        f"advance reservation {ar_id} keeps its resources until its jobs' pilots have stopped them, "
                        f"at the latest {(T0 + timeout).isoformat()} (qrdel -f releases them now)"]
    assert jobs_service.job_status(runtime, MANAGER, [job])[0]["Status"] == "Killed"
    # The job's own debit is returned; the reservation's hold on the queue stays while the pilot may still run it.
    assert usage(runtime) == {(f"queue:{OTHERQ}", "slots"): 1.0}
    assert ar.show(runtime, USER1, [str(ar_id)])[0]["state"] == "d"
    assert {r["Name"]: r["resv/used/tot"] for r in diagnosis.queues_overview(runtime)}[OTHERQ] == "1/0/4"
    assert ar.manage(runtime, T0 + timeout - timedelta(seconds=1))["released"] == []
    assert ar.manage(runtime, T0 + timeout)["released"] == [ar_id]
    assert usage(runtime) == {}
    assert ar.manage(runtime, T0 + timeout)["released"] == []      # once only


def test_qrdel_f_releases_at_once(runtime):
    ar_id = ar.submit(runtime, USER1, spec(start=T0, queues=["other.q"]), T0)["ar_id"]
    [job] = submit(runtime, limited("0:10:0"), ar_id=ar_id)
    run_job(runtime, job, pilot(queue="other.q"))
    assert ar.delete(runtime, USER1, [str(ar_id)], True, T0) == [f"user1 deleted advance reservation {ar_id}"]
    assert jobs_service.job_status(runtime, MANAGER, [job])[0]["Status"] == "Killed"
    assert usage(runtime) == {}
    # Without jobs on pilots nothing is waited for, with or without -f.
    waiting = ar.submit(runtime, USER1, spec(start=T0, queues=["other.q"]), T0)["ar_id"]
    [queued] = submit(runtime, limited("0:10:0"), ar_id=waiting)
    assert ar.delete(runtime, USER1, [str(waiting)], False, T0) == [f"user1 deleted advance reservation {waiting}"]
    assert jobs_service.job_status(runtime, MANAGER, [queued])[0]["Status"] == "Killed"
    assert usage(runtime) == {}


def test_qrdel_names_select_the_callers_own_and_u_selects_users(runtime):
    """qrdel(1): "qrdel wc_ar_name" deletes only the caller's; -u wc_user_list those of other users."""
    def grant(who, name, hour):
        return ar.submit(runtime, who, spec(start=T0 + hour * HOUR, queues=["other.q"], name=name), T0)["ar_id"]

    mine, admins = grant(USER1, "proj", 1), grant(MANAGER, "proj", 1)
    assert ar.delete(runtime, USER1, ["proj"], True, T0) == [f"user1 deleted advance reservation {mine}"]
    assert [r["ar_id"] for r in ar.show(runtime, USER1)] == [admins]
    with pytest.raises(Forbidden, match="not allowed to delete"):
        ar.delete(runtime, USER1, [], True, T0, users=["admin"])
    first, second = grant(USER1, "proj2", 2), grant(USER1, "run7", 3)
    assert ar.delete(runtime, USER1, ["pro*"], True, T0) == [f"user1 deleted advance reservation {first}"]
    third = grant(USER1, "proj3", 4)
    assert ar.delete(runtime, MANAGER, [], True, T0, users=["user1"]) == [
        f"admin deleted advance reservation {second}", f"admin deleted advance reservation {third}"]
    with pytest.raises(NotFound, match="no advance reservation of user1 exists"):
        ar.delete(runtime, MANAGER, [], True, T0, users=["user1"])
    assert ar.delete(runtime, MANAGER, ["proj"], True, T0, users=["*"]) == [
        f"admin deleted advance reservation {admins}"]
    with pytest.raises(InvalidInput, match="give advance reservation ids or names"):
        ar.delete(runtime, USER1, [], True, T0)


def test_operators_delete_others_reservations(runtime):
    ar_id = ar.submit(runtime, USER1, spec(), T0)["ar_id"]
    assert ar.delete(runtime, OPERATOR, [str(ar_id)], True, T0) == [f"oper deleted advance reservation {ar_id}"]


def test_reservation_ids_wrap_around_to_the_next_unused_one(runtime):
    """qrsub(1): ids go up to 9999999, then the next id not in use, starting with 1."""
    def grant(hour):
        return ar.submit(runtime, USER1, spec(start=T0 + hour * HOUR, queues=["other.q"]), T0)["ar_id"]

    assert [grant(1), grant(2)] == [1, 2]
    ar.delete(runtime, USER1, ["1"], True, T0)
    with runtime.engine.begin() as conn:
        ar_db.store_last_ar_id(conn, MAX_AR_ID - 1, T0, "test")
    assert grant(3) == MAX_AR_ID
    # 1 is free again (deleted), 2 still waits: the next ones are 1, then 3.
    assert [grant(4), grant(5)] == [1, 3]
    assert [(r["ar_id"], r["start"]) for r in ar.show(runtime, USER1, ["1"])] == [(1, (T0 + 4 * HOUR).isoformat())]
    assert sorted(r["ar_id"] for r in ar.show(runtime, USER1)) == [1, 2, 3, MAX_AR_ID]


def test_masterq_puts_the_master_task_in_the_queues_named(runtime):
    """qrsub(1) -masterq: with -pe, the queues that may hold the master task of the parallel jobs."""
    largest_first = ar.submit(runtime, USER1, spec(pe="mpi", pe_slots="3"), T0)
    assert largest_first["granted"] == [{"queue": OTHERQ, "host": None, "slots": 3}]
    master = ar.submit(runtime, USER1, spec(start=T0 + 5 * HOUR, pe="mpi", pe_slots="3", master_queues=["all.q"]),
                       T0)
    assert master["granted"] == [{"queue": ALLQ, "host": None, "slots": 2}, {"queue": OTHERQ, "host": None, "slots": 1}]
    assert ar.show(runtime, USER1, [str(master["ar_id"])])[0]["masterq"] == ["all.q"]
    with pytest.raises(ar.ReservationDenied, match="other.q: not in the -masterq list"):
        ar.submit(runtime, USER1, spec(pe="mpi", pe_slots="1", queues=["other.q"], master_queues=["all.q"]), T0)
    with pytest.raises(InvalidInput, match="-masterq: only meaningful for a parallel reservation"):
        ar.submit(runtime, USER1, spec(master_queues=["all.q"]), T0)


# ---------------------------------------------------------------- qralter
def test_qralter_changes_and_rechecks(runtime):
    first = ar.submit(runtime, USER1, spec(queues=["all.q"], pe="mpi", pe_slots="2"), T0)["ar_id"]
    ar.submit(runtime, USER1, spec(start=T0 + 3 * HOUR, queues=["all.q"]), T0)
    ar.alter(runtime, USER1, first, ar.ReservationChange(name="renamed", mail_options="a"), T0)
    [row] = ar.show(runtime, USER1, [str(first)])
    assert (row["name"], row["mail_options"]) == ("renamed", "a")
    ar.alter(runtime, USER1, first, ar.ReservationChange(duration="1:0:0"), T0)   # 12:00-13:00: still free
    with pytest.raises(Conflict, match="refused: slots at queue:.*only 1 free until the new end"):
        ar.alter(runtime, USER1, first, ar.ReservationChange(end=T0 + 4 * HOUR), T0)
    with pytest.raises(Conflict, match="user user3 is denied by xuser_lists"):
        ar.alter(runtime, USER1, first, ar.ReservationChange(users=["user3"]), T0)
    with pytest.raises(Forbidden):
        ar.alter(runtime, USER2, first, ar.ReservationChange(name="x"), T0)
    assert ar.show(runtime, USER1, [str(first)])[0]["end"] == (T0 + 3 * HOUR).isoformat()


# ---------------------------------------------------------------- lifecycle and matching
def test_lifecycle_and_jobs_inside(runtime):
    start = T0 + HOUR
    ar_id = ar.submit(runtime, USER1, spec(start=start, duration="1:0:0", queues=["other.q"], users=["@staff"]),
                      T0)["ar_id"]
    [job] = submit(runtime, limited("0:30:0"), identity=USER2, ar_id=ar_id)
    # Waiting: the job is not matched before the start.
    result = matcher.request_job(runtime, pilot(queue="other.q"), T0)
    assert result.job is None and f"advance reservation {ar_id} is not running (state w" in result.reason
    assert jobs_service.job_status(runtime, USER2, [job])[0]["AR"] == ar_id
    assert ar.manage(runtime, start)["started"] == [ar_id]
    assert usage(runtime) == {(f"queue:{OTHERQ}", "slots"): 1.0}
    # Not on another queue; on its own, debited from the reservation.
    assert matcher.request_job(runtime, pilot(queue="all.q"), start).job is None
    run_job(runtime, job, pilot(queue="other.q", host="wn1"), start)
    assert usage(runtime) == {(f"queue:{OTHERQ}", "slots"): 1.0, (f"ar:{ar_id}|queue:{OTHERQ}", "slots"): 1.0}
    overview = {row["Name"]: row["resv/used/tot"] for row in diagnosis.queues_overview(runtime)}
    assert overview[OTHERQ] == "1/1/4" and overview[ALLQ] == "0/0/2"     # qstat -f: resv/used/tot
    # A second job of the reservation finds its only slot taken.
    [second] = submit(runtime, limited("0:10:0"), ar_id=ar_id, now=start)
    assert matcher.request_job(runtime, pilot(queue="other.q", pid="p2", host="wn2"), start).job is None
    # The end: every job killed first, then the reservation exits and gives its slot back.
    assert ar.manage(runtime, start + HOUR)["ended"] == [ar_id]
    statuses = {r["JobID"]: r["Status"] for r in jobs_service.job_status(runtime, MANAGER, [job, second])}
    assert statuses == {job: "Killed", second: "Killed"}
    assert usage(runtime) == {}
    assert ar.show(runtime, USER1, [str(ar_id)])[0]["state"] == "x"
    accounting = [a for a in accounting_service.reservations(runtime, MANAGER, start + HOUR) if a["ar_id"] == ar_id]
    assert accounting[0]["reserved_slot_seconds"] == 3600 and accounting[0]["jobs"] == 2


def test_reserved_slots_are_blocked_for_other_jobs(runtime):
    # other.q: 4 slots, 3 reserved from 11:00 to 12:00.
    ar.submit(runtime, USER1, spec(start=T0 + HOUR, duration="1:0:0", queues=["other.q"], pe="mpi",
                                   pe_slots="3"), T0)
    jobs = [submit(runtime, limited("2:0:0"))[0] for _ in range(2)]
    # Overlapping jobs fit beside the reservation: only one slot is left.
    run_job(runtime, jobs[0], pilot(queue="other.q", pid="a", host="wa"))
    result = matcher.request_job(runtime, pilot(queue="other.q", pid="b", host="wb"), T0)
    assert result.job is None and "queue slots" in result.reason
    # A job ending before the start fits anywhere.
    [short] = submit(runtime, limited("0:30:0"))
    run_job(runtime, short, pilot(queue="other.q", pid="c", host="wc"))


def test_job_checks_at_submission(runtime):
    ar_id = ar.submit(runtime, USER1, spec(start=T0 + HOUR, duration="1:0:0", queues=["other.q"]), T0)["ar_id"]
    with pytest.raises(InvalidInput, match="advance reservation 999 does not exist"):
        submit(runtime, limited(), ar_id=999)
    with pytest.raises(Forbidden, match="user2 has no access to advance reservation"):
        submit(runtime, limited(), identity=USER2, ar_id=ar_id)
    with pytest.raises(InvalidInput, match="longer than the reservation's duration minus duration_offset"):
        submit(runtime, limited("1:0:0"), ar_id=ar_id)
    with pytest.raises(InvalidInput, match="myapp=1 is more than advance reservation"):
        submit(runtime, limited("0:10:0", '; myapp = 1'), ar_id=ar_id)
    [job] = submit(runtime, limited("0:10:0"), ar_id=ar_id)
    why = diagnosis.why(runtime, USER1, job, T0)
    assert {(q["Layer"], q["Reason"]) for q in why["Queues"]} == {
        ("reservation", f"advance reservation {ar_id} is not running (state w, starts 12/14/2030 11:00:00)")}


def test_lost_queue_puts_the_reservation_in_error(engine, tmp_path):
    runtime = Runtime.create(reservation_config(tmp_path / "a"), engine)
    ar_id = ar.submit(runtime, USER1, spec(start=T0 + HOUR, queues=["other.q"], hard_error=True, mail_options="a"),
                      T0)["ar_id"]
    config = reservation_config(tmp_path / "b")
    resources = json.loads(json.dumps(config.resources))
    del resources[SITE]["CEs"][CE]["Queues"]["other.q"]
    changed = Runtime.create(dataclasses.replace(config, resources=resources), engine)
    assert ar.manage(changed, T0)["error"] == [ar_id]
    [row] = ar.show(changed, USER1, [str(ar_id)])
    assert row["state"] == "W" and row["message"] == f"queue {OTHERQ} is no longer configured"
    assert ar.manage(changed, T0 + HOUR)["started"] == [ar_id]
    assert ar.show(changed, USER1, [str(ar_id)])[0]["state"] == "E"
    # Back in the configuration: valid again.
    assert ar.manage(runtime, T0 + HOUR)["recovered"] == [ar_id]
    assert ar.show(runtime, USER1, [str(ar_id)])[0]["state"] == "r"


@pytest.mark.parametrize("hard", [False, True])
def test_error_handling_soft_keeps_the_rest_usable_hard_blocks(engine, tmp_path, hard):
    runtime = Runtime.create(reservation_config(tmp_path / "a"), engine)
    ar_id = ar.submit(runtime, USER1, spec(start=T0, queues=["all.q", "other.q"], pe="mpi", pe_slots="6",
                                           hard_error=hard), T0)["ar_id"]
    assert {g["queue"]: g["slots"] for g in ar.show(runtime, USER1, [str(ar_id)])[0]["granted"]} == {
        ALLQ: 2, OTHERQ: 4}
    config = reservation_config(tmp_path / "b")
    resources = json.loads(json.dumps(config.resources))
    resources[SITE]["CEs"][CE]["Queues"]["all.q"]["Disabled"] = "yes"
    disabled = Runtime.create(dataclasses.replace(config, resources=resources), engine)
    assert ar.manage(disabled, T0)["error"] == [ar_id]
    [row] = ar.show(disabled, USER1, [str(ar_id)])
    assert (row["state"], row["message"]) == ("E", f"queue {ALLQ} is disabled")
    [job] = submit(disabled, limited("0:10:0"), ar_id=ar_id)
    result = matcher.request_job(disabled, pilot(queue="other.q", host="wn1"), T0)
    if hard:
        assert result.job is None and "error handling is hard (-he yes)" in result.reason
    else:
        assert result.job is not None and result.job["JobID"] == job


def test_a_job_without_h_rt_gets_the_reservations_limit(runtime):
    ar_id = ar.submit(runtime, USER1, spec(start=T0, duration="1:0:0", queues=["other.q"]), T0)["ar_id"]
    ar.manage(runtime, T0)
    [job] = submit(runtime, '[ Executable = "/bin/true"; CPUTime = 300; ]', ar_id=ar_id)
    result = matcher.request_job(runtime, pilot(queue="other.q", host="wn1"), T0)
    assert result.job["JobID"] == job
    assert result.job["Limits"]["h_rt"] == 3600 - 60      # duration minus duration_offset


def test_a_reservation_starting_now_runs_at_once(runtime):
    ar_id = ar.submit(runtime, USER1, ar.ReservationSpec(duration="1:0:0", queues=["other.q"]), T0)["ar_id"]
    [row] = ar.show(runtime, USER1, [str(ar_id)])
    assert (row["state"], row["start"]) == ("r", T0.isoformat())
    assert usage(runtime) == {(f"queue:{OTHERQ}", "slots"): 1.0}


def test_slot_ranges_take_what_fits(runtime):
    open_end = ar.submit(runtime, USER1, spec(pe="mpi", pe_slots="2-", queues=["other.q"]), T0)
    assert open_end["granted"] == [{"queue": OTHERQ, "host": None, "slots": 4}]
    with pytest.raises(ar.ReservationDenied):
        ar.submit(runtime, USER1, spec(pe="mpi", pe_slots="-3", queues=["other.q"]), T0)
    up_to = ar.submit(runtime, USER1, spec(pe="mpi", pe_slots="1-40", queues=["all.q"]), T0)
    assert up_to["granted"] == [{"queue": ALLQ, "host": None, "slots": 2}]


def test_a_host_bound_reservation_keeps_unlimited_jobs_off_its_host_only(runtime):
    ar.submit(runtime, USER1, spec(resources={"h": "host2"}), T0)
    [job] = submit(runtime, UNLIMITED)
    denied = matcher.request_job(runtime, pilot(host="host2", pid="p2"), T0)
    assert denied.job is None and "never run in a queue holding an advance reservation" in denied.reason
    run_job(runtime, job, pilot(host="wn7", pid="p7"))


def test_concurrent_pilots_never_overbook_a_reservation(runtime):
    ar_id = ar.submit(runtime, USER1, spec(start=T0, queues=["other.q"], pe="mpi", pe_slots="2"), T0)["ar_id"]
    for _ in range(6):
        submit(runtime, limited("0:10:0"), ar_id=ar_id)
    for _ in range(6):
        submit(runtime, limited("0:10:0"))
    results, errors = run_concurrently(
        lambda i: matcher.request_job(runtime, pilot(queue="other.q", host=f"wn{i}", pid=f"c{i}"), T0), 8)
    assert errors == []
    matched = [r.job["JobID"] for r in results if r.job is not None]
    assert len(matched) == len(set(matched)) == 4    # 2 in the reservation, 2 beside it
    assert usage(runtime) == {(f"queue:{OTHERQ}", "slots"): 4.0, (f"ar:{ar_id}|queue:{OTHERQ}", "slots"): 2.0}


def test_qralter_a_running_reservation(runtime):
    ar_id = ar.submit(runtime, USER1, spec(start=T0, duration="1:0:0", queues=["other.q"]), T0)["ar_id"]
    later = T0 + HOUR / 2
    ar.alter(runtime, USER1, ar_id, ar.ReservationChange(duration="2:0:0"), later)
    assert ar.show(runtime, USER1, [str(ar_id)])[0]["end"] == (T0 + 2 * HOUR).isoformat()
    with pytest.raises(InvalidInput, match="is already past"):
        ar.alter(runtime, USER1, ar_id, ar.ReservationChange(end=T0 + HOUR / 4), later)
    with pytest.raises(InvalidInput, match="disagree"):
        ar.alter(runtime, USER1, ar_id, ar.ReservationChange(end=T0 + 3 * HOUR, duration="1:0:0"), later)
    ar.manage(runtime, T0 + 2 * HOUR)
    with pytest.raises(Conflict, match="only be changed while waiting or running"):
        ar.alter(runtime, USER1, ar_id, ar.ReservationChange(name="late"), T0 + 2 * HOUR)


def test_a_job_matched_while_a_grant_settles_is_seen_before_it_is_confirmed(engine, tmp_path, monkeypatch):
    # Two server processes: the Matcher of one still uses its list of
    # reservations from before the grant (it may, for caches.RESERVATIONS_TTL) and hands
    # host1 to a job without h_rt; the grant's second phase sees that job
    # and withdraws the reservation instead of granting a host it cannot hold.
    matching = Runtime.create(reservation_config(tmp_path / "a"), engine)
    granting = Runtime.create(reservation_config(tmp_path / "b", reservation_settle=1.0), engine)
    [job] = submit(granting, UNLIMITED)
    assert ar.snapshot(matching, T0) is None
    matching.caches.reservations.ttl = 3600                         # its list is not stale before the grant ends

    outcome: dict = {}

    def grant() -> None:
        try:
            outcome["granted"] = ar.submit(granting, USER1, spec(resources={"h": "host1"}), T0)
        except ar.ReservationDenied as exc:
            outcome["denied"] = str(exc)

    # The settling lasts until the job has run, however slow the machine:
    # the grant's time.sleep(reservation_settle) waits for it instead.
    job_ran = threading.Event()

    class SettleUntilTheJobRan:
        def __getattr__(self, name):
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            assert seconds == 1.0
            assert job_ran.wait(patience(60)), "the job did not run while the grant settled"

    monkeypatch.setattr(ar, "time", SettleUntilTheJobRan())
    thread = threading.Thread(target=grant)
    thread.start()
    wait_until(lambda: ar.show(granting, MANAGER), timeout=30, what="the reservation is stored while it settles")
    run_job(matching, job, pilot(host="host1"))
    job_ran.set()
    thread.join()
    assert "granted" not in outcome
    assert "jobs without a runtime limit (h_rt) run on host host1" in outcome["denied"]
    assert ar.show(granting, MANAGER) == []


def test_a_grant_that_still_fits_after_settling_is_confirmed(engine, tmp_path):
    granting = Runtime.create(reservation_config(tmp_path / "b", reservation_settle=0.2), engine)
    granted = ar.submit(granting, USER1, spec(resources={"h": "host2"}), T0)
    assert granted["granted"] == [{"queue": ALLQ, "host": "host2", "slots": 1}]
    [row] = ar.show(granting, MANAGER)
    assert row["state"] == "w"


def test_jobs_in_a_reservation_are_neither_limited_nor_counted_by_quotas(engine, tmp_path, monkeypatch):
    # specs/003 "AR and Resource Quotas": a quota limits user1 to slots=10, a
    # reservation starting now gives user1 10 slots: user1 runs 20 jobs, and
    # the quota counts 10 of 10 (the reservation's slots are not booked there).
    monkeypatch.setattr(quotas_service, "SYNC_INTERVAL", 0.0)
    config = reservation_config(tmp_path / "config")
    resources = json.loads(json.dumps(config.resources))
    resources[SITE]["CEs"][CE]["Queues"]["other.q"]["complex_values"]["slots"] = 40
    runtime = Runtime.create(dataclasses.replace(config, resources=resources), engine)
    quotas_service.modify(runtime, MANAGER, "{\n name user1_limit\n enabled true\n"
                                            " limit users user1 to slots=10\n}\n", T0)
    ar_id = ar.submit(runtime, USER1, spec(start=T0, queues=["other.q"], pe="mpi", pe_slots="10"), T0)["ar_id"]
    inside = [submit(runtime, limited("0:10:0"), ar_id=ar_id)[0] for _ in range(10)]
    outside = [submit(runtime, limited("0:10:0"))[0] for _ in range(11)]
    got = [matcher.request_job(runtime, pilot(queue="other.q", host=f"wn{i}", pid=f"p{i}"), T0) for i in range(22)]
    matched = {r.job["JobID"] for r in got if r.job is not None}
    assert matched == set(inside) | set(outside[:10])
    assert any('exceeds limit "user1_limit/1" (slots=10/10 for user user1)' in r.reason for r in got if r.job is None)
    assert {k: v for k, v in usage(runtime).items() if k[0].startswith("rqs:")} == {
        ("rqs:user1_limit/1:*", "slots"): 10.0}
    [line] = quotas_service.usage_report(runtime, USER1, {})     # qquota, as user1
    assert (line["rule"], line["limit"], line["filter"]) == ("user1_limit/1", "slots=10/10", "users user1")


# ---------------------------------------------------------------- -l judged as a job's request
def flavored_runtime(engine, tmp_path) -> Runtime:
    """The spec's cluster plus a STRING complex `flavor` that only other.q defines."""
    from tests.reservations_config import write_config
    from wms.config import load_config

    directory = write_config(tmp_path / "flavor")
    cluster = (directory / "cluster.yaml").read_text().replace(
        "complexes:\n", 'complexes:\n  - {name: flavor, shortcut: fl, type: STRING, relop: "==", requestable: YES, '
        "consumable: NO, default: NONE, urgency: 0}\n")
    (directory / "cluster.yaml").write_text(cluster)
    resources = (directory / "resources.yaml").read_text().replace(
        "complex_values: {slots: 4, myapp: 2}", "complex_values: {slots: 4, myapp: 2, flavor: gold}")
    (directory / "resources.yaml").write_text(resources)
    return Runtime.create(load_config(directory), engine)


def test_a_reservation_is_granted_only_where_a_level_offers_what_it_requests(engine, tmp_path):
    """qrsub -l flavor=gold (no -q) lands on the one queue that offers flavor, as a job with -l flavor=gold does."""
    runtime = flavored_runtime(engine, tmp_path)
    granted = ar.submit(runtime, USER1, spec(resources={"flavor": "gold"}, duration="1:0:0"), T0)
    assert [g["queue"] for g in granted["granted"]] == [OTHERQ]
    # Named the other queue, it is refused with the job's reason.
    with pytest.raises(ar.ReservationDenied) as denied:
        ar.submit(runtime, USER1, spec(resources={"flavor": "gold"}, queues=["all.q"]), T0)
    assert f"{ALLQ}: flavor=gold requested, not offered on any level" in str(denied.value)
    # The job asking the same is refused on all.q for the same reason.
    [job_id] = submit(runtime, limited(extra='; flavor = "gold"'))
    refused = matcher.request_job(runtime, pilot(), T0)
    assert refused.job is None and "flavor=gold requested, not offered on any level" in refused.reason
    # A value the pilots' hosts measure stays theirs to offer: judged when the reservation's jobs are matched.
    assert ar.submit(runtime, USER1, spec(resources={"arch": "lx-amd64"}, queues=["all.q"],
                                          start=T0 + 5 * HOUR), T0)["ar_id"]
    assert job_id
