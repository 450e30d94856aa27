"""One user's 48,000 jobs against a real `wms server`: `GET /jobs` answers a
page, not the whole 16.8 MB list; eight readers going through every page at
once leave the server's memory about where it was; `wms jobs` prints all of
them, fetching the pages as it prints."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx

from tests.helpers import patience
from tests.servers import running_server
from wms.core.paging import DEFAULT_PAGE_SIZE

JOBS = 48_000
PER_SUBMISSION = 9_600   # under max_jobs_per_submission (10,000)
READERS = 8
ROLAND = ("roland", "lhcb_user", "lhcb", "user")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def read_every_page(api: httpx.Client) -> int:
    rows, params = 0, {}
    while True:
        response = api.get("/jobs", params=params)
        assert response.status_code == 200, response.text
        rows += len(response.json())
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            return rows
        params = {"cursor": cursor}


def test_48000_jobs_are_listed_a_page_at_a_time_in_bounded_memory(tmp_path):
    text = '[ Executable = "/bin/true"; JobName = "many"; Parameters = %d; ]' % PER_SUBMISSION
    with running_server(tmp_path, tokens={"roland": ROLAND}) as server:
        token = server.issued["roland"]
        with server.api(token) as api:
            for _ in range(JOBS // PER_SUBMISSION):
                response = api.post("/jobs", json={"jdls": [{"source": "many.jdl", "text": text}]},
                                    timeout=patience(300))
                assert response.status_code == 201, response.text

            first = api.get("/jobs")
            assert len(first.json()) == DEFAULT_PAGE_SIZE
            assert len(first.content) < 1_000_000      # a page, not the 16.8 MB of every job
            assert "X-Next-Cursor" in first.headers

        assert server.process is not None
        pid = server.process.pid
        before = rss_mib(pid)
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss_mib(pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        counts: list[int] = []

        def reader() -> None:
            with server.api(token) as api:
                counts.append(read_every_page(api))

        readers = [threading.Thread(target=reader) for _ in range(READERS)]
        for thread in readers:
            thread.start()
        for thread in readers:
            thread.join(timeout=patience(600))
        done.set()
        sampler.join()
        assert counts == [JOBS] * READERS
        # Unpaged, eight such readers took the server from 276 to 1,193 MiB.
        assert peak[0] - before < 150, f"server grew from {before:.0f} to {peak[0]:.0f} MiB"

        listed = server.wms("jobs", "--json", token=token, timeout=600)
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        assert [row["JobID"] for row in rows] == sorted(row["JobID"] for row in rows)
        assert len(rows) == JOBS and len({row["JobID"] for row in rows}) == JOBS

        table = server.ok("jobs", "--status", "Waiting", "--limit", "2500", token=token, timeout=600)
        assert len(table.splitlines()) == 2 + 2500     # header, rule, and 2,500 jobs across three pages
