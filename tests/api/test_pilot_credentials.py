"""Pilots are who their token says, and tokens end (docs/security.md,
"Pilots and tokens"), over HTTP on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from tests.helpers import PILOT, ROLAND, as_pilot
from wms.db import pilots as pilots_db
from wms.db import schema
from wms.services.tokens import create_token, revoke_token, token_hash, token_id

pytestmark = pytest.mark.databases

HELLO = '[ Executable = "/bin/echo"; Arguments = "hello"; CPUTime = 300; ]'
LOCAL = {"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default"}


class Caller:
    def __init__(self, client, token: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path, **kw):
        return self.client.get("/api/v1" + path, headers=self.headers, **kw)

    def post(self, path, body):
        return self.client.post("/api/v1" + path, headers=self.headers, json=body)


def submit(caller, *texts) -> list[int]:
    response = caller.post("/jobs", {"jdls": [{"source": f"j{i}.jdl", "text": t} for i, t in enumerate(texts)]})
    assert response.status_code == 201, response.text
    return response.json()["job_ids"]


def request(pilot: Caller, pilot_id: str, **extra):
    body = {**LOCAL, "host": "wn01", "pilot_id": pilot_id, "platform": "x86_64-el9", "cpu_time_left": 100000,
            **extra}
    return pilot.post("/matcher/request-job", body)


def snapshot(runtime, job_id: int):
    """What a refused report must leave as it was: the job row, its history, its output."""
    with runtime.engine.connect() as conn:
        job = conn.execute(select(schema.jobs).where(schema.jobs.c.job_id == job_id)).mappings().one()
        history = conn.execute(select(func.count()).select_from(schema.status_history)
                               .where(schema.status_history.c.job_id == job_id)).scalar()
        output = conn.execute(select(func.count()).select_from(schema.job_outputs)
                              .where(schema.job_outputs.c.job_id == job_id)).scalar()
    return dict(job), history, output


def test_one_pilot_cannot_report_heartbeat_or_upload_for_another_pilots_job(runtime, caller, pilot_of, tokens):
    roland = caller(tokens["roland"])
    [job_id] = submit(roland, HELLO)
    owner, intruder = pilot_of("p-owner"), pilot_of("p-intruder")
    answer = request(owner, "p-owner").json()
    assert answer["match"] and answer["job"]["JobID"] == job_id
    attempt = answer["job"]["Attempt"]
    assert owner.post(f"/jobs/{job_id}/pilot-status", {"pilot_id": "p-owner", "status": "Running",
                                                        "attempt": attempt}).status_code == 200
    before = snapshot(runtime, job_id)
    # The intruder quoting the owner's id: its token is not the owner's.
    for path, body in ((f"/jobs/{job_id}/pilot-status", {"status": "Failed", "exit_code": 99}),
                       (f"/jobs/{job_id}/heartbeat", {}),
                       (f"/jobs/{job_id}/output", {"stdout": "forged", "stderr": "", "truncated": False})):
        response = intruder.post(path, {"pilot_id": "p-owner", "attempt": attempt, **body})
        assert response.status_code == 403, (path, response.text)
        assert "cannot speak for pilot 'p-owner'" in response.json()["detail"]
        # Under its own id: the job was not given to it, and answers as a missing one.
        response = intruder.post(path, {"pilot_id": "p-intruder", "attempt": attempt, **body})
        assert response.status_code == 404, (path, response.text)
        assert response.json()["detail"] == f"no such job: {job_id}"
    # Nor can it read the job (its JDL, history, output).
    for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/jdl", f"/jobs/{job_id}/history", f"/jobs/{job_id}/output"):
        assert intruder.get(path).status_code == 404, path
    assert intruder.get("/jobs").json() == []
    assert intruder.get("/task-queues").status_code == 403 and intruder.get("/quotas").status_code == 403
    assert snapshot(runtime, job_id) == before
    # The owner goes on, and reads what it holds.
    assert owner.get(f"/jobs/{job_id}").json()["Status"] == "Running"
    assert [j["JobID"] for j in owner.get("/jobs").json()] == [job_id]
    assert owner.post(f"/jobs/{job_id}/output", {"pilot_id": "p-owner", "stdout": "hello\n", "stderr": "",
                                                  "truncated": False, "attempt": attempt}).status_code == 204
    assert owner.post(f"/jobs/{job_id}/pilot-status", {"pilot_id": "p-owner", "status": "Done", "exit_code": 0,
                                                        "attempt": attempt}).status_code == 200
    assert roland.get(f"/jobs/{job_id}/output").json()["stdout"] == "hello\n"


def test_a_pilot_asks_only_for_itself_and_only_for_its_vos_jobs(runtime, caller, pilot_of, tokens):
    roland = caller(tokens["roland"])
    submit(roland, HELLO)
    response = request(pilot_of("p1"), "p2")
    assert response.status_code == 403 and "cannot speak for pilot 'p2'" in response.json()["detail"]
    dteam = pilot_of("p-dteam", vo="dteam")
    assert request(dteam, "p-dteam").json()["match"] is False        # roland's job is lhcb's
    assert request(pilot_of("p-lhcb"), "p-lhcb").json()["match"] is True
    # Operators and managers may still act for any pilot.
    assert request(caller(tokens["admin"]), "anyone").status_code == 200


def test_a_hand_made_pilot_token_is_bound_by_its_first_request(runtime, caller, pilot_of, tokens, now):
    first = caller(tokens["pilot"])                              # `wms admin token create --role pilot`
    # A refused request binds nothing.
    assert request(first, "hand-1", queue="nowhere").status_code == 400
    assert request(first, "hand-1").status_code == 200
    response = request(first, "hand-2")
    assert response.status_code == 403 and "pilot 'hand-1''s" in response.json()["detail"]
    # Another token cannot take the id over, nor that of a SiteDirector pilot.
    second = caller(create_token(runtime.engine, PILOT, now))
    response = request(second, "hand-1")
    assert response.status_code == 403 and "belongs to another pilot's token" in response.json()["detail"]
    pilot_of("director-pilot")
    with runtime.engine.begin() as conn:
        pilots_db.add_pilots(conn, [{"pilot_id": "sd-1", "site": "DIRAC.Local.ch", "ce": "localhost",
                                     "queue": "default", "backend": "local", "state": "Running", "submitted": now}])
    assert request(second, "director-pilot").status_code == 403
    assert request(second, "sd-1").status_code == 403
    assert request(second, "hand-2").status_code == 200
    with runtime.engine.connect() as conn:
        bound = dict(conn.execute(select(schema.tokens.c.token_hash, schema.tokens.c.pilot_id)).all())
    assert bound[token_hash(tokens["pilot"])] == "hand-1"


def test_expired_and_revoked_tokens_are_refused_with_the_reason(runtime, caller, now):
    expired = create_token(runtime.engine, ROLAND, now - timedelta(days=2), lifetime=timedelta(days=1))
    response = caller(expired).get("/jobs")
    assert response.status_code == 401
    assert response.json()["detail"].startswith(f"token {token_id(token_hash(expired))} expired at ")
    revoked = create_token(runtime.engine, ROLAND, now)
    assert caller(revoked).get("/jobs").status_code == 200
    # Revoked in this process: its verified tokens forget it at once.
    view = revoke_token(runtime.engine, token_id(token_hash(revoked)), now, runtime.caches.verified_tokens)
    assert view["State"] == "revoked"
    response = caller(revoked).get("/jobs")
    assert response.status_code == 401 and " was revoked at " in response.json()["detail"]


def test_a_pilot_renews_its_token_while_it_runs(runtime, caller, pilot_of, now):
    lifetime = runtime.config.settings.pilot_token_lifetime
    pilot = pilot_of("p-renew", lifetime=timedelta(seconds=60))
    answer = pilot.post("/pilots/token/renew", {"pilot_id": "p-renew"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["PilotID"] == "p-renew" and lifetime - 5 <= answer.json()["ExpiresIn"] <= lifetime
    assert pilot.post("/pilots/token/renew", {"pilot_id": "other"}).status_code == 403
    # A SiteDirector pilot that has ended is not kept alive.
    with runtime.engine.begin() as conn:
        pilots_db.add_pilots(conn, [{"pilot_id": "p-renew", "site": "DIRAC.Local.ch", "ce": "localhost",
                                     "queue": "default", "backend": "local", "state": "Aborted", "submitted": now}])
    response = pilot.post("/pilots/token/renew", {})
    assert response.status_code == 403 and "has ended (Aborted)" in response.json()["detail"]
    # Only pilots renew (their own token).
    user = caller(create_token(runtime.engine, ROLAND, now))
    assert user.post("/pilots/token/renew", {}).status_code == 403


def test_a_renewed_token_is_not_shortened(runtime, caller, pilot_of):
    pilot = pilot_of("p-long", lifetime=timedelta(days=7))
    assert pilot.post("/pilots/token/renew", {}).json()["ExpiresIn"] > 6 * 86400
    forever = pilot_of("p-forever", lifetime=None)
    assert forever.post("/pilots/token/renew", {}).json()["ExpiresIn"] is None


def test_as_pilot_helper_matches_the_bound_token(runtime, now):
    from wms.services.tokens import authenticate

    token = create_token(runtime.engine, as_pilot("p9"), now)
    assert authenticate(runtime.engine, token, now) == as_pilot("p9")
