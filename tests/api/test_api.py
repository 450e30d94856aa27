"""The HTTP API on SQLite, PostgreSQL and MariaDB: bearer tokens, roles,
who sees and kills which job, and the one-line error documents."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from tests.helpers import ROLAND
from wms.api.app import create_app
from wms.api.deps import POLICY_ATTRIBUTE
from wms.api.openapi import api_routes
from wms.api.permissions import EXPECTED
from wms.services.tokens import create_token, token_hash

pytestmark = pytest.mark.databases

HELLO = '[ Executable = "/bin/sh"; Arguments = "-c \'echo hello\'"; JobName = "hello"; ]'


def submit(caller, *texts, **options):
    body = {"jdls": [{"source": f"j{i}.jdl", "text": t} for i, t in enumerate(texts)], **options}
    response = caller.post("/jobs", body)
    assert response.status_code == 201, response.text
    return response.json()["job_ids"]


def test_every_route_declares_an_access_policy(runtime):
    app = create_app(runtime)
    routes = api_routes(app)    # app.routes holds each included router as one entry
    assert len(routes) >= 40
    checked = 0
    for context in routes:
        route = context.original_route
        policies = [d.call for d in route.dependant.dependencies if hasattr(d.call, POLICY_ATTRIBUTE)]
        assert policies, f"{context.path} has no access policy"
        checked += 1
    assert checked == len(EXPECTED)


def test_requests_without_a_valid_token_are_refused(client, runtime):
    assert client.get("/api/v1/jobs").status_code == 401
    response = client.get("/api/v1/jobs", headers={"Authorization": "Bearer wms_nonsense"})
    assert response.status_code == 401
    assert response.json()["detail"] == "invalid token (unknown to this server)"
    assert client.get("/api/v1/health").json()["status"] == "ok"


def test_expired_tokens_are_refused(client, runtime):
    past = datetime.now(timezone.utc) - timedelta(days=2)
    token = create_token(runtime.engine, ROLAND, past, lifetime=timedelta(days=1))
    response = client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


def test_tokens_are_stored_hashed(runtime, tokens):
    from sqlalchemy import select

    from wms.db.schema import tokens as table

    with runtime.engine.connect() as conn:
        stored = set(conn.execute(select(table.c.token_hash)).scalars())
    assert tokens["roland"] not in stored
    assert token_hash(tokens["roland"]) in stored


def test_submit_and_read_back(as_user):
    roland = as_user("roland")
    [job_id] = submit(roland, HELLO)
    status = roland.get(f"/jobs/{job_id}").json()
    for key in ("JobID", "Status", "MinorStatus", "Owner", "OwnerGroup", "Site", "Queue", "SubmitPool", "TaskQueue"):
        assert key in status
    assert status["Status"] == "Waiting" and status["Owner"] == "roland"
    assert [e["Status"] for e in roland.get(f"/jobs/{job_id}/history").json()] == ["Received", "Checking", "Waiting"]
    assert "hello" in roland.get(f"/jobs/{job_id}/jdl").json()["OriginalJDL"]
    assert roland.get("/jobs", params={"job_id": [job_id]}).json()[0]["JobID"] == job_id


def test_a_submitted_job_waits_from_when_it_was_filed_by_the_servers_clock(runtime, tokens):
    """The route hands the app's clock to the submission: Waiting is dated after Received."""
    ticks = iter(range(1000))
    start = datetime.now(timezone.utc)
    client = TestClient(create_app(runtime, clock=lambda: start + timedelta(seconds=next(ticks))))
    headers = {"Authorization": f"Bearer {tokens['roland']}"}
    answer = client.post("/api/v1/jobs", headers=headers, json={"jdls": [{"source": "h.jdl", "text": HELLO}]})
    [job_id] = answer.json()["job_ids"]
    times = {e["Status"]: datetime.fromisoformat(e["Time"])
             for e in client.get(f"/api/v1/jobs/{job_id}/history", headers=headers).json()}
    assert times["Received"] == times["Checking"] < times["Waiting"]


def test_submit_warns_of_a_job_no_queue_could_ever_run_and_strict_refuses_it(as_user):
    roland = as_user("roland")
    never = '[ Executable = "/bin/true"; Requirements = [ SoftwareTag = "AppVersion9"; ]; ]'
    answer = roland.post("/jobs", {"jdls": [{"source": "never.jdl", "text": never}]})
    assert answer.status_code == 201
    [warning] = answer.json()["warnings"]
    assert warning.startswith("never.jdl: no configured queue could ever run this job (")
    assert roland.post("/jobs", {"jdls": [{"source": "h.jdl", "text": HELLO}]}).json()["warnings"] == []
    before = roland.get("/jobs").json()
    refused = roland.post("/jobs", {"jdls": [{"source": "h.jdl", "text": HELLO}, {"source": "never.jdl", "text": never}],
                                    "strict": True})
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith("refused (--strict), nothing submitted: never.jdl: no configured queue")
    assert roland.get("/jobs").json() == before


def test_a_misspelt_resource_attribute_is_named_with_the_closest_one_and_strict_refuses_it(as_user):
    roland = as_user("roland")
    misspelt = '[ Executable = "/bin/true"; Requirements = other.Memroy >= 1000; ]'
    answer = roland.post("/jobs", {"jdls": [{"source": "typo.jdl", "text": misspelt}]})
    assert answer.status_code == 201
    assert answer.json()["warnings"] == [
        "typo.jdl: Requirements: other.Memroy: no resource describes Memroy; did you mean Memory?"]
    spelt = '[ Executable = "/bin/true"; MinMem = 1000; Requirements = other.Memory >= MinMem; ]'
    assert roland.post("/jobs", {"jdls": [{"source": "ok.jdl", "text": spelt}]}).json()["warnings"] == []
    before = roland.get("/jobs").json()
    refused = roland.post("/jobs", {"jdls": [{"source": "typo.jdl", "text": misspelt}], "strict": True})
    assert refused.status_code == 400
    assert refused.json()["detail"] == ("refused (--strict), nothing submitted: typo.jdl: Requirements: "
                                        "other.Memroy: no resource describes Memroy; did you mean Memory?")
    assert roland.get("/jobs").json() == before


def test_users_see_and_kill_only_their_own_jobs(as_user):
    roland, andre, admin = as_user("roland"), as_user("andre"), as_user("admin")
    [mine] = submit(roland, HELLO)
    [theirs] = submit(andre, HELLO)
    assert [j["JobID"] for j in roland.get("/jobs").json()] == [mine]
    # Another user's job answers as a missing one (docs/security.md, "Permissions").
    response = roland.get(f"/jobs/{theirs}")
    assert response.status_code == 404 and response.json()["detail"] == f"no such job: {theirs}"
    assert roland.get("/jobs", params={"owner": "andre"}).json() == []
    response = roland.post("/jobs/kill", {"job_ids": [theirs]})
    assert response.status_code == 404 and response.json()["detail"] == f"no such job: {theirs}"
    assert {j["JobID"] for j in admin.get("/jobs").json()} == {mine, theirs}
    assert [j["JobID"] for j in admin.get("/jobs", params={"owner": "andre"}).json()] == [theirs]
    assert admin.post("/jobs/kill", {"job_ids": [theirs]}).json()["killed"] == [theirs]
    assert roland.delete(f"/jobs/{mine}").json()["killed"] == [mine]


def test_operators_see_and_kill_all_jobs(as_user):
    [job_id] = submit(as_user("roland"), HELLO)
    operator = as_user("oper")
    assert operator.get(f"/jobs/{job_id}").status_code == 200
    assert operator.post("/jobs/kill", {"job_ids": [job_id]}).json()["killed"] == [job_id]


def test_pilots_read_pools_but_not_other_jobs_and_do_not_submit_or_kill(as_user):
    [job_id] = submit(as_user("roland"), '[ Executable = "x"; Requirements = [ SoftwareTag = "AppVersion2"; ]; ]')
    pilot = as_user("pilot")
    assert pilot.post("/jobs", {"jdls": [{"text": HELLO}]}).status_code == 403
    assert pilot.post("/jobs/kill", {"job_ids": [job_id]}).status_code == 403
    for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/jdl", f"/jobs/{job_id}/history", f"/jobs/{job_id}/output"):
        assert pilot.get(path).status_code == 404, path      # not given to this pilot
    assert pilot.get("/jobs").json() == []
    pools = pilot.get("/matcher/submit-pools", params={"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default"})
    assert pools.status_code == 200
    assert pools.json() == [as_user("roland").get(f"/jobs/{job_id}").json()["SubmitPool"]]


def test_a_bad_jdl_is_refused_with_its_position(as_user):
    roland = as_user("roland")
    response = roland.post("/jobs", {"jdls": [{"source": "ok.jdl", "text": HELLO},
                                              {"source": "bad.jdl", "text": '[ Executable = "x;\n]'}]})
    assert response.status_code == 400
    assert response.json()["detail"] == "bad.jdl:1:16: unterminated string"
    assert roland.get("/jobs").json() == []


@pytest.mark.parametrize(
    "path, params, status",
    [
        ("/jobs/999999", None, 404),
        ("/jobs", {"status": "Sleeping"}, 400),
        ("/matcher/submit-pools", {"site": "", "ce": "c", "queue": "q"}, 400),
        ("/pools/0000000000000000", None, 404),
    ],
)
def test_error_documents(as_user, path, params, status):
    response = as_user("roland").get(path, params=params)
    assert response.status_code == status
    assert isinstance(response.json()["detail"], str)


def test_malformed_bodies_name_the_field(as_user):
    response = as_user("roland").post("/jobs", {"jdls": []})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("jdls:")
    response = as_user("roland").post("/jobs", {"jdls": [{"text": HELLO}], "parallel_environment": "mpi"})
    assert response.status_code == 400
    assert "slot count" in response.json()["detail"]


def test_match_queues_and_task_queues(as_user):
    roland = as_user("roland")
    result = roland.post("/match-queues", {"source": "arm.jdl", "text": '[ Executable = "x"; Platform = "aarch64-el9"; ]'})
    assert result.json()["eligible"] == ["LCG.CERN.ch/ce02.cern.ch/arm"]
    [job_id] = submit(roland, HELLO, HELLO)[:1]
    assert roland.get(f"/jobs/{job_id}/match-queues").status_code == 200
    [tq] = roland.get("/task-queues").json()
    assert tq["WaitingJobs"] == 2
