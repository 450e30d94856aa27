"""The pilot's job requests on their lean path (wms/api/pilot_calls.py).

A request the lean path knows (a body its route's model takes, a token
the cache holds with a role the route admits) is answered there; anything
else goes on to FastAPI byte for byte. Both answer the same.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from tests.helpers import PILOT, ROLAND, as_pilot, patience, wait_until
from wms.api import pilot_calls
from wms.api.app import create_app
from wms.api.pilot_calls import PilotCalls
from wms.core.identity import Identity
from wms.services import tokens as tokens_service

pytestmark = pytest.mark.databases

REQUEST_JOB = "/api/v1/matcher/request-job"
REQUEST_JOBS = "/api/v1/matcher/request-jobs"
HELLO = '[ Executable = "/bin/sh"; Arguments = "-c true"; CPUTime = 100; ]'
LOCAL = {"site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default", "host": "wn1", "platform": "x86_64-el9",
         "cpu_time_left": 100000}


def token(runtime, identity: Identity, *, verified: bool = True) -> str:
    """A new token for ``identity``; ``verified``: already in the verified-token cache, as after its first request."""
    now = datetime.now(timezone.utc)
    made = tokens_service.create_token(runtime.engine, identity, now)
    if verified:
        tokens_service.authenticate(runtime.engine, made, now, runtime.caches.verified_tokens)
    return made


class FastAPIStandIn:
    """What lies beyond the middleware, recording what reached it (an ASGI app of its own)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"beyond"})


@pytest.fixture
def lean(runtime):
    """A client of the middleware alone, with the request-job route of the real app."""
    beyond = FastAPIStandIn()
    app = create_app(runtime)
    middleware = PilotCalls(beyond, runtime, pilot_calls.calls_of(app, [REQUEST_JOB, REQUEST_JOBS]))

    async def in_the_app(scope, receive, send) -> None:
        scope["app"] = app          # as the app's own middleware stack sees it (its clock)
        await middleware(scope, receive, send)

    return TestClient(in_the_app), beyond


def post(client: TestClient, path: str, body: Any, bearer: str | None, **headers: str):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return client.post(path, content=raw, headers={"Content-Type": "application/json", **headers})


def test_a_pilot_with_a_verified_token_is_answered_on_the_lean_path(runtime, lean):
    client, beyond = lean
    pilot = token(runtime, as_pilot("p1"))
    answer = post(client, REQUEST_JOB, {**LOCAL, "pilot_id": "p1"}, pilot)
    assert (answer.status_code, answer.json()) == (200, {"match": False,
                                                         "reason": "no waiting job for the pools this queue serves"})
    answer = post(client, REQUEST_JOBS, {**LOCAL, "pilot_id": "p1", "slots": 2, "count": 2}, pilot)
    assert answer.json() == {"jobs": [], "reason": "no waiting job for the pools this queue serves"}
    assert beyond.bodies == []


@pytest.mark.parametrize("case", ["not JSON", "refused by the model", "token not verified yet", "no token",
                                  "a user's token", "another scheme"])
def test_what_the_lean_path_does_not_know_goes_on_to_fastapi_unchanged(runtime, lean, case):
    client, beyond = lean
    body: Any = {**LOCAL, "pilot_id": "p1"}
    bearer: str | None = token(runtime, as_pilot("p1"))
    headers = {}
    if case == "not JSON":
        body = b'{"site": '
    elif case == "refused by the model":
        body = {**body, "slots": 0}
    elif case == "token not verified yet":
        bearer = token(runtime, as_pilot("p1"), verified=False)
    elif case == "no token":
        bearer = None
    elif case == "a user's token":
        bearer = token(runtime, ROLAND)
    else:
        headers["Authorization"] = f"Basic {bearer}"
        bearer = None
    answer = post(client, REQUEST_JOB, body, bearer, **headers)
    assert (answer.status_code, answer.text) == (299, "beyond")
    assert beyond.bodies == [body if isinstance(body, bytes) else json.dumps(body).encode()]


def test_other_routes_and_methods_go_on_to_fastapi(runtime, lean):
    client, beyond = lean
    pilot = token(runtime, as_pilot("p1"))
    assert client.get(REQUEST_JOB, headers={"Authorization": f"Bearer {pilot}"}).status_code == 299
    assert post(client, "/api/v1/jobs/1/heartbeat", {"pilot_id": "p1"}, pilot).status_code == 299
    assert len(beyond.bodies) == 2


def without_lean_path(runtime):
    app = create_app(runtime)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not PilotCalls]
    return TestClient(app)


def comparable(answer) -> tuple[int, Any]:
    body = answer.json()
    if isinstance(body, dict):
        body.pop("request_id", None)
        if isinstance(body.get("job"), dict):
            body["job"].pop("JobID")
            body["job"].pop("Environment")         # names the job id
            body["job"].pop("JobToken")            # names it too
    return answer.status_code, body


@pytest.mark.parametrize("body", [
    {**LOCAL, "pilot_id": "p1"},                                      # a job
    {**LOCAL, "pilot_id": "p1", "queue": "nosuch"},                  # the service refuses: 400
    {**LOCAL, "pilot_id": "someone-else"},                           # another pilot's id: 403
    {**LOCAL, "pilot_id": "p1", "platform": "aarch64-el9"},          # no match, and why
], ids=["match", "unknown queue", "another pilot", "no match"])
def test_both_paths_give_the_same_answer(runtime, body):
    answers = []
    for client in (TestClient(create_app(runtime)), without_lean_path(runtime)):
        roland = token(runtime, ROLAND)
        submitted = post(client, "/api/v1/jobs", {"jdls": [{"text": HELLO}]}, roland)
        assert submitted.status_code == 201, submitted.text
        answers.append(comparable(post(client, REQUEST_JOB, body, token(runtime, as_pilot("p1")))))
    assert answers[0] == answers[1]
    assert answers[0][0] != 299


def test_a_pilot_token_not_bound_yet_is_bound_on_the_lean_path(runtime):
    client = TestClient(create_app(runtime))
    hand_made = token(runtime, PILOT)          # verified, bound to no pilot yet
    assert post(client, REQUEST_JOB, {**LOCAL, "pilot_id": "first"}, hand_made).status_code == 200
    refused = post(client, REQUEST_JOB, {**LOCAL, "pilot_id": "second"}, hand_made)
    assert refused.status_code == 403 and "second" in refused.json()["detail"]


def test_a_statement_past_the_time_limit_is_503_on_the_lean_path(database_factory):
    from tests.helpers import default_config
    from wms.db.engine import make_engine
    from wms.db.migrate import upgrade
    from wms.services.runtime import Runtime

    engine = make_engine(database_factory("postgresql"), statement_timeout=0.5)
    upgrade(engine)
    runtime = Runtime.create(default_config(), engine)
    client = TestClient(create_app(runtime))
    roland, pilot = token(runtime, ROLAND), token(runtime, as_pilot("p1"))
    assert post(client, "/api/v1/jobs", {"jdls": [{"text": HELLO}]}, roland).status_code == 201
    try:
        with engine.connect() as locker:
            locker.execute(text("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"))
            answer = post(client, REQUEST_JOB, {**LOCAL, "pilot_id": "p1"}, pilot)
            locker.rollback()
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"]
        assert "limits.statement_timeout" in answer.json()["detail"]
        answer = post(client, REQUEST_JOB, {**LOCAL, "pilot_id": "p1"}, pilot)
        assert answer.json()["match"] is True            # nothing was changed: the job is still there
    finally:
        engine.dispose()


def test_only_routes_of_a_body_and_a_caller_are_taken(runtime):
    app = create_app(runtime)
    with pytest.raises(ValueError, match="no such POST routes"):
        pilot_calls.calls_of(app, ["/api/v1/nosuch"])
    with pytest.raises(ValueError, match="nothing from its path"):
        pilot_calls.calls_of(app, ["/api/v1/jobs/{job_id}/heartbeat"])


def test_a_pilot_is_answered_while_every_request_thread_waits(database_factory):
    """The pilots' job requests run on threads of their own (backpressure.match_threads):
    a request holding the process's only request thread does not hold them up."""
    import dataclasses
    import threading

    from tests.helpers import default_config
    from wms.db.engine import make_engine
    from wms.db.migrate import upgrade
    from wms.services.runtime import Runtime

    config = default_config()
    one_thread = config.settings.backpressure.model_copy(update={"request_threads": 1})
    config = dataclasses.replace(config, settings=config.settings.model_copy(update={"backpressure": one_thread}))
    engine = make_engine(database_factory("postgresql"))
    upgrade(engine)
    runtime = Runtime.create(config, engine)
    renewing, matching = token(runtime, as_pilot("renewing")), token(runtime, as_pilot("matching"))
    answers: dict[str, Any] = {}
    with TestClient(create_app(runtime)) as client:
        try:
            with engine.connect() as locker:
                locker.execute(text("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE"))
                renewal = threading.Thread(target=lambda: answers.update(
                    renewal=post(client, "/api/v1/pilots/token/renew", {}, renewing)))
                renewal.start()
                waiting = ("select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                           "and query like '%tokens%'")

                def renewal_waits() -> bool:
                    locker.execute(text("select pg_stat_clear_snapshot()"))   # the transaction's view is kept
                    return locker.execute(text(waiting)).scalar() == 1

                wait_until(renewal_waits, timeout=30, what="the renewal waiting for the table, in the only request thread")
                match = threading.Thread(target=lambda: answers.update(
                    match=post(client, REQUEST_JOB, {**LOCAL, "pilot_id": "matching"}, matching)))
                match.start()
                match.join(timeout=patience(20))
                answered_first = "match" in answers and "renewal" not in answers
                locker.rollback()
            renewal.join(timeout=patience(30))
            match.join(timeout=patience(30))
            assert answered_first, "the pilot waited for the request thread"
            assert answers["match"].status_code == 200 and answers["match"].json()["match"] is False
            assert answers["renewal"].status_code == 200, answers["renewal"].text
        finally:
            engine.dispose()
