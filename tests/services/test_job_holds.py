"""wms hold / wms release (qhold, qrls) in the service layer, on SQLite,
PostgreSQL and MariaDB: Grid Engine's user, operator and system holds, who
may set and release which, the history with the caller and the reason,
filters a batch at a time, and a hold racing the pilots' claims."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from tests.helpers import ADMIN, ALICE, OPERATOR, ROLAND, as_pilot, run_concurrently
from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from wms.core.holds import parse_types
from wms.db import matching as match_db
from wms.db.schema import job_debits, job_holds, jobs
from wms.services import leases
from wms.services import diagnosis, holds, matcher, submission
from wms.services import jobs as jobs_service
from wms.services.jobs import Selection
from wms.services.submission import SubmitOptions, submit_jobs
from tests.services.conftest import pilot

pytestmark = pytest.mark.databases

RUNNABLE = '[ Executable = "/bin/true"; CPUTime = 300; ]'
USER_HOLD, OPERATOR_HOLD, SYSTEM_HOLD = parse_types("u"), parse_types("o"), parse_types("s")


def submit(runtime, now, n: int = 1, who=ROLAND) -> list[int]:
    text = RUNNABLE if n == 1 else RUNNABLE.replace("CPUTime", f"Parameters = {n}; CPUTime")
    return submit_jobs(runtime, who, [("job.jdl", text)], SubmitOptions(), now)


def submit_held(runtime, now, n: int) -> list[int]:
    """qsub -h: the jobs stored with a user hold, in the submission's transaction."""
    text = RUNNABLE.replace("CPUTime", f"Parameters = {n}; CPUTime")
    return submission.submit(runtime, ROLAND, [("job.jdl", text)], SubmitOptions(), now, held=True).job_ids


def ids(*job_ids: int) -> Selection:
    return Selection(job_ids=list(job_ids))


def state(runtime, job_id: int) -> tuple[str, str, str | None]:
    [row] = jobs_service.job_status(runtime, ADMIN, [job_id])
    with runtime.engine.connect() as conn:
        types = conn.execute(select(jobs.c.hold_types).where(jobs.c.job_id == job_id)).scalar()
    return row["Status"], row["MinorStatus"], types


def test_the_owner_holds_a_waiting_job_and_no_pilot_gets_it_until_released(runtime, now):
    [job] = submit(runtime, now)
    answer = holds.hold_jobs(runtime, ROLAND, ids(job), USER_HOLD, "wrong input file", now)
    assert answer == {"held": [job], "not_held": {}, "next_after": None}
    assert state(runtime, job) == ("Held", "Held by the user roland: wrong input file", "u")
    assert matcher.request_job(runtime, pilot("p1"), now).job is None

    answer = holds.release_jobs(runtime, ROLAND, ids(job), None, "fixed", now)
    assert answer == {"released": [job], "still_held": {}, "not_released": {}, "next_after": None}
    assert state(runtime, job) == ("Waiting", "The user hold released by roland: fixed", None)
    assert matcher.request_job(runtime, pilot("p2"), now).job["JobID"] == job
    history = jobs_service.history(runtime, ROLAND, job)
    assert [(e["Status"], e["MinorStatus"], e["Source"]) for e in history[-3:-1]] == [
        ("Held", "Held by the user roland: wrong input file", "User roland"),
        ("Waiting", "The user hold released by roland: fixed", "User roland"),
    ]


def test_jobs_submitted_held_are_never_matched_until_released(runtime, now):
    [job] = submit(runtime, now)
    held = submit_held(runtime, now, 2)
    assert [state(runtime, j) for j in held] == [("Held", "Held by the user roland", "u")] * 2
    assert [(e["Status"], e["Source"]) for e in jobs_service.history(runtime, ROLAND, held[0])][-2:] == [
        ("Waiting", "TaskQueue"), ("Held", "User roland")]
    assert matcher.request_job(runtime, pilot("p1"), now).job["JobID"] == job
    assert matcher.request_job(runtime, pilot("p2"), now).job is None
    assert holds.release_jobs(runtime, ROLAND, ids(*held), None, None, now)["released"] == held
    assert matcher.request_job(runtime, pilot("p3"), now).job["JobID"] == held[0]


def test_the_owner_cannot_release_an_operators_hold(runtime, now):
    [job] = submit(runtime, now)
    holds.hold_jobs(runtime, OPERATOR, ids(job), OPERATOR_HOLD, "site downtime", now)
    with pytest.raises(Forbidden, match=f"job {job}: Held by operator oper: site downtime; a user may not set or "
                                         r"release operator holds \(-h o\): only operators and managers may"):
        holds.release_jobs(runtime, ROLAND, ids(job), None, None, now)
    with pytest.raises(Forbidden, match=r"a user may not set or release operator holds \(-h o\)"):
        holds.release_jobs(runtime, ROLAND, ids(job), OPERATOR_HOLD, None, now)
    assert state(runtime, job)[0] == "Held"
    assert holds.release_jobs(runtime, OPERATOR, ids(job), None, None, now)["released"] == [job]


def test_a_job_held_twice_waits_again_only_when_both_holds_are_released(runtime, now):
    [job] = submit(runtime, now)
    holds.hold_jobs(runtime, ROLAND, ids(job), USER_HOLD, "mine", now)
    holds.hold_jobs(runtime, OPERATOR, ids(job), OPERATOR_HOLD, "theirs", now)
    assert state(runtime, job) == ("Held", "Held by the user roland: mine; by operator oper: theirs", "uo")

    answer = holds.release_jobs(runtime, ROLAND, ids(job), None, None, now)
    assert answer["released"] == [] and answer["still_held"] == {str(job): "Held by operator oper: theirs"}
    assert state(runtime, job) == ("Held", "Held by operator oper: theirs", "o")
    assert jobs_service.history(runtime, ROLAND, job)[-1]["MinorStatus"] == (
        "The user hold released by roland; still held by operator oper: theirs")

    again = holds.hold_jobs(runtime, OPERATOR, ids(job), OPERATOR_HOLD, "twice", now)
    assert again["held"] == [] and again["not_held"] == {str(job): "already Held by operator oper: theirs"}
    assert holds.release_jobs(runtime, OPERATOR, ids(job), OPERATOR_HOLD, None, now)["released"] == [job]


@pytest.mark.parametrize(("caller", "types", "message"), [
    (ROLAND, OPERATOR_HOLD, r"a user may not set or release operator holds \(-h o\): only operators and managers may"),
    (ROLAND, SYSTEM_HOLD, r"a user may not set or release system holds \(-h s\): only managers may"),
    (OPERATOR, SYSTEM_HOLD, r"an operator may not set or release system holds \(-h s\): only managers may"),
])
def test_holds_a_role_may_not_set_are_refused_whole(runtime, now, caller, types, message):
    [job] = submit(runtime, now)
    with pytest.raises(Forbidden, match=message):
        holds.hold_jobs(runtime, caller, ids(job), types, None, now)
    assert state(runtime, job)[0] == "Waiting"


def test_the_system_hold_is_released_by_a_manager_and_shown_by_why(runtime, now):
    [job] = submit(runtime, now)
    [row] = jobs_service.visible_jobs(runtime, ADMIN, [job])
    assert holds.hold_task_queue(runtime, row["task_queue_id"], "Requirements cannot be evaluated", "Matcher",
                                 now) == [job]
    report = diagnosis.why(runtime, ROLAND, job, now)
    assert report["Holds"] == [{"Type": "s", "Holder": "system", "Reason": "Requirements cannot be evaluated",
                                "Time": now.isoformat()}]
    assert report["Summary"] == (f"job {job} is Held, it is not matched: Held by the system: Requirements cannot "
                                 "be evaluated (a manager may release it: wms release ID, qrls -h s ID)")
    with pytest.raises(Forbidden):
        holds.release_jobs(runtime, OPERATOR, ids(job), None, None, now)
    assert holds.release_jobs(runtime, ADMIN, ids(job), None, "expression fixed", now)["released"] == [job]


def test_a_matched_job_is_taken_back_from_its_pilot_which_then_starts_nothing(runtime, now):
    [job] = submit(runtime, now)
    assert matcher.request_job(runtime, pilot("p1"), now).job["JobID"] == job
    answer = holds.hold_jobs(runtime, ROLAND, ids(job), USER_HOLD, "wrong input", now)
    assert answer["held"] == [job]
    assert state(runtime, job) == ("Held", "Held by the user roland: wrong input", "u")
    [entry] = [e for e in jobs_service.history(runtime, ROLAND, job) if e["Status"] == "Held"]
    assert entry["MinorStatus"] == "Held by the user roland: wrong input (taken back from pilot p1 before it started)"
    # The pilot's confirmation comes too late: refused, so the pilot starts nothing.
    with pytest.raises(Conflict, match=r"it is Held"):
        leases.pilot_status(runtime, as_pilot("p1"), job, "p1", "Running", "", None, now, attempt=1)
    assert leases.heartbeat(runtime, as_pilot("p1"), job, "p1", now, attempt=1)["Kill"] is True
    with runtime.engine.connect() as conn:
        assert {k: v for k, v in match_db.all_usage(conn).items() if v} == {}
        assert conn.execute(select(jobs.c.pilot_id).where(jobs.c.job_id == job)).scalar() is None
    # Released, it is handed out again as a new attempt.
    assert holds.release_jobs(runtime, ROLAND, ids(job), None, None, now)["released"] == [job]
    again = matcher.request_job(runtime, pilot("p2"), now).job
    assert (again["JobID"], again["Attempt"]) == (job, 2)


def test_a_running_job_is_not_held_and_the_answer_says_what_stops_it(runtime, now):
    first, second = submit(runtime, now, 2)
    taken = matcher.request_job(runtime, pilot("p1"), now).job["JobID"]
    leases.pilot_status(runtime, as_pilot("p1"), taken, "p1", "Running", "", None, now, attempt=1)
    waiting = second if taken == first else first
    answer = holds.hold_jobs(runtime, ROLAND, ids(first, second), USER_HOLD, None, now)
    assert answer["held"] == [waiting]
    assert answer["not_held"] == {str(taken): "it is Running on DIRAC.Local.ch/localhost/default: only a job that "
                                              "has not started (Waiting, Matched) can be held; a kill or a "
                                              "reschedule --running stops it"}
    answer = holds.release_jobs(runtime, ROLAND, ids(taken), None, None, now)
    assert answer["not_released"] == {str(taken): "it is Running, not Held"}


def test_a_held_job_can_be_killed_and_its_holds_go(runtime, now):
    [job] = submit(runtime, now)
    holds.hold_jobs(runtime, OPERATOR, ids(job), OPERATOR_HOLD, "suspicious", now)
    assert jobs_service.kill_jobs(runtime, ROLAND, [job], now)["killed"] == [job]
    assert state(runtime, job)[2] is None
    with runtime.engine.connect() as conn:
        assert conn.execute(select(job_holds).where(job_holds.c.job_id == job)).all() == []


def test_refusals_of_the_selection(runtime, now):
    [job] = submit(runtime, now)
    with pytest.raises(NotFound, match="no such job: 999999"):
        holds.hold_jobs(runtime, ROLAND, ids(job, 999999), USER_HOLD, None, now)
    with pytest.raises(NotFound, match=f"no such job: {job}"):           # alice does not see roland's job
        holds.hold_jobs(runtime, ALICE, ids(job), USER_HOLD, None, now)
    with pytest.raises(InvalidInput, match=r"give job ids or a filter \(status, owner\), not both"):
        holds.hold_jobs(runtime, ROLAND, Selection(job_ids=[job], status="Waiting"), USER_HOLD, None, now)
    with pytest.raises(InvalidInput, match=r"give job ids or a filter \(status, owner\)$"):
        holds.hold_jobs(runtime, ROLAND, Selection(), USER_HOLD, None, now)
    with pytest.raises(Forbidden, match="a user may not hold the jobs of alice: owner is a filter for operators"):
        holds.hold_jobs(runtime, ROLAND, Selection(owner="alice"), USER_HOLD, None, now)
    with pytest.raises(InvalidInput, match="status Running: only jobs that are Held or Matched or Waiting can be given to hold"):
        holds.hold_jobs(runtime, ROLAND, Selection(status="Running"), USER_HOLD, None, now)
    with pytest.raises(InvalidInput, match="reason: at most 256 characters, not 300"):
        holds.hold_jobs(runtime, ROLAND, ids(job), USER_HOLD, "x" * 300, now)
    assert state(runtime, job)[0] == "Waiting"


def test_a_filter_takes_the_callers_jobs_a_batch_at_a_time(runtime, now, monkeypatch):
    mine = submit(runtime, now, 5)
    [alices] = submit(runtime, now, who=ALICE)
    monkeypatch.setattr(jobs_service, "CONTROL_JOBS_MAX", 3)
    first = holds.hold_jobs(runtime, ROLAND, Selection(status="Waiting"), USER_HOLD, "batch", now)
    assert first["held"] == mine[:3] and first["next_after"] == mine[2]
    rest = holds.hold_jobs(runtime, ROLAND, Selection(status="Waiting", after=mine[2]), USER_HOLD, "batch", now)
    assert rest["held"] == mine[3:] and rest["next_after"] is None
    assert state(runtime, alices)[0] == "Waiting"

    released = holds.release_jobs(runtime, OPERATOR, Selection(owner="roland"), None, None, now)
    assert released["released"] == mine[:3] and released["next_after"] == mine[2]


def test_a_hold_racing_the_pilots_claims_and_confirmations_ends_held_or_running_never_both(runtime, now):
    job_ids = submit(runtime, now, 40)
    start = threading.Barrier(5)
    answers: dict[str, dict] = {}

    def work(i: int):
        start.wait()
        if i == 0:
            answers["hold"] = holds.hold_jobs(runtime, ROLAND, Selection(job_ids=job_ids), USER_HOLD, "race", now)
            return None
        running = []
        for n in range(10):
            name = f"racer-{i}-{n}"
            result = matcher.request_job(runtime, pilot(name), now)
            if result.job is None:
                continue
            try:
                leases.pilot_status(runtime, as_pilot(name), result.job["JobID"], name, "Running", "", None, now,
                                     attempt=result.job["Attempt"])
            except Conflict:
                continue            # taken back by the hold before the pilot confirmed: it starts nothing
            running.append(result.job["JobID"])
        return running

    results, errors = run_concurrently(work, 5)
    assert errors == []
    running = {job_id for started in results if started for job_id in started}
    held = set(answers["hold"]["held"])
    assert held.isdisjoint(running)
    assert held | running == set(job_ids)
    assert set(answers["hold"]["not_held"]) == {str(j) for j in running}
    for why in answers["hold"]["not_held"].values():
        assert why.startswith("it is Running on ")
    with runtime.engine.connect() as conn:
        rows = dict(conn.execute(select(jobs.c.job_id, jobs.c.status).where(jobs.c.job_id.in_(job_ids))).all())
        debited = set(conn.execute(select(job_debits.c.job_id).where(job_debits.c.job_id.in_(job_ids))).scalars())
    assert {j for j, s in rows.items() if s == "Held"} == held
    assert {j for j, s in rows.items() if s == "Running"} == running
    assert debited <= running           # the held jobs' debits were returned with the hold
    for job_id in held:         # a held job never started: no Running in its history
        assert "Running" not in [e["Status"] for e in jobs_service.history(runtime, ROLAND, job_id)]
