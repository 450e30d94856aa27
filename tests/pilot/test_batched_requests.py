"""The pilot's batched job request against a small real HTTP server: a busy
answer (429 with Retry-After) is waited out and asked again, and a server
without POST /matcher/request-jobs (404: older than the route) makes the
pilot ask request-job, one job at a time, from then on; a server that
takes no output with a job's status (422 for the field) gets the output,
then the status, as two calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from pilot.client import ApiError, Client
from tests.helpers import send_json, small_http_server
from pilot.main import Pilot, Settings

JOB = {"JobID": 7, "Attempt": 1, "JDL": "[]", "Executable": "/bin/true", "Arguments": "", "Slots": 1, "Lease": 60,
       "Limits": {}, "Environment": {"WMS_JOB_ID": "7"}}


class Script:
    """What the server answers, by path: a list of (status, headers, body) used in turn (the last one repeats)."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, dict[str, str], dict]]] = {}
        self.seen: list[tuple[str, dict]] = []


@pytest.fixture
def fake_server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.seen.append((self.path, body))
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
