"""The Matcher on SQLite, PostgreSQL and MariaDB: pilots get jobs their
queue and node can run, consumables are debited and returned, leases
expire, and nothing is handed out twice or overbooked."""

from __future__ import annotations

import random
import threading
from datetime import timedelta

import pytest
from sqlalchemy import select

from tests.helpers import ADMIN, as_pilot, ROLAND, run_concurrently
from wms.core.errors import Conflict, InvalidInput
from wms.core.match.context import PilotRequest
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db import pilots as pilots_db
from wms.db import task_queues as task_queues_db
from wms.db.schema import jobs as jobs_table
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services import leases
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

LOCAL = dict(site="DIRAC.Local.ch", ce="localhost", queue="default")
LOAD = {"num_proc": 8, "mem_total": "16G", "mem_free": "12G", "arch": "lx-amd64", "load_avg": 0.1}


def pilot(pilot_id="p1", host="wn01", **kw) -> PilotRequest:
    fields = {**LOCAL, "host": host, "pilot_id": pilot_id, "load": LOAD, "platform": "x86_64-el9",
              "cpu_time_left": 200000, **kw}
    return PilotRequest(**fields)


def submit(runtime, now, *texts, identity=ROLAND):
    return submit_jobs(runtime, identity, [(f"j{i}.jdl", t) for i, t in enumerate(texts)], SubmitOptions(), now)


def status(runtime, job_id):
    return jobs_service.job_status(runtime, ADMIN, [job_id])[0]


def usage(runtime):
    with runtime.engine.connect() as conn:
        return {k: v for k, v in match_db.all_usage(conn).items() if v}


HELLO = '[ Executable = "/bin/echo"; Arguments = "hello"; CPUTime = 300; ]'


def test_a_pilot_gets_a_job_runs_it_and_the_slot_comes_back(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    result = matcher.request_job(runtime, pilot(), now)
    assert result.job["JobID"] == job_id
    assert result.job["Executable"] == "/bin/echo" and result.job["Arguments"] == "hello"
    assert result.job["Lease"] == runtime.config.settings.match_lease
    row = status(runtime, job_id)
    assert (row["Status"], row["Queue"], row["Site"]) == ("Matched", "DIRAC.Local.ch/localhost/default",
                                                          "DIRAC.Local.ch")
    assert usage(runtime) == {("queue:DIRAC.Local.ch/localhost/default", "slots"): 1.0}
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Done", "", 0, now)
    assert status(runtime, job_id)["Status"] == "Done"
    assert usage(runtime) == {}
    history = [h["Status"] for h in jobs_service.history(runtime, ADMIN, job_id)]
    assert history == ["Received", "Checking", "Waiting", "Matched", "Running", "Done"]


def test_the_pilot_is_handed_the_streams_files_and_the_environment_the_jdl_names(runtime, now):
    """DIRAC's StdOutput/StdError and ExecutionEnvironment reach the pilot with the job."""
    [job_id] = submit(runtime, now, 'Executable = "run.sh"; CPUTime = 300; StdOutput = "StdOut"; StdError = "StdErr"; '
                                    'ExecutionEnvironment = {"MYVAR=1"};')
    job = matcher.request_job(runtime, pilot(), now).job
    assert job["JobID"] == job_id
    assert (job["StdOutput"], job["StdError"]) == ("StdOut", "StdErr")
    assert job["Environment"] == {"MYVAR": "1", "WMS_JOB_ID": str(job_id)}
    [plain] = submit(runtime, now, HELLO)
    job = matcher.request_job(runtime, pilot("p2"), now).job
    assert (job["JobID"], job["StdOutput"], job["StdError"]) == (plain, "std.out", "std.err")


def test_a_job_ends_when_its_payload_ended_not_when_the_report_came(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    assert matcher.request_job(runtime, pilot(), now).job["JobID"] == job_id
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    later = now + timedelta(seconds=100)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Done", "", 0, later, ended_ago=40.0)
    with runtime.engine.connect() as conn:
        [row] = jobs_db.get_jobs(conn, [job_id])
    assert _naive(row["end_time"]) == _naive(now + timedelta(seconds=60))


def _naive(moment):
    return moment.replace(tzinfo=None)


def test_no_job_twice_and_no_waiting_job_left(runtime, now):
    submit(runtime, now, HELLO)
    assert matcher.request_job(runtime, pilot("p1"), now).job is not None
    result = matcher.request_job(runtime, pilot("p2"), now)
    assert result.job is None and result.reason == matcher.NO_WAITING


def test_an_idle_pilot_is_told_whose_jobs_wait_that_it_may_not_take(runtime, now):
    """The usual newcomer's mistake: a pilot token of another VO than the
    jobs'. The pilot's log line says so instead of "no waiting job"."""
    [job_id] = submit(runtime, now, HELLO)                          # roland's, of VO lhcb
    result = matcher.request_job(runtime, pilot("p1", vo="wms"), now)
    assert result.job is None
    assert result.reason == (f"{matcher.NO_WAITING} of VO wms; jobs of VO lhcb wait there "
                             "(a pilot takes the jobs of its token's VO only)")
    result = matcher.request_job(runtime, pilot("p2", vo="lhcb", owner="alice"), now)
    assert result.reason == (f"{matcher.NO_WAITING} of user alice; jobs of user roland wait there "
                             "(a pilot that cannot isolate its payloads takes its own user's jobs only)")
    assert matcher.request_job(runtime, pilot("p3", vo="lhcb"), now).job["JobID"] == job_id
    matcher.forget_waiting_task_queues(runtime)                      # the waiting list is cached a second
    result = matcher.request_job(runtime, pilot("p4", vo="wms"), now)
    assert result.reason == matcher.NO_WAITING                      # nothing waits for anyone now


def test_queue_slots_limit_concurrent_jobs_and_kill_returns_them(runtime, now):
    ids = submit(runtime, now, *[HELLO] * 6)      # the local queue has slots: 4
    got = [matcher.request_job(runtime, pilot(f"p{i}"), now).job for i in range(5)]
    assert [j is not None for j in got] == [True] * 4 + [False]
    result = matcher.request_job(runtime, pilot("p9"), now)
    assert "queue slots: 1 needed, 0 of 4 free" in result.reason
    jobs_service.kill_jobs(runtime, ADMIN, [got[0]["JobID"]], now)
    assert matcher.request_job(runtime, pilot("p9"), now).job is not None
    assert len({j["JobID"] for j in got if j}) == 4 and set(ids)


def test_a_consumable_is_debited_at_every_level_that_defines_it(runtime, now):
    lic = '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ compiler_lic = 1; ]; ]'
    submit(runtime, now, lic, lic, lic)            # the local queue has compiler_lic: 2, global 20
    first = matcher.request_job(runtime, pilot("p1"), now)
    second = matcher.request_job(runtime, pilot("p2"), now)
    assert first.job and second.job
    assert usage(runtime) == {
        ("global", "compiler_lic"): 2.0,
        ("queue:DIRAC.Local.ch/localhost/default", "compiler_lic"): 2.0,
        ("queue:DIRAC.Local.ch/localhost/default", "slots"): 2.0,
    }
    third = matcher.request_job(runtime, pilot("p3"), now)
    assert third.job is None and "queue compiler_lic: 1 needed, 0 of 2 free" in third.reason


def test_host_load_values_are_checked(runtime, now):
    submit(runtime, now, '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ mem_free = "4G"; ]; ]')
    small = pilot(load={**LOAD, "mem_free": "2G"})
    result = matcher.request_job(runtime, small, now)
    assert result.job is None
    assert "mem_free=4G requested, 2G offered (host load value)" in result.reason
    assert matcher.request_job(runtime, pilot(), now).job is not None


def test_arch_pattern_against_the_pilot(runtime, now):
    submit(runtime, now, '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ arch = "lx*-amd64|sol*"; ]; ]')
    assert matcher.request_job(runtime, pilot(load={**LOAD, "arch": "lx-arm64"}), now).job is None
    assert matcher.request_job(runtime, pilot(load={**LOAD, "arch": "lx24-amd64"}), now).job is not None


def test_pilot_platform_and_cpu_time_left(runtime, now):
    submit(runtime, now, '[ Executable = "/bin/true"; CPUTime = 50000; Platform = "x86_64-el9"; ]')
    result = matcher.request_job(runtime, pilot(platform="x86_64-el8"), now)
    assert result.job is None and "pilot platform x86_64-el8" in result.reason
    result = matcher.request_job(runtime, pilot(cpu_time_left=1000), now)
    assert result.job is None and "CPU time" in result.reason
    assert matcher.request_job(runtime, pilot(), now).job is not None


def test_pools_restrict_what_a_pilot_gets(runtime, now):
    [sw] = submit(runtime, now, '[ Executable = "/bin/true"; CPUTime = 300; Requirements = [ SoftwareTag = "AppVersion2"; ]; ]')
    assert matcher.request_job(runtime, pilot(pools=()), now).job is None
    assert matcher.request_job(runtime, pilot(), now).job["JobID"] == sw       # pools looked up


def test_the_expression_is_evaluated_with_the_pilot(runtime, now):
    submit(runtime, now, '[ Executable = "/bin/true"; CPUTime = 300; Requirements = other.FreeSlots >= 2; ]')
    assert matcher.request_job(runtime, pilot(slots=1), now).job is None
    assert matcher.request_job(runtime, pilot(slots=2), now).job is not None


def test_jobs_without_soft_violations_on_the_pilot_come_first(runtime, now):
    soft = '[ Executable = "/bin/true"; CPUTime = 300; SoftResourceRequests = [ arch = "sol*"; ]; ]'
    plain = '[ Executable = "/bin/true"; CPUTime = 400; ]'
    [violating] = submit(runtime, now, soft)
    [fitting] = submit(runtime, now, plain)
    for attempt in range(5):          # whatever the draw, the job without violations comes first
        job = matcher.request_job(runtime, pilot(f"p{attempt}"), now).job
        assert job["JobID"] == fitting
        jobs_service.kill_jobs(runtime, ADMIN, [fitting], now)
        [fitting] = submit(runtime, now, plain)
    # With nothing better, the job with violations still runs.
    jobs_service.kill_jobs(runtime, ADMIN, [fitting], now)
    assert matcher.request_job(runtime, pilot("last"), now).job["JobID"] == violating


def test_unconfirmed_jobs_return_to_waiting_when_the_lease_expires(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    assert matcher.request_job(runtime, pilot(), now).job["JobID"] == job_id
    assert leases.expire_leases(runtime, now + timedelta(seconds=10)) == 0
    later = now + timedelta(seconds=runtime.config.settings.match_lease + 1)
    assert leases.expire_leases(runtime, later) == 1
    row = status(runtime, job_id)
    assert row["Status"] == "Waiting" and row["MinorStatus"].startswith("Lease expired")
    assert usage(runtime) == {}
    # The late pilot is told the job is no longer its own (409, so it stops
    # its copy), whether it quotes its attempt or not; its heartbeat says Kill.
    with pytest.raises(Conflict, match="not held by pilot p1"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, later)
    with pytest.raises(Conflict, match="not held by pilot p1"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, later, attempt=1)
    assert leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", later, attempt=1)["Kill"] is True
    assert matcher.request_job(runtime, pilot("p2"), later).job["JobID"] == job_id


def test_heartbeat_tells_the_pilot_to_kill_a_killed_job(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    matcher.request_job(runtime, pilot(), now)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    assert leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", now)["Kill"] is False
    jobs_service.kill_jobs(runtime, ROLAND, [job_id], now)
    assert leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", now)["Kill"] is True
    assert usage(runtime) == {}


def test_bad_requests_and_reports_are_refused(runtime, now):
    with pytest.raises(InvalidInput, match="unknown queue 'X/Y/Z'"):
        matcher.request_job(runtime, pilot(site="X", ce="Y", queue="Z"), now)
    [job_id] = submit(runtime, now, HELLO)
    matcher.request_job(runtime, pilot(), now)
    with pytest.raises(InvalidInput, match="status must be Running, Done or Failed"):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Stalled", "", None, now)
    with pytest.raises(Conflict):
        leases.pilot_status(runtime, as_pilot("intruder"), job_id, "intruder", "Running", "", None, now)


def test_many_pilots_at_once_never_share_a_job_nor_overbook(runtime, now):
    submit(runtime, now, *[HELLO] * 30)
    got, errors = [], []

    def worker(n):
        try:
            for k in range(3):
                result = matcher.request_job(runtime, pilot(f"p{n}-{k}", host=f"wn{n}"), now)
                if result.job:
                    got.append(result.job["JobID"])
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(got) == len(set(got)) == 4          # queue slots: 4
    assert usage(runtime) == {("queue:DIRAC.Local.ch/localhost/default", "slots"): 4.0}


def test_many_batches_at_once_never_share_a_job_nor_overbook(runtime, now):
    # Batches of up to three, claimed together where the database can: the
    # queue's 4 slots still hold exactly 4 jobs, none handed out twice.
    submit(runtime, now, *[HELLO] * 30)
    results, errors = run_concurrently(
        lambda n: matcher.request_jobs(runtime, pilot(f"p{n}", host=f"wn{n}", slots=3), 3, now).jobs, 8)
    assert errors == []
    got = [job["JobID"] for jobs in results for job in jobs]
    assert len(got) == len(set(got)) == 4
    assert usage(runtime) == {("queue:DIRAC.Local.ch/localhost/default", "slots"): 4.0}


def test_a_silent_running_job_is_stalled_then_rescheduled_and_runs_elsewhere(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    matcher.request_job(runtime, pilot("p1"), now)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", now)
    timeout = runtime.config.settings.heartbeat_timeout
    assert leases.reap_stalled(runtime, now + timedelta(seconds=timeout - 1)) == 0
    later = now + timedelta(seconds=timeout + 1)
    assert leases.reap_stalled(runtime, later) == 1
    row = status(runtime, job_id)
    assert row["Status"] == "Waiting" and row["MinorStatus"].startswith("Rescheduled")
    assert usage(runtime) == {}
    statuses = [h["Status"] for h in jobs_service.history(runtime, ADMIN, job_id)]
    assert statuses[-3:] == ["Running", "Stalled", "Waiting"]
    # The silent pilot comes back too late: the job is not its own any more.
    with pytest.raises(Conflict):
        leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Done", "", 0, later)
    assert matcher.request_job(runtime, pilot("p2"), later).job["JobID"] == job_id


def ended_pilot(runtime, pilot_id, now, state):
    """A pilot the SiteDirector started and then read as over (``state``)."""
    with runtime.engine.begin() as conn:
        pilots_db.add_pilots(conn, [{"pilot_id": pilot_id, **LOCAL, "backend": "local", "state": "Running",
                                     "submitted": now, "vo": "lhcb"}])
        assert pilots_db.set_state(conn, pilot_id, state, now)


def test_a_running_job_whose_pilot_ended_is_rescheduled_without_waiting_for_the_heartbeat_timeout(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    matcher.request_job(runtime, pilot("p1"), now)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    assert leases.reap_stalled(runtime, now) == 0                 # the pilot is not known to have ended
    ended_pilot(runtime, "p1", now, "Failed")
    assert leases.reap_stalled(runtime, now) == 1                 # long before heartbeat_timeout
    row = status(runtime, job_id)
    assert (row["Status"], row["MinorStatus"]) == ("Waiting", "Rescheduled: the pilot ended while the job ran")
    assert usage(runtime) == {}
    history = jobs_service.history(runtime, ADMIN, job_id)
    assert [(h["Status"], h["MinorStatus"]) for h in history[-2:]] == [
        ("Stalled", "The pilot ended (Failed)"), ("Waiting", "Rescheduled: the pilot ended while the job ran")]
    assert leases.reap_stalled(runtime, now) == 0                 # once only
    assert matcher.request_job(runtime, pilot("p2"), now).job["JobID"] == job_id
    assert leases.reap_stalled(runtime, now) == 0                 # p2 holds it now, and p2 lives


def test_a_matched_job_whose_pilot_ended_goes_back_before_its_lease_expires(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    matcher.request_job(runtime, pilot("p1"), now)
    ended_pilot(runtime, "p1", now, "Done")
    assert leases.reap_stalled(runtime, now) == 1
    row = status(runtime, job_id)
    assert (row["Status"], row["MinorStatus"]) == ("Waiting", "Rescheduled: the pilot ended before confirming the job")
    assert usage(runtime) == {}
    assert "Stalled" not in [h["Status"] for h in jobs_service.history(runtime, ADMIN, job_id)]


def test_jobs_of_a_pilot_still_running_or_started_by_hand_are_left_alone(runtime, now):
    first, second = submit(runtime, now, HELLO, HELLO)
    with runtime.engine.begin() as conn:
        pilots_db.add_pilots(conn, [{"pilot_id": "alive", **LOCAL, "backend": "local", "state": "Running",
                                     "submitted": now, "vo": "lhcb"}])
    held = {matcher.request_job(runtime, pilot(name), now).job["JobID"] for name in ("alive", "by-hand")}
    assert held == {first, second}
    assert leases.reap_stalled(runtime, now) == 0
    assert {status(runtime, j)["Status"] for j in held} == {"Matched"}


def test_an_ended_pilot_reaped_twice_at_once_gives_its_job_back_once(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    matcher.request_job(runtime, pilot("p1"), now)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    ended_pilot(runtime, "p1", now, "Aborted")
    counts, errors = run_concurrently(lambda i: leases.reap_stalled(runtime, now), 4)
    assert errors == [] and sum(counts) == 1
    statuses = [h["Status"] for h in jobs_service.history(runtime, ADMIN, job_id)]
    assert statuses.count("Stalled") == 1 and statuses[-1] == "Waiting"


def test_a_job_rescheduled_too_often_fails(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    lease = runtime.config.settings.match_lease
    when = now
    for attempt in range(runtime.config.settings.max_reschedule):
        assert matcher.request_job(runtime, pilot(f"p{attempt}"), when).job["JobID"] == job_id
        when = when + timedelta(seconds=lease + 1)
        assert leases.expire_leases(runtime, when) == 1
        assert status(runtime, job_id)["Status"] == "Waiting"
    matcher.request_job(runtime, pilot("last"), when)
    when = when + timedelta(seconds=lease + 1)
    assert leases.expire_leases(runtime, when) == 1
    row = status(runtime, job_id)
    assert row["Status"] == "Failed" and "rescheduled the most times allowed" in row["MinorStatus"]
    assert usage(runtime) == {}


def test_two_reapers_at_once_reschedule_a_job_once(runtime, now):
    [job_id] = submit(runtime, now, HELLO)
    matcher.request_job(runtime, pilot("p1"), now)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    leases.heartbeat(runtime, as_pilot("p1"), job_id, "p1", now)
    later = now + timedelta(seconds=runtime.config.settings.heartbeat_timeout + 1)
    counts, errors = run_concurrently(lambda i: leases.reap_stalled(runtime, later), 4)
    assert errors == [] and sum(counts) == 1
    statuses = [h["Status"] for h in jobs_service.history(runtime, ADMIN, job_id)]
    assert statuses.count("Stalled") == 1 and statuses[-1] == "Waiting"


def test_a_batch_hands_out_jobs_while_the_slots_last(runtime, now):
    submitted = submit(runtime, now, *[HELLO] * 3)
    result = matcher.request_jobs(runtime, pilot(slots=2), 2, now)
    assert len(result.jobs) == 2 and {job["JobID"] for job in result.jobs} <= set(submitted)
    assert result.reason is None
    rest = matcher.request_jobs(runtime, pilot("p2", slots=4), 4, now)
    assert [job["JobID"] for job in rest.jobs] == [j for j in submitted if j not in {x["JobID"] for x in result.jobs}]
    assert rest.reason == matcher.NO_WAITING
    with pytest.raises(InvalidInput, match="count must be from 1 to 2"):
        matcher.request_jobs(runtime, pilot("p3", slots=2), 3, now)


def test_a_batch_of_one_task_queue_is_one_claim_where_the_database_can(runtime, now, monkeypatch):
    submitted = submit(runtime, now, *[HELLO] * 5)
    calls = []
    real = match_db.claim_several
    monkeypatch.setattr(match_db, "claim_several", lambda *a, **kw: calls.append(a[3]) or real(*a, **kw))
    result = matcher.request_jobs(runtime, pilot(slots=4), 4, now)
    # The same jobs, in the order one claim after the other takes them.
    assert [job["JobID"] for job in result.jobs] == submitted[:4] and result.reason is None
    assert calls == ([4] if match_db.claims_in_one_call(runtime.engine) else [])
    assert [status(runtime, j)["Status"] for j in submitted] == ["Matched"] * 4 + ["Waiting"]


def test_a_batch_draws_each_job_as_a_request_of_its_own_would(runtime, now):
    # Two task queues of priorities 1000 and 3000 (a task queue is drawn in
    # proportion to its priority, choice.py): batches of four take about a
    # quarter and three quarters of their jobs from them, as single requests
    # would. Keeping the draw that ended a batch for the next job is what
    # keeps it so; dropping it would favour the task queue drawn first.
    ids = submit(runtime, now, *[HELLO] * 400, *[HELLO.replace("300", "400")] * 400)
    low_ids = set(ids[:400])
    with runtime.engine.begin() as conn:
        tq = dict(conn.execute(select(jobs_table.c.job_id, jobs_table.c.task_queue_id)
                               .where(jobs_table.c.job_id.in_([ids[0], ids[-1]]))).all())
        task_queues_db.set_priorities(conn, {tq[ids[0]]: 1000, tq[ids[-1]]: 3000})
    matcher.forget_waiting_task_queues(runtime)
    rng = random.Random(7)
    taken = []
    for n in range(100):
        batch = [job["JobID"] for job in matcher.request_jobs(runtime, pilot(f"p{n}", slots=4), 4, now, rng).jobs]
        jobs_service.kill_jobs(runtime, ADMIN, batch, now)     # the local queue's 4 slots free again
        taken += batch
    assert len(taken) == 400 == len(set(taken))
    share = sum(1 for j in taken if j in low_ids) / len(taken)
    assert 0.19 < share < 0.31, share


def test_a_batch_whose_later_match_fails_keeps_and_answers_the_jobs_claimed(runtime, now, monkeypatch):
    # A fault injected into the second match of the batch (the database gone,
    # say): the first job is committed and this pilot's, so it is answered.
    # Two task queues of one job each: the batch needs a second match.
    submitted = submit(runtime, now, HELLO, HELLO.replace("300", "400"))
    real, calls = matcher._request_job, []

    def second_fails(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        return real(*args, **kw)

    monkeypatch.setattr(matcher, "_request_job", second_fails)
    result = matcher.request_jobs(runtime, pilot(slots=2), 2, now)
    assert [job["JobID"] for job in result.jobs] == [submitted[0]] or \
        [job["JobID"] for job in result.jobs] == [submitted[1]]
    assert result.reason == matcher.BATCH_STOPPED
    [job] = result.jobs
    assert status(runtime, job["JobID"])["Status"] == "Matched"
    other = next(j for j in submitted if j != job["JobID"])
    assert status(runtime, other)["Status"] == "Waiting"
    # A failure before any claim is the request's own error, as with request_job.
    calls.clear()
    calls.append(1)
    with pytest.raises(RuntimeError):
        matcher.request_jobs(runtime, pilot("p2", slots=2), 2, now)
