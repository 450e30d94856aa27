"""Many Matcher processes against one database: no job is handed out twice
and no consumable is overbooked (each process has its own engine, caches
and connections, as several `wms server` processes do)."""

from __future__ import annotations

import multiprocessing
from datetime import datetime, timezone

import pytest

from tests.helpers import ROLAND, default_config
from wms.db import matching as match_db
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

PROCESSES = 6
REQUESTS = 8


def matcher_process(url: str, index: int, results) -> None:
    from wms.core.match.context import PilotRequest
    from wms.db.engine import make_engine
    from wms.services.matcher import request_job
    from wms.services.runtime import Runtime

    engine = make_engine(url, pool_size=2)
    runtime = Runtime.create(default_config(), engine)
    got = []
    for k in range(REQUESTS):
        request = PilotRequest(site="DIRAC.Local.ch", ce="localhost", queue="default", host=f"wn{index}",
                               pilot_id=f"proc{index}-{k}", platform="x86_64-el9", cpu_time_left=100000,
                               load={"arch": "lx-amd64"})
        result = request_job(runtime, request, datetime.now(timezone.utc))
        if result.job is not None:
            got.append(result.job["JobID"])
    engine.dispose()
    results.put(got)


def test_parallel_matchers_never_share_a_job_nor_overbook(runtime, now, db_url):
    licensed = '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ compiler_lic = 1; ]; ]'
    plain = '[ Executable = "/bin/true"; CPUTime = 300; ]'
    submit_jobs(runtime, ROLAND, [(f"j{i}.jdl", licensed if i % 2 else plain) for i in range(40)],
                SubmitOptions(), now)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=matcher_process, args=(db_url, i, results)) for i in range(PROCESSES)]
    for p in processes:
        p.start()
    handed_out = [job for _ in processes for job in results.get(timeout=120)]
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(handed_out) == len(set(handed_out))
    # The local queue grants 4 slots and 2 compiler licences in all.
    assert len(handed_out) == 4
    with runtime.engine.connect() as conn:
        usage = match_db.all_usage(conn)
    assert usage[("queue:DIRAC.Local.ch/localhost/default", "slots")] == 4.0
    assert usage.get(("queue:DIRAC.Local.ch/localhost/default", "compiler_lic"), 0.0) <= 2.0
    assert usage.get(("global", "compiler_lic"), 0.0) == usage.get(
        ("queue:DIRAC.Local.ch/localhost/default", "compiler_lic"), 0.0)
