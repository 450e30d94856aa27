"""Two `wms server` processes on one PostgreSQL or MariaDB database, real
pilots spread over both (docs/deployment.md, "Several servers").

The servers share nothing but the database: each has its own caches, pool
and Matcher. Every job runs once, and at no moment do more jobs run than the
queue has slots (4) nor more licensed jobs than it has licences (2): the
jobs themselves write when they start and end, and those intervals are
counted. Both servers handed out jobs, and every consumable is back at the
end.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.api.pilots import pilot_tokens, start_pilot
from tests.api.scraping import scrape
from tests.helpers import log_tails, wait_until
from tests.pilot.conftest import USERS, jdl, pilot_config, submit
from tests.servers import ServerHandle, Tokens, free_port, running_server
from wms.db import matching as match_db
from wms.db.engine import make_engine

pytestmark = pytest.mark.databases

PILOTS_PER_SERVER = 3
JOBS = 16                     # half of them take a compiler licence
SLOTS, LICENCES = 4, 2        # the local queue's complex_values (config/resources.yaml)


def job_script(record: Path) -> str:
    """Writes "<job> start|end <time>" lines to ``record`` around half a second of work."""
    return (f"echo $WMS_JOB_ID start $(date +%s.%N) >> {record}; sleep 0.5; "
            f"echo $WMS_JOB_ID end $(date +%s.%N) >> {record}")


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals open at one moment."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_two_servers_on_one_database_never_share_a_job_nor_overbook(backend, database_factory, tmp_path):
    database_url = database_factory(backend)
    record = tmp_path / "intervals.txt"
    with running_server(tmp_path, pilot_config(tmp_path), tokens=USERS, database_url=database_url) as first:
        (tmp_path / "second").mkdir()
        second_url = f"http://127.0.0.1:{free_port()}"
        second = ServerHandle(tmp_path / "second", first.config, second_url, {**first.env, "WMS_URL": second_url})
        second.start()
        pilots: list[tuple[subprocess.Popen, Path]] = []
        try:
            tokens = Tokens(first)
            names = [f"{server}-{i}" for server in ("first", "second") for i in range(PILOTS_PER_SERVER)]
            tokens_of = pilot_tokens(database_url, names)
            licensed = jdl(job_script(record), "ResourceRequests = [ compiler_lic = 1; ];")
            jobs = submit(first, tokens, tmp_path, *[licensed, jdl(job_script(record))] * (JOBS // 2))
            # The jobs write their intervals to one file of the test's: unisolated.
            pilots = [start_pilot(first if name.startswith("first") else second, tokens_of[name], tmp_path, name,
                                  1000, "--isolation", "none") for name in names]

            def all_done() -> bool:
                with first.api(tokens["roland"]) as api:
                    rows = api.get("/jobs").raise_for_status().json()
                return sum(1 for row in rows if row["JobID"] in jobs and row["Status"] == "Done") == JOBS

            wait_until(all_done, timeout=240, what="every job Done", every=0.5,
                       details=lambda: log_tails([first.log, second.log, *[log for _, log in pilots]]))
            handed_out = {name: scrape(server.url).value("wms_match_requests_total", outcome="matched")
                          for name, server in (("first", first), ("second", second))}
        finally:
            for process, _ in pilots:
                process.terminate()
            for process, _ in pilots:
                process.wait(timeout=60)
            second.stop()

        with first.api(tokens["roland"]) as api:
            matched = {j: [h["Status"] for h in api.get(f"/jobs/{j}/history").raise_for_status().json()].count(
                "Matched") for j in jobs}
        assert matched == dict.fromkeys(jobs, 1)                     # no job handed out twice
        assert handed_out["first"] > 0 and handed_out["second"] > 0, handed_out
        assert handed_out["first"] + handed_out["second"] == JOBS

        lines = [line.split() for line in record.read_text().splitlines()]
        starts = {int(j): float(t) for j, what, t in lines if what == "start"}
        ends = {int(j): float(t) for j, what, t in lines if what == "end"}
        assert sorted(starts) == sorted(ends) == sorted(jobs)
        assert len(lines) == 2 * JOBS                                # each job ran once
        intervals = {j: (starts[j], ends[j]) for j in jobs}
        with_licence = [intervals[j] for j in jobs[::2]]
        assert 2 <= most_at_once(list(intervals.values())) <= SLOTS
        assert most_at_once(with_licence) <= LICENCES

        engine = make_engine(database_url)
        try:
            with engine.connect() as conn:
                usage = match_db.all_usage(conn)
        finally:
            engine.dispose()
        assert {key: used for key, used in usage.items() if used} == {}   # every slot and licence given back
