"""More pilots than the server can serve (docs/deployment.md, "Backpressure").

A real `wms server` on PostgreSQL or MariaDB that works on at most two
requests at a time (backpressure.max_in_flight: 2); a crowd of idle pilots
asking for work without pause, each waiting out the Retry-After it gets; and
real pilots (wms-pilot processes) with jobs to run in the middle of it.
The server refuses quickly with 429 and Retry-After, never answers 5xx, and
the pilots, told to come back later, finish every job.

Whether a crowd happens to fill the server at the moment a pilot asks is
chance, the more so on a loaded machine; so the test first fills it for
certain: it locks the tokens table and sends four requests (twice the bound:
every path refused) with tokens the server has not read yet, which wait for
the lock while the server reads their tokens, in progress. A request whose
body is held back would not do: it holds no place while the server waits
for its body (tests/api/test_holding_the_door.py). The test lets the pilots
meet the refusal, then lifts the lock and lets the crowd alone keep the
server busy.
"""

from __future__ import annotations

import asyncio
import random
import json
import re
import socket
import statistics
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.api.pilots import LockedTokens, pilot_tokens, start_pilot, user_tokens
from tests.api.scraping import scrape
from tests.helpers import log_tails, patience, wait_until
from tests.pilot.conftest import LOCAL, USERS, jdl, pilot_config, submit
from tests.servers import Tokens, running_server
from wms.api.backpressure import OTHERS_HEADROOM, Backpressure, Window, retry_after
from wms.config.models import BackpressureSettings

pytestmark = pytest.mark.databases

CROWD = 8            # idle pilots asking without pause
PILOTS = 4           # real pilots with jobs to run
JOBS = 8
MAX_IN_FLIGHT = 2
RETRY_AFTER_MAX = 3
REQUEST_JOB = "/api/v1/matcher/request-job"
BUSY = re.compile(r"server busy: (?P<busy>\d+) requests in progress in this process "
                  r"\(backpressure\.max_in_flight\); retry after (?P<wait>\d+) s")


def busy_config(tmp: Path) -> Path:
    config = pilot_config(tmp)
    settings = yaml.safe_load((config / "wms.yaml").read_text()) or {}
    # A crowd held out is told the longest wait (it would come back faster
    # than a twentieth of what this process answers): a short one, for a short test.
    # The crowd shares one token: its share is the whole, so that what it meets is the bound.
    settings["backpressure"] = {"max_in_flight": MAX_IN_FLIGHT, "retry_after": 1, "retry_after_max": RETRY_AFTER_MAX,
                                "identity_share": 1.0}
    # The held requests wait for a lock as long as the test holds it.
    settings["limits"] = {**settings.get("limits", {}), "statement_timeout": 0}
    (config / "wms.yaml").write_text(yaml.safe_dump(settings))
    return config


def idle_request(pilot_id: str) -> dict:
    """A request for a job of a pool that has none: the Matcher answers no match."""
    site, ce, queue = LOCAL
    return {"site": site, "ce": ce, "queue": queue, "host": pilot_id, "pilot_id": pilot_id,
            "pools": ["no-such-pool"], "slots": 1}


class Crowd:
    """Idle pilots (threads) asking for jobs of a pool that has none, as fast
    as they are answered; a refused one waits what Retry-After says."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers: list[int] = []                           # statuses other than 429
        self.refusals: list[tuple[float, str | None]] = []     # (seconds to the answer, Retry-After)
        self.details: set[str] = set()                          # what the refusals said
        self.threads = [threading.Thread(target=self.ask, args=(k,), daemon=True) for k in range(CROWD)]

    def ask(self, k: int) -> None:
        body = idle_request(f"idle-{k}")
        rng = random.Random(k)
        with httpx.Client(base_url=self.url + "/api/v1", headers={"Authorization": f"Bearer {self.token}"},
                          timeout=patience(60)) as client:
            while not self.stop.is_set():
                started = time.monotonic()
                answer = client.post("/matcher/request-job", json=body)
                took = time.monotonic() - started
                with self.lock:
                    if answer.status_code == 429:
                        self.refusals.append((took, answer.headers.get("retry-after")))
                        self.details.add(answer.json()["detail"])
                    else:
                        self.answers.append(answer.status_code)
                if answer.status_code == 429:
                    self.stop.wait(float(answer.headers.get("retry-after", "1")) * (1 + rng.random() / 2))

    def __enter__(self) -> "Crowd":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=patience(60))


class HeldRequest:
    """A request sent whole with a token the server has not read: in progress
    on the server, and so counted against max_in_flight, while the tokens table
    is locked (:class:`LockedTokens`). With a ``pilot_id``, a pilot's request
    for a job; without, a user's list of jobs (a path of twice the bound)."""

    def __init__(self, url: str, token: str, pilot_id: str | None) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=patience(120))
        if pilot_id is None:
            request = f"GET /api/v1/jobs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
            self.sock.sendall(request.encode())
            return
        body = json.dumps(idle_request(pilot_id)).encode()
        head = (f"POST {REQUEST_JOB} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        self.sock.sendall(head.encode() + body)

    def answer(self) -> bytes:
        """The answer's status line."""
        with self.sock:
            return self.sock.makefile("rb").readline()


@pytest.mark.parametrize("away, answered, wait", [
    (0, 0, 1),          # the first refusal: the least wait
    (40, 400, 2),       # 40 away, back at no more than 20 (a twentieth of 400) a second: 2 s
    (41, 400, 3),
    (4000, 400, 30),    # the longest wait
    (10, 0, 4),         # nothing answered yet: taken as 64 (max_in_flight) a second, 3.2 back a second
    (100000, 300, 30),
])
def test_the_wait_grows_with_the_crowd(away, answered, wait):
    settings = BackpressureSettings(max_in_flight=64, retry_after=1, retry_after_max=30)
    assert retry_after(settings, away, answered) == wait


def test_the_refused_come_back_at_a_twentieth_of_the_answers():
    """A steady crowd: 900 pilots kept out of a process answering 400 a second,
    each waiting what it was told. Whatever the first waits, they settle where
    the returns are a twentieth of the answers (20 a second, 45 s away each:
    past the longest wait, so 30 s and 30 a second)."""
    settings = BackpressureSettings(max_in_flight=16, retry_after=5, retry_after_max=30)
    for first in (5, 30):
        wait = first
        for _ in range(5):
            refused_a_second = 900 / wait                # Little's law: 900 away, each for `wait`
            wait = retry_after(settings, refused_a_second * wait, 400)
        assert wait == 30
    # 300 kept out: back at 20 a second needs 15 s.
    wait = 5
    for _ in range(5):
        wait = retry_after(settings, 300 / wait * wait, 400)
    assert wait == 15


def test_the_counts_are_of_the_last_second():
    window = Window()
    window.roll(100.0)
    window.told, window.answered = 7, 3
    window.roll(100.5)                                   # the same second
    assert (window.told, window.away()) == (7, 7)
    window.roll(101.2)                                   # the next one: the last second's waits kept
    assert (window.told, window.answered, window.last_told, window.most_answered) == (0, 0, 7, 3)
    window.told, window.answered = 2, 1
    assert window.away() == 7
    window.roll(105.0)                                   # none refused for seconds: forgotten
    assert (window.told, window.away(), window.most_answered) == (0, 0, 3)   # the most answered stays


def test_new_work_is_refused_first_and_nothing_stays_counted():
    """A bound of one: a second request for a job is refused; a job's report
    still gets in, up to twice the bound; when all end, nothing is in progress."""

    async def scenario() -> None:
        release = asyncio.Event()

        async def held(scope, receive, send) -> None:           # a route busy until released
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        guard = Backpressure(held, BackpressureSettings(max_in_flight=1, retry_after=1))

        callers = iter(range(100))

        async def call(path: str) -> tuple[int, dict[bytes, bytes]]:
            sent: list[dict] = []
            token = b"Bearer pilot-%d" % next(callers)     # each a pilot of its own

            async def receive() -> dict:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: dict) -> None:
                sent.append(message)

            await guard({"type": "http", "path": path, "method": "POST", "headers": [(b"authorization", token)]},
                        receive, send)
            return sent[0]["status"], dict(sent[0]["headers"])

        first = asyncio.create_task(call(REQUEST_JOB))
        await asyncio.sleep(0)
        status, headers = await call(REQUEST_JOB)
        assert (status, headers[b"retry-after"]) == (429, b"1")          # new work: refused at the bound
        report = asyncio.create_task(call("/api/v1/jobs/1/pilot-status"))
        await asyncio.sleep(0)
        assert guard.in_flight == 2                                      # a report still gets in
        status, headers = await call("/api/v1/jobs/1/heartbeat")
        # past twice the bound; one away for 1 s, back at no more than a
        # twentieth of 1 (max_in_flight) a second: 20 s
        assert (status, headers[b"retry-after"]) == (429, b"20")
        release.set()
        assert [(await first)[0], (await report)[0]] == [200, 200]
        assert guard.in_flight == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_saturated_server_refuses_quickly_and_pilots_still_finish(backend, database_factory, tmp_path):
    database_url = database_factory(backend)
    with running_server(tmp_path, busy_config(tmp_path), tokens=USERS, database_url=database_url) as server:
        tokens = Tokens(server)
        holders = [f"held-{k}" for k in range(MAX_IN_FLIGHT)]
        tokens_of = pilot_tokens(database_url, [f"busy-{i}" for i in range(PILOTS)] + holders)
        users = user_tokens(database_url, (OTHERS_HEADROOM - 1) * MAX_IN_FLIGHT)
        jobs = submit(server, tokens, tmp_path, *[jdl("true")] * JOBS)
        pilots: list[tuple[subprocess.Popen, Path]] = []
        lock = LockedTokens(database_url)
        held: list[HeldRequest] = []
        try:
            # Requests for jobs up to the bound, then others up to twice the
            # bound: every path refused. (The scrape is one of the requests in progress.)
            held += [HeldRequest(server.url, tokens_of[h], h) for h in holders]
            wait_until(lambda: scrape(server.url).value("wms_http_requests_in_flight") > len(held),
                       timeout=60, what="the held requests for jobs in progress")
            held += [HeldRequest(server.url, token, None) for token in users]
            wait_until(lambda: scrape(server.url).value("wms_http_requests_in_flight") > len(held),
                       timeout=60, what="all the held requests in progress")
            with Crowd(server.url, tokens["admin"]) as crowd:
                wait_until(lambda: crowd.refusals, timeout=60, what="the crowd refused")
                pilots = [start_pilot(server, tokens_of[f"busy-{i}"], tmp_path, f"busy-{i}", max_empty=3)
                          for i in range(PILOTS)]
                wait_until(lambda: any("server busy (HTTP 429)" in log.read_text() for _, log in pilots),
                           timeout=60, what="a pilot told to come back later",
                           details=lambda: log_tails([log for _, log in pilots]))
                lock.unlock()
                assert [h.answer().split()[1] for h in held] == [b"200"] * len(held)
                wait_until(lambda: all(p.poll() is not None for p, _ in pilots), timeout=240,
                           what="every pilot done", every=0.5, details=lambda: log_tails([log for _, log in pilots]))
        finally:
            lock.unlock()
            for request in held:
                request.sock.close()
            for process, _ in pilots:
                if process.poll() is None:
                    process.kill()
                    process.wait()

        assert [p.returncode for p, _ in pilots] == [0] * PILOTS, log_tails([log for _, log in pilots])
        with server.api(tokens["roland"]) as api:
            states = [api.get(f"/jobs/{j}").raise_for_status().json()["Status"] for j in jobs]
        assert states == ["Done"] * JOBS
        # The pilots were told to wait, and did: the refusals were theirs too.
        told = [log for _, log in pilots if "server busy (HTTP 429)" in log.read_text()]
        assert told, log_tails([log for _, log in pilots])

        # Every refusal came at once with its Retry-After; nothing else failed.
        assert crowd.refusals
        waits = {int(after or 0) for _, after in crowd.refusals}
        assert min(waits) >= 1 and max(waits) == RETRY_AFTER_MAX, waits
        # A request for a job is refused at the bound, and the reports of
        # running jobs may take the process up to twice the bound meanwhile.
        said = [BUSY.fullmatch(detail) for detail in crowd.details]
        assert all(said), crowd.details
        assert {int(m["busy"]) for m in said} <= set(range(MAX_IN_FLIGHT, 2 * MAX_IN_FLIGHT + 1))
        assert {int(m["wait"]) for m in said} == waits
        assert statistics.median(took for took, _ in crowd.refusals) < patience(0.5)
        assert set(crowd.answers) <= {200}, sorted(set(crowd.answers))

        found = scrape(server.url)
        assert found.value("wms_http_requests_total", route=REQUEST_JOB, status="429") > 0
        errors = {s for s in found.labels("wms_http_requests_total", "status") if s.startswith("5")}
        assert errors == set()
