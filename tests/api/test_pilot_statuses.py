"""Several jobs' reports in one call (POST /jobs/pilot-status), over HTTP on
SQLite, PostgreSQL and MariaDB: each report is taken or refused as it would
be alone, one refused refuses nothing else, and a malformed call is refused
whole."""

from __future__ import annotations

import pytest

from tests.api.test_pilot_credentials import HELLO, request, snapshot, submit
from wms.core.limits import PILOT_REPORTS_MAX

pytestmark = pytest.mark.databases

FAILING = '[ Executable = "/bin/false"; CPUTime = 300; MaxRetries = 1; ]'


def hand_out(pilot, pilot_id: str, count: int) -> list[dict]:
    jobs = []
    for _ in range(count):
        answer = request(pilot, pilot_id).json()
        assert answer["match"], answer
        jobs.append(answer["job"])
    return jobs


def report(job: dict, status: str, pilot_id: str = "p1", **extra) -> dict:
    return {"job_id": job["JobID"], "pilot_id": pilot_id, "status": status, "attempt": job["Attempt"], **extra}


def statuses(caller, *reports):
    return caller.post("/jobs/pilot-status", {"reports": list(reports)})


def history(roland, job_id: int) -> list[str]:
    return [step["Status"] for step in roland.get(f"/jobs/{job_id}/history").json()]


def test_a_pilots_slots_report_running_then_done_with_output_in_two_calls(caller, pilot_of, tokens):
    roland, pilot = caller(tokens["roland"]), pilot_of("p1")
    ids = submit(roland, HELLO, HELLO, HELLO)
    jobs = hand_out(pilot, "p1", 3)
    answer = statuses(pilot, *(report(job, "Running", minor_status="Application") for job in jobs))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"results": [{"JobID": i, "Status": "Running"} for i in ids]}

    done = [report(job, "Done", exit_code=0, ended_ago=0.5,
                   output={"stdout": f"hello {job['JobID']}\n", "stderr": "", "truncated": False}) for job in jobs]
    answer = statuses(pilot, *done)
    assert answer.json() == {"results": [{"JobID": i, "Status": "Done"} for i in ids]}
    for job_id in ids:
        assert history(roland, job_id)[-3:] == ["Matched", "Running", "Done"]
        assert roland.get(f"/jobs/{job_id}/output").json()["stdout"] == f"hello {job_id}\n"


def test_a_refused_report_refuses_only_itself_and_says_why_as_the_single_call_would(
        runtime, caller, pilot_of, tokens):
    roland, pilot, other = caller(tokens["roland"]), pilot_of("p1"), pilot_of("p2")
    mine, theirs, killed = submit(roland, HELLO, HELLO, HELLO)
    [job_mine] = hand_out(pilot, "p1", 1)
    [job_theirs] = hand_out(other, "p2", 1)
    [job_killed] = hand_out(pilot, "p1", 1)
    assert roland.post("/jobs/kill", {"job_ids": [killed]}).status_code == 200
    before = snapshot(runtime, theirs)

    answer = statuses(pilot, report(job_mine, "Running"), report(job_theirs, "Running"),
                      report(job_killed, "Running"), {"job_id": 99999999, "pilot_id": "p1", "status": "Running"})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert results[0] == {"JobID": mine, "Status": "Running"}
    # Each refusal is the single call's: status and reason.
    for index, (job_id, body) in enumerate([(theirs, report(job_theirs, "Running")),
                                            (killed, report(job_killed, "Running"))], start=1):
        alone = pilot.post(f"/jobs/{job_id}/pilot-status", {k: v for k, v in body.items() if k != "job_id"})
        assert results[index] == {"JobID": job_id, "Error": {"Status": alone.status_code,
                                                             "Detail": alone.json()["detail"]}}, alone.text
    assert [r["Error"]["Status"] for r in results[1:]] == [404, 409, 404]
    assert results[3]["Error"]["Detail"] == "no such job: 99999999"
    # A status a pilot may not report: 400, and the report beside it taken.
    [other] = submit(roland, HELLO)
    [job_other] = hand_out(pilot, "p1", 1)
    answer = statuses(pilot, report(job_other, "Paused"), report(job_mine, "Done", exit_code=0)).json()["results"]
    assert answer == [{"JobID": other, "Error": {"Status": 400, "Detail": "status must be Running, Done or Failed, "
                                                                          "got 'Paused'"}},
                      {"JobID": mine, "Status": "Done"}]
    assert snapshot(runtime, theirs) == before          # another pilot's job: untouched


def test_a_failed_job_that_asks_for_a_retry_waits_again(caller, pilot_of, tokens):
    roland, pilot = caller(tokens["roland"]), pilot_of("p1")
    [job_id] = submit(roland, FAILING)
    [job] = hand_out(pilot, "p1", 1)
    assert statuses(pilot, report(job, "Failed", exit_code=1)).json() == {
        "results": [{"JobID": job_id, "Status": "Failed"}]}
    assert roland.get(f"/jobs/{job_id}").json()["Status"] == "Waiting"


@pytest.mark.parametrize(("body", "says"), [
    ({"reports": []}, "reports: List should have at least 1 item"),
    ({"reports": [{"job_id": 1, "pilot_id": "p1", "status": "Running"}] * (PILOT_REPORTS_MAX + 1)},
     f"reports: List should have at most {PILOT_REPORTS_MAX} items"),
    ({"reports": [{"job_id": "1", "pilot_id": "p1", "status": "Running"}]}, "reports.0.job_id"),
    ({"reports": [{"job_id": 1, "pilot_id": "p1", "status": "Done", "output": {"stdout": 5}}]},
     "reports.0.output.stdout"),
    ({"reports": [{"job_id": 1, "pilot_id": "p1", "status": "Running", "colour": "red"}]}, "reports.0.colour"),
    ({"reports": [{"job_id": 2 ** 63, "pilot_id": "p1", "status": "Running"}]}, "reports.0.job_id"),
])
def test_a_malformed_call_is_refused_whole(runtime, caller, pilot_of, tokens, body, says):
    roland, pilot = caller(tokens["roland"]), pilot_of("p1")
    [job_id] = submit(roland, HELLO)
    [job] = hand_out(pilot, "p1", 1)
    before = snapshot(runtime, job_id)
    # A good report beside the bad part is not taken either.
    if body["reports"]:
        body = {"reports": [report(job, "Running"), *body["reports"]]}
        says = says.replace("reports.0.", "reports.1.")
    answer = pilot.post("/jobs/pilot-status", body)
    assert answer.status_code == 422, answer.text
    assert says in answer.json()["detail"], answer.json()
    assert snapshot(runtime, job_id) == before


def test_only_pilots_and_administrators_report(caller, pilot_of, tokens):
    roland, pilot = caller(tokens["roland"]), pilot_of("p1")
    submit(roland, HELLO)
    [job] = hand_out(pilot, "p1", 1)
    refused = statuses(roland, report(job, "Running"))
    assert refused.status_code == 403, refused.text
    assert roland.get(f"/jobs/{job['JobID']}").json()["Status"] == "Matched"


def test_a_call_that_names_a_job_twice_is_refused_whole(runtime, caller, pilot_of, tokens):
    roland, pilot = caller(tokens["roland"]), pilot_of("p1")
    first, second = submit(roland, HELLO, HELLO)
    jobs = hand_out(pilot, "p1", 2)
    before = snapshot(runtime, first), snapshot(runtime, second)
    answer = statuses(pilot, report(jobs[0], "Running"), report(jobs[1], "Running"), report(jobs[0], "Running"))
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == f"job {first} is reported twice: one report a job in a call"
    assert (snapshot(runtime, first), snapshot(runtime, second)) == before
