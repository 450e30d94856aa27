"""POST /api/v1/matcher/request-jobs on a real `wms server` (SQLite,
PostgreSQL and MariaDB): a multi-slot pilot gets up to ``count`` jobs in one call, each
claimed as request-job claims one, the free slots shrinking job by job;
several pilots asking at once never get the same job; a real `wms-pilot`
with several slots runs its jobs through it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.api.pilots import pilot_tokens
from tests.api.scraping import scrape
from tests.helpers import CONFIG_DIR, REPO, patience
from tests.pilot.conftest import LOCAL, USERS, jdl
from tests.servers import ServerHandle, running_server

pytestmark = pytest.mark.databases

SITE, CE, QUEUE = LOCAL
SINGLE = jdl("true")
TRIPLE = jdl("true", "NumberOfProcessors = 3;")
BATCH_ROUTE = "/api/v1/matcher/request-jobs"


def batch_config(tmp: Path) -> Path:
    """config/ whose local queue offers 4 processors and 100 queue slots."""
    config = tmp / "config-source"
    shutil.copytree(CONFIG_DIR, config)
    resources = config / "resources.yaml"
    data = yaml.safe_load(resources.read_text())
    queue = data["Sites"][SITE]["CEs"][CE]["Queues"][QUEUE]
    queue["NumberOfProcessors"] = 4
    queue["complex_values"]["slots"] = 100
    resources.write_text(yaml.safe_dump(data))
    return config


class Batch:
    """The module's server and database, and clients of its users and pilots."""

    def __init__(self, server: ServerHandle, database_url: str) -> None:
        self.server = server
        self.database_url = database_url
        self.roland = server.api(server.issued["roland"])
        self.admin = server.api(server.issued["admin"])
        self._pilots: dict[str, httpx.Client] = {}

    def pilot(self, pilot_id: str) -> httpx.Client:
        if pilot_id not in self._pilots:
            [token] = pilot_tokens(self.database_url, [pilot_id]).values()
            self._pilots[pilot_id] = self.server.api(token)
        return self._pilots[pilot_id]

    def submit(self, *texts: str) -> list[int]:
        body = {"jdls": [{"source": f"j{i}.jdl", "text": text} for i, text in enumerate(texts)]}
        return self.roland.post("/jobs", json=body).raise_for_status().json()["job_ids"]

    def ask(self, pilot_id: str, slots: int, count: int, **extra: Any) -> httpx.Response:
        body = {"site": SITE, "ce": CE, "queue": QUEUE, "host": "wn01", "pilot_id": pilot_id,
                "platform": "x86_64-el9", "cpu_time_left": 100000, "slots": slots, "count": count, **extra}
        return self.pilot(pilot_id).post("/matcher/request-jobs", json=body)

    def jobs(self, pilot_id: str, slots: int, count: int) -> dict[str, Any]:
        return self.ask(pilot_id, slots, count).raise_for_status().json()

    def kill_unfinished(self) -> None:
        rows = self.admin.get("/jobs").raise_for_status().json()
        left = [r["JobID"] for r in rows if r["Status"] in ("Received", "Checking", "Waiting", "Matched", "Running")]
        if left:
            self.admin.post("/jobs/kill", json={"job_ids": left}).raise_for_status()

    def close(self) -> None:
        for client in (self.roland, self.admin, *self._pilots.values()):
            client.close()


@pytest.fixture(scope="module", params=("sqlite", "postgresql", "mariadb"))
def module_batch(request, tmp_path_factory, database_factory) -> Iterator[Batch]:
    tmp = tmp_path_factory.mktemp(f"batch-{request.param}")
    url = database_factory(request.param)
    with running_server(tmp / "server", config_dir=batch_config(tmp), tokens=USERS, database_url=url) as server:
        batch = Batch(server, url)
        try:
            yield batch
        finally:
            batch.close()


@pytest.fixture
def batch(module_batch) -> Iterator[Batch]:
    """The module's server; the jobs a test leaves unfinished are killed after it."""
    yield module_batch
    module_batch.kill_unfinished()


def test_a_four_slot_pilot_gets_four_distinct_jobs_of_six(batch):
    submitted = batch.submit(*[SINGLE] * 6)
    answer = batch.jobs("four-of-six", slots=4, count=4)
    ids = [job["JobID"] for job in answer["jobs"]]
    assert len(ids) == len(set(ids)) == 4 and set(ids) <= set(submitted)
    assert answer["reason"] is None
    for job in answer["jobs"]:                     # each exactly what request-job hands out
        assert set(job) == {"JobID", "Attempt", "JDL", "Executable", "Arguments", "Slots", "Lease", "RunLease",
                            "Limits", "Environment", "JobToken", "StdOutput", "StdError"}
        assert job["Slots"] == 1 and job["Attempt"] == 1
        row = batch.roland.get(f"/jobs/{job['JobID']}").raise_for_status().json()
        assert (row["Status"], row["MinorStatus"]) == ("Matched", "Assigned to pilot four-of-six (attempt 1)")
    left = [j for j in submitted if j not in ids]
    assert {batch.roland.get(f"/jobs/{j}").json()["Status"] for j in left} == {"Waiting"}


def test_fewer_waiting_jobs_than_slots_gives_those_and_the_no_match_reason(batch):
    submitted = batch.submit(SINGLE, SINGLE)
    answer = batch.jobs("two-of-four", slots=4, count=4)
    assert sorted(job["JobID"] for job in answer["jobs"]) == sorted(submitted)
    assert answer["reason"] == "no waiting job for the pools this queue serves"
    # Nothing is left: the next call answers the reason alone, as request-job would.
    assert batch.jobs("two-of-four", slots=4, count=4) == {"jobs": [], "reason": answer["reason"]}


def test_a_job_needing_more_slots_than_the_batch_left_is_not_handed_out(batch):
    # The draw among task queues is random: ask until the two one-slot jobs
    # come first, then the 3-slot job, offered the 2 slots they left, must stay.
    seen = False
    for round_ in range(30):
        singles = batch.submit(SINGLE, SINGLE)
        [triple] = batch.submit(TRIPLE)
        answer = batch.jobs(f"slots-left-{round_}", slots=4, count=4)
        got = [(job["JobID"], job["Slots"]) for job in answer["jobs"]]
        assert sum(slots for _, slots in got) <= 4, got
        if [job_id for job_id, _ in got[:2]] and all(job_id in singles for job_id, _ in got[:2]) and len(got) >= 2:
            assert [job_id for job_id, _ in got] == [job_id for job_id, _ in got[:2]], got
            assert batch.roland.get(f"/jobs/{triple}").json()["Status"] == "Waiting"
            assert "slots" in answer["reason"], answer["reason"]
            seen = True
        batch.kill_unfinished()
        if seen:
            break
    assert seen, "the two one-slot jobs never came first in 30 draws"


@pytest.mark.parametrize(("slots", "count", "detail"), [
    (2, 3, "count: 3 jobs asked for with 2 free slot(s): count may not exceed slots"),
    (100, 65, "count: Input should be less than or equal to 64"),
    (4, 0, "count: Input should be greater than or equal to 1"),
])
def test_a_count_over_the_slots_or_over_64_is_refused(batch, slots, count, detail):
    [job] = batch.submit(SINGLE)
    response = batch.ask("refused", slots=slots, count=count)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == detail
    assert response.json()["errors"][0]["loc"] == ["body", "count"]
    assert batch.roland.get(f"/jobs/{job}").json()["Status"] == "Waiting"    # nothing handed out


def test_the_pilot_binding_and_validation_are_request_jobs(batch):
    batch.submit(SINGLE)
    response = batch.ask("bound-pilot", slots=2, count=2, queue="no-such-queue")
    assert response.status_code == 400 and "unknown queue" in response.json()["detail"]
    assert batch.jobs("bound-pilot", slots=1, count=1)["jobs"]
    # The token is now bound to bound-pilot: it cannot speak for another.
    other = {"site": SITE, "ce": CE, "queue": QUEUE, "host": "wn01", "pilot_id": "someone-else", "slots": 1}
    refused = batch.pilot("bound-pilot").post("/matcher/request-jobs", json=other)
    assert refused.status_code == 403, refused.text


def test_pilots_asking_at_once_never_get_the_same_job(batch):
    jobs = 60
    submitted = set(batch.submit(*[SINGLE] * jobs))
    names = [f"crowd-{i}" for i in range(6)]
    for name in names:
        batch.pilot(name)                         # tokens made before the crowd starts

    def drain(name: str) -> list[int]:
        got: list[int] = []
        while True:
            answer = batch.jobs(name, slots=4, count=4)
            got += [job["JobID"] for job in answer["jobs"]]
            if not answer["jobs"]:
                return got

    with ThreadPoolExecutor(len(names)) as pool:
        per_pilot = list(pool.map(drain, names))
    handed = [job_id for got in per_pilot for job_id in got]
    assert len(handed) == len(set(handed)) == jobs and set(handed) == submitted
    assert sum(1 for got in per_pilot if got) >= 2, per_pilot
    for job_id in list(submitted)[:10]:
        history = batch.admin.get(f"/jobs/{job_id}/history").raise_for_status().json()
        assert [h["Status"] for h in history].count("Matched") == 1


def test_a_multi_slot_pilot_runs_its_jobs_through_the_batched_route(batch, tmp_path):
    submitted = batch.submit(*[jdl("sleep 0.2")] * 4)
    before = scrape(batch.server.url).value("wms_http_requests_total", route=BATCH_ROUTE, status="200")
    [token] = pilot_tokens(batch.database_url, ["multi-slot"]).values()
    command = [sys.executable, "-m", "pilot.main", "--url", batch.server.url, "--site", SITE, "--ce", CE,
               "--queue", QUEUE, "--workdir", str(tmp_path / "work"), "--poll", "0.2", "--heartbeat", "5",
               "--max-empty", "2", "--min-time-left", "0", "--slots", "4", "--pilot-id", "multi-slot",
               "--platform", "x86_64-el9"]
    proc = subprocess.run(command, env={**os.environ, "WMS_PILOT_TOKEN": token}, cwd=REPO, capture_output=True,
                          text=True, timeout=patience(180))
    assert proc.returncode == 0, proc.stderr
    assert {batch.roland.get(f"/jobs/{j}").json()["Status"] for j in submitted} == {"Done"}, proc.stderr
    batched = scrape(batch.server.url).value("wms_http_requests_total", route=BATCH_ROUTE, status="200")
    assert batched - before >= 1, proc.stderr
