"""SubmitPoolRefresher and SubmitPoolCleaner (specs/002), and the in-process
scheduler that runs them, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tests.helpers import ADMIN, ROLAND, as_pilot, patience, run_concurrently, wait_until
from wms.core.match.context import PilotRequest
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services import leases
from wms.services import pools as pools_service
from wms.services.submission import SubmitOptions, submit_jobs
from agents.scheduler import Scheduler

pytestmark = pytest.mark.databases

SOFTWARE = '[ Executable = "/bin/true"; CPUTime = 300; Requirements = [ SoftwareTag = "AppVersion2"; ]; ]'


def run_to_done(runtime, now, job_id):
    request = PilotRequest(site="DIRAC.Local.ch", ce="localhost", queue="default", host="wn1", pilot_id="p1",
                           platform="x86_64-el9", cpu_time_left=100000)
    assert matcher.request_job(runtime, request, now).job["JobID"] == job_id
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Running", "", None, now)
    leases.pilot_status(runtime, as_pilot("p1"), job_id, "p1", "Done", "", 0, now)


def test_a_pool_goes_only_after_its_jobs_and_the_grace(runtime, now):
    [job_id] = submit_jobs(runtime, ROLAND, [("a.jdl", SOFTWARE)], SubmitOptions(), now)
    [pool] = [p["SubmitPool"] for p in pools_service.list_pools(runtime, ADMIN)]
    grace = runtime.config.settings.submit_pool_grace
    # The job still waits: the pool stays whatever the time.
    assert pools_service.clean_submit_pools(runtime, now + timedelta(days=30))["pools_removed"] == 0
    run_to_done(runtime, now, job_id)
    # Done, but within the grace period (a job may come back soon after):
    # the pool stays; its task queue, empty now, goes at once.
    report = pools_service.clean_submit_pools(runtime, now + timedelta(seconds=grace - 1))
    assert report == {"pools_removed": 0, "task_queues_removed": 1, "pilot_rows_removed": 0}
    report = pools_service.clean_submit_pools(runtime, now + timedelta(seconds=grace + 1))
    assert report == {"pools_removed": 1, "task_queues_removed": 0, "pilot_rows_removed": 0}
    assert pools_service.list_pools(runtime, ADMIN) == []
    assert pools_service.submit_pools_for_queue(runtime, "DIRAC.Local.ch", "localhost", "default") == []
    assert pool
    # The finished job keeps its history.
    assert jobs_service.job_status(runtime, ADMIN, [job_id])[0]["Status"] == "Done"


def test_two_cleaners_at_once_do_no_harm(runtime, now):
    [job_id] = submit_jobs(runtime, ROLAND, [("a.jdl", SOFTWARE)], SubmitOptions(), now)
    run_to_done(runtime, now, job_id)
    later = now + timedelta(seconds=runtime.config.settings.submit_pool_grace + 1)
    reports, errors = run_concurrently(lambda i: pools_service.clean_submit_pools(runtime, later), 4)
    assert errors == []
    assert sum(r["pools_removed"] for r in reports) == 1


def test_the_scheduler_runs_each_agent_on_its_period(runtime, now):
    calls: list[tuple[str, float]] = []
    agents = {"fast": lambda rt, when: calls.append(("fast", time.monotonic())),
              "slow": lambda rt, when: calls.append(("slow", time.monotonic()))}
    scheduler = Scheduler(runtime, agents=agents, periods={"fast": 0.05, "slow": 3600})
    scheduler.start()
    try:
        # Polled, not slept: a loaded machine may take a while to give the thread its turns.
        wait_until(lambda: [name for name, _ in calls].count("fast") >= 4, timeout=30,
                   what="the fast agent has run 4 times", details=lambda: str(calls))
    finally:
        scheduler.stop()
        scheduler.join(timeout=patience(10))
    assert not scheduler.is_alive()
    # Both run at start; then only the fast one comes round again, never sooner than its period.
    names = [name for name, _ in calls]
    assert names.count("fast") >= 4 and names.count("slow") == 1, names
    fast = [t for name, t in calls if name == "fast"]
    assert all(b - a >= 0.05 for a, b in zip(fast, fast[1:])), fast


def test_a_failing_agent_does_not_stop_the_others(runtime):
    def broken(rt, when):
        raise RuntimeError("boom")

    scheduler = Scheduler(runtime, agents={"broken": broken, "lease_reaper": lambda rt, when: "ok"},
                          periods={"broken": 1, "lease_reaper": 1})
    assert scheduler.run_once("broken") is None
    assert scheduler.run_once("lease_reaper") == "ok"
    assert scheduler.runs == {"broken": 1, "lease_reaper": 1}


def test_the_default_agents_run_on_a_real_database(runtime, now):
    submit_jobs(runtime, ROLAND, [("a.jdl", SOFTWARE)], SubmitOptions(), now)
    scheduler = Scheduler(runtime)
    assert set(scheduler.agents) == {"submit_pool_refresher", "submit_pool_cleaner", "lease_reaper",
                                     "task_queue_priorities", "reservation_manager", "sandbox_cleaner",
                                     "job_purger"}
    assert scheduler.periods["submit_pool_refresher"] == runtime.config.settings.submit_pool_refresh
    for name in scheduler.agents:
        assert scheduler.run_once(name) is not None
    assert scheduler.last_report["submit_pool_refresher"]["pools"] == 1
    assert scheduler.last_report["lease_reaper"] == {"returned": 0, "stalled": 0}
    assert scheduler.last_report["reservation_manager"] == {"started": [], "ended": [], "error": [], "recovered": [],
                                                            "released": []}


def test_the_site_director_shares_each_job_among_the_queues_that_can_run_it(runtime, now):
    from wms.services.pilots import waiting_jobs_per_queue

    # AppVersion2 and Memory >= 8000 for lhcb: CERN's arm and gpu queues and IN2P3's mc queue.
    job = '[ Executable = "/bin/true"; CPUTime = 300; Requirements = [ SoftwareTag = "AppVersion2"; Memory = 8000; ]; ]'
    submit_jobs(runtime, ROLAND, [(f"j{i}.jdl", job) for i in range(5)], SubmitOptions(), now)
    counts = waiting_jobs_per_queue(runtime)
    places = {name: c for name, c in counts.items() if c["eligible"]}
    assert set(places) == {"LCG.CERN.ch/ce02.cern.ch/arm", "LCG.CERN.ch/gpu01.cern.ch/gpu",
                           "LCG.IN2P3.fr/cccondorce01.in2p3.fr/mc"}
    assert all(c["eligible"] == 5 for c in places.values())
    # 5 jobs over 3 queues: 5/3 each, rounded up to 2, not 5 each.
    assert all(c["waiting"] == 2 for c in places.values())


def test_group_shares_are_split_among_the_groups_task_queues(runtime, now):
    from sqlalchemy import select

    from wms.core.match.choice import weighted_order
    from wms.db.schema import task_queues
    from wms.services.task_queues import recompute_priorities

    # lhcb_user (share 1000): two task queues, 3 and 1 waiting jobs;
    # lhcb_prod (share 4000): one task queue.
    submit_jobs(runtime, ROLAND, [("a.jdl", '[ Executable = "a"; CPUTime = 300; ]')] * 3, SubmitOptions(), now)
    submit_jobs(runtime, ROLAND, [("b.jdl", '[ Executable = "b"; CPUTime = 4000; ]')], SubmitOptions(), now)
    submit_jobs(runtime, ADMIN, [("c.jdl", '[ Executable = "c"; CPUTime = 300; ]')], SubmitOptions(), now)
    assert recompute_priorities(runtime, now)["task_queues"] == 3
    with runtime.engine.connect() as conn:
        rows = conn.execute(select(task_queues.c.owner_group, task_queues.c.cpu_time, task_queues.c.priority)).all()
    by = {(group, cpu): p for group, cpu, p in rows}
    assert by[("lhcb_user", 360)] == 750_000 and by[("lhcb_user", 21600)] == 250_000
    assert by[("lhcb_prod", 360)] == 4_000_000
    # Drawn in proportion: lhcb_prod gets 4/5 of the first choices, as its share says.
    import random
    from collections import Counter

    rng = random.Random(3)
    groups = Counter(weighted_order([g for (g, _), _ in by.items()], list(by.values()), rng)[0] for _ in range(20_000))
    assert abs(groups["lhcb_prod"] / 20_000 - 0.8) < 0.02
    assert recompute_priorities(runtime, now)["changed"] == 0
