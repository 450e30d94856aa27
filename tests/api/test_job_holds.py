"""POST /jobs/hold and /jobs/release: the answers, and every refusal with
its status and one-line detail (docs/api.md, "Job controls")."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.databases

HELLO = '[ Executable = "/bin/echo"; Arguments = "hello"; CPUTime = 300; ]'


def submit(caller, n: int = 1) -> list[int]:
    text = HELLO if n == 1 else HELLO.replace("CPUTime", f"Parameters = {n}; CPUTime")
    response = caller.post("/jobs", {"jdls": [{"source": "hello.jdl", "text": text}]})
    assert response.status_code == 201, response.text
    return response.json()["job_ids"]


def test_hold_why_status_and_release_over_the_api(as_user):
    roland, oper = as_user("roland"), as_user("oper")
    [job] = submit(roland)
    answer = roland.post("/jobs/hold", {"job_ids": [job], "reason": "input not staged"})
    assert answer.status_code == 200 and answer.json() == {"held": [job], "not_held": {}, "next_after": None}
    assert oper.post("/jobs/hold", {"job_ids": [job], "hold_types": "o", "reason": "site downtime"}).json()[
        "held"] == [job]
    status = roland.get(f"/jobs/{job}").json()
    assert (status["Status"], status["MinorStatus"]) == (
        "Held", "Held by the user roland: input not staged; by operator oper: site downtime")
    why = roland.get(f"/jobs/{job}/why").json()
    assert [(h["Type"], h["Holder"], h["Reason"]) for h in why["Holds"]] == [
        ("u", "roland", "input not staged"), ("o", "oper", "site downtime")]
    assert why["Summary"].endswith("(an operator or a manager may release it: wms release ID, qrls -h uo ID)")

    answer = roland.post("/jobs/release", {"job_ids": [job]}).json()
    assert answer["still_held"] == {str(job): "Held by operator oper: site downtime"}
    refused = roland.post("/jobs/release", {"job_ids": [job]})
    assert refused.status_code == 403
    assert refused.json()["detail"] == (f"job {job}: Held by operator oper: site downtime; a user may not set or "
                                        "release operator holds (-h o): only operators and managers may")
    assert oper.post("/jobs/release", {"job_ids": [job], "reason": "site back"}).json()["released"] == [job]
    assert roland.get(f"/jobs/{job}").json()["Status"] == "Waiting"
    history = roland.get(f"/jobs/{job}/history").json()
    assert (history[-1]["Status"], history[-1]["MinorStatus"], history[-1]["Source"]) == (
        "Waiting", "The operator hold released by oper: site back", "Operator oper")


def test_operators_hold_and_release_another_users_jobs_by_filter(as_user):
    roland, andre, oper = as_user("roland"), as_user("andre"), as_user("oper")
    rolands = submit(roland, 3)
    [andres] = submit(andre)
    answer = oper.post("/jobs/hold", {"owner": "roland", "hold_types": "o", "reason": "drain"}).json()
    assert answer["held"] == rolands
    assert andre.get(f"/jobs/{andres}").json()["Status"] == "Waiting"
    assert oper.post("/jobs/release", {"owner": "roland", "status": "Held"}).json()["released"] == rolands


@pytest.mark.parametrize(("caller", "body", "status", "detail"), [
    ("roland", {}, 400, "give job ids or a filter (status, owner)"),
    ("roland", {"job_ids": [1], "status": "Waiting"}, 400, "give job ids or a filter (status, owner), not both"),
    ("roland", {"status": "Done"}, 400, "status Done: only jobs that are Held or Matched or Waiting can be given to hold"),
    ("roland", {"status": "Sleeping"}, 400, "unknown status 'Sleeping' (one of Received, Checking, Waiting, "
                                           "Matched, Running, Done, Failed, Killed, Stalled, Held, Deleted)"),
    ("roland", {"owner": "andre"}, 403, "a user may not hold the jobs of andre: owner is a filter for operators "
                                        "and managers"),
    ("roland", {"job_ids": [999999]}, 404, "no such job: 999999"),
    ("roland", {"status": "Waiting", "hold_types": "o"}, 403,
     "a user may not set or release operator holds (-h o): only operators and managers may"),
    ("oper", {"status": "Waiting", "hold_types": "s"}, 403,
     "an operator may not set or release system holds (-h s): only managers may"),
    ("pilot", {"job_ids": [1]}, 403, None),
])
def test_hold_refusals(as_user, caller, body, status, detail):
    response = as_user(caller).post("/jobs/hold", body)
    assert response.status_code == status
    if detail is not None:
        assert response.json()["detail"] == detail


@pytest.mark.parametrize(("body", "field"), [
    ({"status": "Waiting", "hold_types": "x"}, "hold_types"),
    ({"status": "Waiting", "hold_types": ""}, "hold_types"),
    ({"status": "Waiting", "reason": "two\nlines"}, "reason"),
    ({"status": "Waiting", "reason": "x" * 257}, "reason"),
    ({"job_ids": []}, "job_ids"),
    ({"job_ids": [True]}, "job_ids"),
    ({"job_ids": list(range(1, 5_002))}, "job_ids"),
    ({"status": "Waiting", "colour": "red"}, "colour"),
])
def test_malformed_control_bodies_name_the_field(as_user, body, field):
    for path in ("/jobs/hold", "/jobs/release"):
        response = as_user("roland").post(path, body)
        assert response.status_code == 422
        assert response.json()["detail"].startswith(f"{field}"), response.json()


def test_release_refusals(as_user):
    roland = as_user("roland")
    [job] = submit(roland)
    response = roland.post("/jobs/release", {"job_ids": [job], "hold_types": "s"})
    assert response.status_code == 403
    assert response.json()["detail"] == "a user may not set or release system holds (-h s): only managers may"
    response = roland.post("/jobs/release", {"status": "Waiting"})
    assert response.status_code == 400
    assert response.json()["detail"] == "status Waiting: only jobs that are Held can be given to release"
    assert roland.post("/jobs/release", {"job_ids": [job]}).json()["not_released"] == {
        str(job): "it is Waiting, not Held"}


def test_reschedule_over_the_api_and_its_refusals(as_user):
    roland, oper = as_user("roland"), as_user("oper")
    [job] = submit(roland)
    answer = roland.post("/jobs/reschedule", {"job_ids": [job]})
    assert answer.status_code == 200
    assert answer.json()["not_rescheduled"] == {str(job): "it is Waiting: only a Done, Failed, Killed or Stalled "
                                                          "job is rescheduled"}
    roland.post("/jobs/kill", {"job_ids": [job]})
    refused = roland.post("/jobs/reschedule", {"job_ids": [job], "reset": True})
    assert refused.status_code == 403
    assert refused.json()["detail"] == ("a user may not reset the reschedule count (--reset): only operators and "
                                        "managers may")
    assert roland.post("/jobs/reschedule", {"job_ids": [job], "reset": "yes"}).status_code == 422
    assert as_user("andre").post("/jobs/reschedule", {"job_ids": [job]}).status_code == 404
    answer = oper.post("/jobs/reschedule", {"owner": "roland", "status": "Killed", "reason": "retry"}).json()
    assert answer == {"rescheduled": [job], "not_rescheduled": {}, "next_after": None}
    status = roland.get(f"/jobs/{job}").json()
    assert (status["Status"], status["MinorStatus"]) == ("Waiting", "Rescheduled by oper: retry")


def test_delete_over_the_api(as_user):
    roland, andre = as_user("roland"), as_user("andre")
    first, second = submit(roland, 2)
    assert andre.post("/jobs/delete", {"job_ids": [first]}).status_code == 404
    assert roland.post("/jobs/delete", {"job_ids": [first], "reason": "typo"}).json() == {
        "deleted": [first], "not_deleted": {}, "next_after": None}
    assert [j["JobID"] for j in roland.get("/jobs").json()] == [second]
    assert roland.get(f"/jobs/{first}").json()["Status"] == "Deleted"
    assert roland.post("/jobs/delete", {"job_ids": [first]}).json()["not_deleted"] == {
        str(first): "it was deleted already"}
    response = roland.post("/jobs/delete", {"status": "Deleted"})
    assert response.status_code == 400 and response.json()["detail"].startswith("status Deleted: only jobs that are")


def test_alter_over_the_api(as_user):
    roland = as_user("roland")
    [job] = submit(roland)
    answer = roland.post("/jobs/alter", {"job_ids": [job], "priority": 4, "queues": ["DIRAC.Local.ch/*"],
                                         "job_name": "renamed"})
    assert answer.status_code == 200 and answer.json()["altered"] == [job]
    status = roland.get(f"/jobs/{job}").json()
    assert (status["Priority"], status["JobName"]) == (4, "renamed")
    response = roland.post("/jobs/alter", {"job_ids": [job]})
    assert response.status_code == 400
    assert response.json()["detail"] == "nothing to alter: give a priority, resource requests, queues or a job name"
    assert roland.post("/jobs/alter", {"job_ids": [job], "priority": "high"}).status_code == 422
    assert roland.post("/jobs/alter", {"job_ids": [job], "job_name": "two\nlines"}).status_code == 422
    assert as_user("andre").post("/jobs/alter", {"job_ids": [job], "priority": 1}).status_code == 404
