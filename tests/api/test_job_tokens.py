"""Job tokens (docs/security.md, "Job tokens") over HTTP on SQLite, PostgreSQL
and MariaDB: a payload's token reads its own job and sets its application
status while its attempt lasts, and claims nothing else."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from tests.conftest import fuzz_examples
from tests.api.test_pilot_credentials import HELLO, LOCAL
from tests.api.test_pilot_credentials import Caller as PilotCaller
from tests.helpers import as_pilot
from wms.core.limits import APPLICATION_HISTORY_MAX
from wms.db import cluster_objects as objects_db
from wms.db import schema
from wms.services import leases
from wms.services import job_tokens
from wms.services.tokens import create_token

pytestmark = pytest.mark.databases

class Caller(PilotCaller):
    """The pilot tests' caller, with the methods of the sandbox and kill routes too."""

    def put(self, path, content: bytes, **kw):
        return self.client.put("/api/v1" + path, headers={**self.headers, **kw.pop("headers", {})},
                               content=content, **kw)

    def delete(self, path):
        return self.client.delete("/api/v1" + path, headers=self.headers)


class World:
    """roland, a pilot, and helpers to hand roland's jobs out and run them."""

    def __init__(self, runtime, client, tokens, now) -> None:
        self.runtime, self.client, self.now = runtime, client, now
        self.roland = Caller(client, tokens["roland"])
        self.admin = Caller(client, tokens["admin"])
        self.pilot = Caller(client, create_token(runtime.engine, as_pilot("p1"), now, lifetime=timedelta(hours=1)))

    def submit(self, count: int = 1) -> list[int]:
        response = self.roland.post("/jobs", {"jdls": [{"source": f"j{i}.jdl", "text": HELLO} for i in range(count)]})
        assert response.status_code == 201, response.text
        return response.json()["job_ids"]

    def hand_out(self) -> dict:
        """One job of roland's handed out to pilot p1: the match answer's job."""
        answer = self.pilot.post("/matcher/request-job", request_body("p1")).json()
        assert answer["match"], answer
        return answer["job"]

    def report(self, job: dict, status: str, **extra):
        body = {"pilot_id": "p1", "status": status, "attempt": job["Attempt"], **extra}
        return self.pilot.post(f"/jobs/{job['JobID']}/pilot-status", body)

    def running(self) -> tuple[dict, Caller]:
        """A job of roland's, Running in pilot p1, and a caller with its job token."""
        job = self.hand_out()
        assert self.report(job, "Running", minor_status="Application").status_code == 200
        return job, Caller(self.client, job["JobToken"])


def request_body(pilot_id: str) -> dict:
    return {**LOCAL, "host": "wn01", "pilot_id": pilot_id, "platform": "x86_64-el9", "cpu_time_left": 100000}


@pytest.fixture
def world(runtime, client, tokens, now) -> World:
    return World(runtime, client, tokens, now)


def rows(runtime, job_id: int):
    """What a refusal must leave as it was: the job row and its history."""
    with runtime.engine.connect() as conn:
        job = conn.execute(select(schema.jobs).where(schema.jobs.c.job_id == job_id)).mappings().one()
        history = conn.execute(select(schema.status_history.c.minor_status, schema.status_history.c.source)
                               .where(schema.status_history.c.job_id == job_id)
                               .order_by(schema.status_history.c.entry_id)).all()
    return dict(job), [tuple(h) for h in history]


def detail(response) -> str:
    return response.json()["detail"]


# ---------------------------------------------------------------- what it may do
def test_the_match_answer_carries_a_job_token_of_the_attempt(world):
    [job_id] = world.submit()
    job = world.hand_out()
    assert job["JobID"] == job_id
    assert job["JobToken"].startswith(f"wmsj_{job_id}.{job['Attempt']}.")
    assert job_tokens.parse(job["JobToken"])[:2] == (job_id, job["Attempt"])
    # request-jobs hands one out with each job
    world.submit(2)
    batch = world.pilot.post("/matcher/request-jobs", {**request_body("p1"), "slots": 2, "count": 2}).json()
    assert [j["JobToken"].split(".")[0] for j in batch["jobs"]] == [f"wmsj_{j['JobID']}" for j in batch["jobs"]]


def test_a_job_token_reads_its_job_and_sets_its_application_status(world, runtime):
    [job_id] = world.submit()
    job, token = world.running()
    status = token.get(f"/jobs/{job_id}")
    assert status.status_code == 200, status.text
    assert (status.json()["JobID"], status.json()["Status"], status.json()["Owner"]) == (job_id, "Running", "roland")
    assert token.get(f"/jobs/{job_id}/jdl").json()["JobID"] == job_id

    answer = token.post(f"/jobs/{job_id}/application-status", {"application_status": "Reconstructing event 500"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"JobID": job_id, "Status": "Running",
                             "MinorStatus": "Application: Reconstructing event 500", "Recorded": True}
    assert world.roland.get(f"/jobs/{job_id}").json()["MinorStatus"] == "Application: Reconstructing event 500"
    last = world.roland.get(f"/jobs/{job_id}/history").json()[-1]
    assert (last["Status"], last["MinorStatus"], last["Source"]) == (
        "Running", "Application: Reconstructing event 500", "job")
    # The same line again: nothing new in the history.
    entries = len(rows(runtime, job_id)[1])
    again = token.post(f"/jobs/{job_id}/application-status", {"application_status": "Reconstructing event 500"})
    assert again.status_code == 200 and again.json()["Recorded"] is False
    assert len(rows(runtime, job_id)[1]) == entries
    # The holding pilot and an administrator may set it too; roland may not.
    assert world.pilot.post(f"/jobs/{job_id}/application-status", {"application_status": "from the pilot"}
                            ).status_code == 200
    assert world.admin.post(f"/jobs/{job_id}/application-status", {"application_status": "by hand"}
                            ).status_code == 200
    refused = world.roland.post(f"/jobs/{job_id}/application-status", {"application_status": "mine"})
    assert refused.status_code == 403
    sources = [h["Source"] for h in world.roland.get(f"/jobs/{job_id}/history").json()[-3:]]
    assert sources == ["job", "Pilot p1", "User"]
    # The pilot's own reports still work after the payload's lines.
    assert world.report(job, "Done", exit_code=0).status_code == 200


def test_the_history_keeps_a_bounded_number_of_application_lines_per_attempt(world, runtime):
    [job_id] = world.submit()
    _, token = world.running()
    for n in range(APPLICATION_HISTORY_MAX + 5):
        answer = token.post(f"/jobs/{job_id}/application-status", {"application_status": f"event {n}"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["Recorded"] is (n < APPLICATION_HISTORY_MAX)
    job, history = rows(runtime, job_id)
    assert job["minor_status"] == f"Application: event {APPLICATION_HISTORY_MAX + 4}"
    assert sum(1 for _, source in history if source == "job") == APPLICATION_HISTORY_MAX


def test_a_matched_job_has_no_application_status_yet(world, runtime):
    [job_id] = world.submit()
    job = world.hand_out()
    token = Caller(world.client, job["JobToken"])
    assert token.get(f"/jobs/{job_id}").json()["Status"] == "Matched"      # the attempt is alive
    before = rows(runtime, job_id)
    answer = token.post(f"/jobs/{job_id}/application-status", {"application_status": "too early"})
    assert answer.status_code == 409 and "it is Matched" in detail(answer)
    assert rows(runtime, job_id) == before


# ---------------------------------------------------------------- what it may not do
def test_a_job_token_claims_nothing_else(world, runtime):
    [job_id, other] = world.submit(2)
    job, token = world.running()
    assert job["JobID"] == job_id
    before = {i: rows(runtime, i) for i in (job_id, other)}
    # Another job answers as a job that does not exist.
    for path in (f"/jobs/{other}", f"/jobs/{other}/jdl"):
        response = token.get(path)
        assert (response.status_code, detail(response)) == (404, f"no such job: {other}"), path
        missing = token.get(path.replace(str(other), "999999999"))
        assert (missing.status_code, detail(missing)) == (404, "no such job: 999999999")
    response = token.post(f"/jobs/{other}/application-status", {"application_status": "x"})
    assert (response.status_code, detail(response)) == (404, f"no such job: {other}")
    # Everything else is the role's to be refused, its own job's included.
    report = {"pilot_id": "p1", "attempt": job["Attempt"]}
    refused = [
        token.post("/matcher/request-job", request_body("p1")),
        token.post("/matcher/request-jobs", {**request_body("p1"), "slots": 2, "count": 2}),
        token.post(f"/jobs/{job_id}/pilot-status", {**report, "status": "Done", "exit_code": 0}),
        token.post(f"/jobs/{job_id}/heartbeat", report),
        token.post(f"/jobs/{job_id}/output", {**report, "stdout": "forged"}),
        token.get(f"/jobs/{job_id}/sandbox", params=report),
        token.get(f"/jobs/{job_id}/sandbox/output/x.txt", params=report),
        token.put(f"/jobs/{job_id}/sandbox/output/x.txt", b"forged", params=report,
                  headers={"Content-Type": "application/octet-stream"}),
        token.put("/sandboxes/" + "0" * 64, b"x", headers={"Content-Type": "application/octet-stream"}),
        token.get("/jobs"),
        token.post("/jobs", {"jdls": [{"source": "j.jdl", "text": HELLO}]}),
        token.get(f"/jobs/{job_id}/history"),
        token.get(f"/jobs/{job_id}/output"),
        token.get(f"/jobs/{job_id}/why"),
        token.post("/jobs/kill", {"job_ids": [job_id]}),
        token.delete(f"/jobs/{job_id}"),
        token.post("/pilots/token/renew", {"pilot_id": "p1"}),
        token.get("/whoami"),
        token.get("/task-queues"),
        token.get("/reservations"),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused), [(r.request.url.path, r.text) for r in refused]
    assert all("role 'job' may not do this" in detail(r) for r in refused)
    assert {i: rows(runtime, i) for i in (job_id, other)} == before


# ---------------------------------------------------------------- when it ends
def ended_by_done(world, job):
    assert world.report(job, "Done", exit_code=0).status_code == 200
    return "that attempt is over (job is Done)"


def ended_by_kill(world, job):
    assert world.roland.post("/jobs/kill", {"job_ids": [job["JobID"]]}).status_code == 200
    return "that attempt is over (job is Killed)"


def ended_by_failure(world, job):
    assert world.report(job, "Failed", exit_code=3).status_code == 200
    return "that attempt is over (job is Failed)"


def ended_by_lease(world, job):
    """Never confirmed: its lease runs out and it waits again."""
    later = world.now + timedelta(seconds=world.runtime.config.settings.match_lease + 60)
    assert leases.expire_leases(world.runtime, later) == 1
    return "that attempt is over (job is Waiting)"


def ended_by_a_new_hand_out(world, job):
    ended_by_lease(world, job)
    again = world.hand_out()
    assert (again["JobID"], again["Attempt"]) == (job["JobID"], job["Attempt"] + 1)
    assert again["JobToken"] != job["JobToken"]
    return f"that attempt is over (the job was handed out again: attempt {again['Attempt']} is Matched)"


def ended_by_silence(world, job):
    """Running, its heartbeats stop: Stalled, then rescheduled."""
    assert world.report(job, "Running").status_code == 200
    later = world.now + timedelta(seconds=world.runtime.config.settings.heartbeat_timeout + 60)
    assert leases.reap_stalled(world.runtime, later) == 1
    return "that attempt is over (job is Waiting)"


@pytest.mark.parametrize("end", [ended_by_done, ended_by_kill, ended_by_failure, ended_by_lease,
                                 ended_by_a_new_hand_out, ended_by_silence], ids=lambda f: f.__name__[9:])
def test_a_job_token_ends_with_its_attempt(world, runtime, end):
    [job_id] = world.submit()
    job = world.hand_out()
    token = Caller(world.client, job["JobToken"])
    assert token.get(f"/jobs/{job_id}").status_code == 200
    reason = end(world, job)
    before = rows(runtime, job_id)
    for response in (token.get(f"/jobs/{job_id}"), token.get(f"/jobs/{job_id}/jdl"),
                     token.post(f"/jobs/{job_id}/application-status", {"application_status": "late"}),
                     token.get("/jobs")):
        assert response.status_code == 401, response.text
        assert detail(response) == f"job token of job {job_id} attempt {job['Attempt']}: {reason}"
    assert rows(runtime, job_id) == before


# ---------------------------------------------------------------- forged tokens
def test_a_forged_or_altered_job_token_is_refused(world, runtime):
    [job_id, other] = world.submit(2)
    job, token = world.running()
    prefix, attempt, mac = job["JobToken"].split(".")
    flipped = ("A" if mac[0] != "A" else "B") + mac[1:]
    before = {i: rows(runtime, i) for i in (job_id, other)}
    cases = {
        f"{prefix}.{attempt}.{flipped}": job_tokens.BAD_SIGNATURE,                   # forged signature
        f"wmsj_{other}.{attempt}.{mac}": job_tokens.BAD_SIGNATURE,                    # another job's id
        f"{prefix}.{int(attempt) + 1}.{mac}": job_tokens.BAD_SIGNATURE,               # another attempt
        f"{prefix}.0{attempt}.{mac}": job_tokens.MALFORMED,                          # the same numbers, not canonical
        f"{prefix}.{attempt}.{mac}=": job_tokens.MALFORMED,
        f"{prefix}.{attempt}": job_tokens.MALFORMED,
        "wmsj_": job_tokens.MALFORMED,
        f"wmsj_{2**63}.1.{mac}": job_tokens.MALFORMED,                               # past 64 bits
    }
    for forged, why in cases.items():
        for response in (Caller(world.client, forged).get(f"/jobs/{job_id}"),
                         Caller(world.client, forged).post(f"/jobs/{job_id}/application-status",
                                                           {"application_status": "forged"})):
            assert (response.status_code, detail(response)) == (401, why), forged
    # A token signed with another key: that of another deployment, or from before a rotation.
    stranger = base64.urlsafe_b64encode(b"\0" * 32).rstrip(b"=").decode()
    other_key = job_tokens.signature(b"k" * 32, job_id, int(attempt))
    for mac_text in (stranger, other_key):
        response = Caller(world.client, f"{prefix}.{attempt}.{mac_text}").get(f"/jobs/{job_id}")
        assert (response.status_code, detail(response)) == (401, job_tokens.BAD_SIGNATURE)
    assert {i: rows(runtime, i) for i in (job_id, other)} == before
    assert token.get(f"/jobs/{job_id}").status_code == 200         # the real one still works


@given(tail=st.text(max_size=120))
@example(tail="1.1." + "A" * 43)
@example(tail="9223372036854775807.2147483647." + "A" * 43)
@example(tail="1.2147483648." + "A" * 43)
@example(tail="1.1." + "A" * 42 + "\u00e9")
@settings(max_examples=fuzz_examples(100), suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_after_wmsj_is_refused_with_401(world_for_fuzz, tail):
    client, job_id = world_for_fuzz
    token = "wmsj_" + tail
    try:
        header = f"Bearer {token}".encode("latin-1")
    except UnicodeEncodeError:
        header = f"Bearer {token}".encode()
    response = client.get(f"/api/v1/jobs/{job_id}", headers=[(b"authorization", header)])
    assert response.status_code == 401, (token, response.text)
    assert len(response.json()["detail"].splitlines()) == 1


@pytest.fixture
def world_for_fuzz(world):
    [job_id] = world.submit()
    world.running()
    return world.client, job_id


def test_job_tokens_cannot_be_made_as_stored_tokens(runtime, now):
    from wms.core.errors import InvalidInput
    from wms.core.identity import Identity

    with pytest.raises(InvalidInput, match="unknown role 'job'"):
        create_token(runtime.engine, Identity(user="roland", group="lhcb_user", vo="lhcb", role="job"), now)


# ---------------------------------------------------------------- the body
@pytest.mark.parametrize("body, status", [
    ({"application_status": ""}, 422),
    ({"application_status": "   "}, 400),
    ({"application_status": "x" * 257}, 422),
    ({"application_status": "two\nlines"}, 422),
    ({"application_status": "a\rb"}, 422),
    ({"application_status": "tab\there"}, 422),
    ({"application_status": "escape \x1b[31m"}, 422),
    ({"application_status": "line\u2028separator"}, 422),
    ({"application_status": "nul\x00"}, 400),
    ({"application_status": 5}, 422),
    ({"application_status": None}, 422),
    ({}, 422),
    ({"application_status": "ok", "extra": 1}, 422),
    ([], 422),
])
def test_application_status_bodies_that_are_refused(world, runtime, body, status):
    [job_id] = world.submit()
    _, token = world.running()
    before = rows(runtime, job_id)
    response = token.post(f"/jobs/{job_id}/application-status", body)
    assert response.status_code == status, response.text
    assert len(detail(response).splitlines()) == 1
    assert rows(runtime, job_id) == before
    ok = token.post(f"/jobs/{job_id}/application-status", {"application_status": "x" * 256})
    assert ok.status_code == 200, ok.text


# ---------------------------------------------------------------- the key
def test_the_key_is_made_once_shared_and_rotated(world, runtime, now):
    from wms.services.runtime import Runtime

    with runtime.engine.connect() as conn:
        assert objects_db.get_object(conn, job_tokens.KEY_KIND) is None
    [job_id] = world.submit()
    job, token = world.running()
    with runtime.engine.connect() as conn:
        row = objects_db.get_object(conn, job_tokens.KEY_KIND)
    assert row["version"] == 1 and len(bytes.fromhex(row["text"])) == job_tokens.KEY_BYTES
    # Another process of the deployment reads the same key: it accepts the token, and signs alike.
    other = Runtime.create(runtime.config, runtime.engine)
    assert job_tokens.authenticate(other, job["JobToken"], now).job_id == job_id
    assert job_tokens.mint(other, job_id, job["Attempt"]) == job["JobToken"]
    # A rotation ends every token handed out before, in every process.
    assert job_tokens.rotate_key(runtime.engine, "admin", now) == 2
    for process in (runtime, other):
        process.caches.stored_version(job_tokens.KEY_KIND).checked = float("-inf")
    response = token.get(f"/jobs/{job_id}")
    assert (response.status_code, detail(response)) == (401, job_tokens.BAD_SIGNATURE)
    assert job_tokens.mint(other, job_id, job["Attempt"]) != job["JobToken"]
    assert Caller(world.client, job_tokens.mint(other, job_id, job["Attempt"])).get(f"/jobs/{job_id}"
                                                                                 ).status_code == 200
    # Deleting the row does the same: every process drops the key, the next hand-out makes a new one.
    rotated = job_tokens.mint(other, job_id, job["Attempt"])
    with runtime.engine.begin() as conn:
        conn.execute(schema.cluster_objects.delete().where(schema.cluster_objects.c.kind == job_tokens.KEY_KIND))
    for process in (runtime, other):
        process.caches.stored_version(job_tokens.KEY_KIND).checked = float("-inf")
    response = Caller(world.client, rotated).get(f"/jobs/{job_id}")
    assert (response.status_code, detail(response)) == (401, job_tokens.BAD_SIGNATURE)
    fresh = job_tokens.mint(other, job_id, job["Attempt"])
    assert fresh not in (rotated, job["JobToken"])
    runtime.caches.stored_version(job_tokens.KEY_KIND).checked = float("-inf")
    assert Caller(world.client, fresh).get(f"/jobs/{job_id}").status_code == 200


def test_a_refused_job_token_makes_no_key(world, runtime):
    """Before any hand-out there is no key, and a job token's refusal writes none."""
    [job_id] = world.submit()
    response = Caller(world.client, f"wmsj_{job_id}.1." + "A" * 43).get(f"/jobs/{job_id}")
    assert (response.status_code, detail(response)) == (401, job_tokens.BAD_SIGNATURE)
    with runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema.cluster_objects)).scalar() == 0
