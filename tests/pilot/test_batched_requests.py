"""The pilot's batched job request against a small real HTTP server: a busy
answer (429 with Retry-After) is waited out and asked again, and a server
without POST /matcher/request-jobs (404: older than the route) makes the
pilot ask request-job, one job at a time, from then on; a server that
takes no output with a job's status (422 for the field) gets the output,
then the status, as two calls. And the slots' job reports (pilot/reports.py):
those made while a call is on its way go together in the next, each
answered or refused on its own; a server without POST /jobs/pilot-status
gets one call per report."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from pilot.client import ApiError, Client, ClientError, JobLost, NetworkError
from pilot.reports import MAX_BYTES, Reports
from tests.helpers import send_json, small_http_server
from pilot.main import Pilot, Settings

JOB = {"JobID": 7, "Attempt": 1, "JDL": "[]", "Executable": "/bin/true", "Arguments": "", "Slots": 1, "Lease": 60,
       "Limits": {}, "Environment": {"WMS_JOB_ID": "7"}}


class Script:
    """What the server answers, by path: a list of (status, headers, body) used in turn (the last one repeats)."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, dict[str, str], dict]]] = {}
        self.seen: list[tuple[str, dict]] = []
        # By path: what to answer, from the body (instead of ``answers``).
        self.compute: dict[str, Callable[[dict], tuple[int, dict[str, str], dict]]] = {}


@pytest.fixture
def fake_server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.seen.append((self.path, body))
            if self.path in script.compute:
                status, headers, answer = script.compute[self.path](body)
                send_json(self, status, answer, headers)
                return
            queue = script.answers.get(self.path) or [(404, {}, {"detail": f"no such path: {self.path}"})]
            status, headers, answer = queue.pop(0) if len(queue) > 1 else queue[0]
            send_json(self, status, answer, headers)

        def log_message(self, *args: object) -> None:
            pass

    with small_http_server(Handler) as url:
        yield url, script

def settings(url: str, slots: int) -> Settings:
    return Settings(url=url, token="t", site="S", ce="C", queue="Q", pools=[], slots=slots, pilot_id="p1",
                    max_empty=1, poll=0.1, heartbeat=5, workdir=None, output_limit=1000, lifetime=600,
                    cpu_time_left=600, min_time_left=0, grace=1, leave_jobs_on_term=False, tags=[],
                    platform="x86_64-el9", http_timeout=5, retries=0, log_level="info")


def test_a_busy_answer_to_request_jobs_is_waited_out_then_asked_again(fake_server):
    url, script = fake_server
    script.answers["/api/v1/matcher/request-jobs"] = [
        (429, {"Retry-After": "2"}, {"detail": "server busy"}),
        (200, {}, {"jobs": [JOB, {**JOB, "JobID": 8}], "reason": None}),
    ]
    waits: list[float] = []
    client = Client(url, "t", retries=0, sleep=waits.append)
    answer = client.request_jobs({"pilot_id": "p1", "slots": 2}, 2)
    assert [job["JobID"] for job in answer["jobs"]] == [7, 8]
    assert len(waits) == 1 and 2.0 <= waits[0] <= 3.0          # Retry-After, plus up to half as jitter
    assert [body["count"] for _, body in script.seen] == [2, 2]


def test_a_server_without_request_jobs_gets_request_job_from_then_on(fake_server, tmp_path: Path):
    url, script = fake_server
    script.answers["/api/v1/matcher/request-job"] = [(200, {}, {"match": True, "job": JOB})]
    pilot = Pilot(settings(url, 3), Client(url, "t", retries=0), tmp_path)
    assert pilot.ask(3, 3) == [JOB]
    assert pilot.ask(3, 3) == [JOB]
    assert [path for path, _ in script.seen] == ["/api/v1/matcher/request-jobs", "/api/v1/matcher/request-job",
                                                 "/api/v1/matcher/request-job"]
    assert all("count" not in body for path, body in script.seen if path.endswith("request-job"))


def test_one_free_slot_asks_request_job_and_a_batch_leaves_jobs_for_the_other_workers(fake_server, tmp_path):
    url, script = fake_server
    script.answers["/api/v1/matcher/request-job"] = [(200, {}, {"match": True, "job": JOB})]
    script.answers["/api/v1/matcher/request-jobs"] = [
        (200, {}, {"jobs": [JOB, {**JOB, "JobID": 8, "Slots": 2}], "reason": None})]
    pilot = Pilot(settings(url, 3), Client(url, "t", retries=0), tmp_path)
    first = pilot.take_job()
    assert first is not False and first is not None and first[0].job_id == 7
    assert pilot.free == 0 and [spec.job_id for spec, _ in pilot.pending] == [8]
    second = pilot.take_job()                   # another worker: the job left for it, no request
    assert second is not False and second is not None and (second[0].job_id, second[1]) == (8, 2)
    assert [path for path, _ in script.seen] == ["/api/v1/matcher/request-jobs"]
    assert script.seen[0][1]["count"] == 3 and script.seen[0][1]["slots"] == 3
    pilot.give_back(1)
    pilot.take_job()                            # one slot free: request-job
    assert [path for path, _ in script.seen][-1] == "/api/v1/matcher/request-job"


def test_a_server_that_takes_no_output_with_the_status_gets_two_calls_output_first(fake_server):
    url, script = fake_server
    script.answers["/api/v1/jobs/7/pilot-status"] = [
        (422, {}, {"detail": "output: Extra inputs are not permitted"}),
        (200, {}, {"JobID": 7, "Status": "Done"}),
    ]
    script.answers["/api/v1/jobs/7/output"] = [(204, {}, {})]
    client = Client(url, "t", retries=0)
    answer = client.pilot_status(7, "p1", "Done", "Execution Complete", 0, attempt=1, ended_ago=0.5,
                                 output=("out", "err", False))
    assert answer == {"JobID": 7, "Status": "Done"}
    assert [path for path, _ in script.seen] == ["/api/v1/jobs/7/pilot-status", "/api/v1/jobs/7/output",
                                                 "/api/v1/jobs/7/pilot-status"]
    assert script.seen[1][1] == {"pilot_id": "p1", "stdout": "out", "stderr": "err", "truncated": False, "attempt": 1}
    assert "output" in script.seen[0][1] and "output" not in script.seen[2][1]
    # Any other 422 is the report's own fault: no second try.
    script.answers["/api/v1/jobs/7/pilot-status"] = [(422, {}, {"detail": "exit_code: Input should be an integer"})]
    with pytest.raises(ApiError):
        client.pilot_status(7, "p1", "Done", "Execution Complete", 0, output=("out", "", False))


REPORTS = "/api/v1/jobs/pilot-status"


def taken(body: dict) -> tuple[int, dict[str, str], dict]:
    """Every report taken, as the server answers it."""
    return 200, {}, {"results": [{"JobID": r["job_id"], "Status": r["status"]} for r in body["reports"]]}


def report_in_threads(reports: Reports, jobs: list[int], status: str = "Running",
                      **extra: object) -> tuple[list[threading.Thread], dict[int, object]]:
    """Each job reported from a thread of its own, as the slots do; their answers or errors by job."""
    got: dict[int, object] = {}

    def one(job_id: int) -> None:
        try:
            got[job_id] = reports.status(job_id, "p1", status, "", None, attempt=1, **extra)
        except ClientError as exc:
            got[job_id] = exc

    threads = [threading.Thread(target=one, args=(job_id,)) for job_id in jobs]
    for thread in threads:
        thread.start()
    return threads, got


class HeldFirstCall:
    """The first call (job 0's report) held at the server until the reports
    given next wait for the sender: they go together in the second call,
    answered by ``then``."""

    def __init__(self, script: Script, then: Callable[[dict], tuple[int, dict[str, str], dict]]) -> None:
        self.first_in, self.release = threading.Event(), threading.Event()
        self.then = then
        script.compute[REPORTS] = self.answer

    def answer(self, body: dict) -> tuple[int, dict[str, str], dict]:
        if [r["job_id"] for r in body["reports"]] == [0]:
            self.first_in.set()
            self.release.wait(10)
            return taken(body)
        return self.then(body)

    def report(self, reports: Reports, jobs: list[int], status: str = "Running", **extra: object) -> dict[int, object]:
        first, _ = report_in_threads(reports, [0])
        assert self.first_in.wait(10)
        threads, got = report_in_threads(reports, jobs, status, **extra)
        deadline = time.monotonic() + 10
        while len(reports._waiting) < len(jobs) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.release.set()
        for thread in first + threads:
            thread.join(10)
        return got


def test_reports_made_while_a_call_is_on_its_way_go_together_in_the_next(fake_server):
    url, script = fake_server
    held = HeldFirstCall(script, taken)
    got = held.report(Reports(Client(url, "t", retries=0)), [1, 2, 3, 4])
    assert [[r["job_id"] for r in body["reports"]] for _, body in script.seen] == [[0], [1, 2, 3, 4]]
    assert got == {j: {"JobID": j, "Status": "Running"} for j in (1, 2, 3, 4)}
    assert script.seen[1][1]["reports"][0] == {"job_id": 1, "pilot_id": "p1", "status": "Running",
                                               "minor_status": "", "exit_code": None, "attempt": 1}


def test_a_refused_report_raises_what_the_single_call_raises_and_refuses_nothing_else(fake_server):
    url, script = fake_server
    held = HeldFirstCall(script, lambda body: (200, {}, {"results": [
        {"JobID": 1, "Status": "Done"},
        {"JobID": 2, "Error": {"Status": 409, "Detail": "job 2 was handed out again"}},
        {"JobID": 3, "Error": {"Status": 503, "Detail": "send it again"}},
    ]}))
    got = held.report(Reports(Client(url, "t", retries=0)), [1, 2, 3], "Done")
    assert len(script.seen) == 2
    assert got[1] == {"JobID": 1, "Status": "Done"}
    assert isinstance(got[2], JobLost) and got[2].status == 409 and "handed out again" in got[2].detail
    assert isinstance(got[3], ApiError) and not isinstance(got[3], JobLost) and got[3].status == 503


def test_a_failed_call_fails_each_of_its_reports_with_its_error(fake_server):
    url, script = fake_server
    script.answers[REPORTS] = [(200, {}, {"results": []})]       # not one result per report
    reports = Reports(Client(url, "t", retries=0))
    with pytest.raises(NetworkError, match="expected one result per report"):
        reports.status(1, "p1", "Running", "", None, attempt=1)
    script.answers[REPORTS] = [(500, {}, {"detail": "boom"})]
    with pytest.raises(ApiError, match="HTTP 500: boom"):
        reports.status(1, "p1", "Running", "", None, attempt=1)
    assert reports.batched


def test_a_server_without_the_route_gets_one_call_per_report_from_then_on(fake_server):
    url, script = fake_server
    script.answers[REPORTS] = [(405, {}, {"detail": "Method Not Allowed"})]
    script.answers["/api/v1/jobs/7/pilot-status"] = [(200, {}, {"JobID": 7, "Status": "Done"})]
    reports = Reports(Client(url, "t", retries=0))
    assert reports.status(7, "p1", "Done", "", 0, attempt=1, output=("out", "", False)) == {"JobID": 7,
                                                                                          "Status": "Done"}
    assert reports.status(7, "p1", "Done", "", 0, attempt=1) == {"JobID": 7, "Status": "Done"}
    assert [path for path, _ in script.seen] == [REPORTS, "/api/v1/jobs/7/pilot-status",
                                                 "/api/v1/jobs/7/pilot-status"]
    assert script.seen[1][1]["output"] == {"stdout": "out", "stderr": "", "truncated": False}


def test_a_report_larger_than_a_calls_body_goes_alone(fake_server):
    url, script = fake_server
    held = HeldFirstCall(script, taken)
    big = ("x" * (MAX_BYTES // 2), "y" * (MAX_BYTES // 2), True)
    held.report(Reports(Client(url, "t", retries=0)), [1, 2, 3], "Done", output=big)
    sizes = [len(body["reports"]) for _, body in script.seen]
    assert sizes == [1, 1, 1, 1]
