"""The API's outer guard, in-process: sizes, the token before the body, the
error shape, and an unexpected exception answered with a request id."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from fastapi.testclient import TestClient

from tests.helpers import default_config
from wms.api.app import create_app
from wms.services.runtime import Runtime

pytestmark = pytest.mark.usefixtures("engine")


@pytest.fixture
def small(engine) -> TestClient:
    """An app whose request body limit is 1,000 bytes."""
    base = default_config()
    limits = base.settings.limits.model_copy(update={"request_bytes": 1000})
    config = dataclasses.replace(base, settings=base.settings.model_copy(update={"limits": limits}))
    return TestClient(create_app(Runtime.create(config, engine)), raise_server_exceptions=False)


def auth(tokens, user: str = "roland") -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens[user]}"}


def test_a_body_over_the_limit_is_413_from_its_length(small, tokens) -> None:
    response = small.post("/api/v1/jobs", content=b"x" * 1001, headers=auth(tokens))
    assert response.status_code == 413
    assert response.json() == {"detail": "request body too large: more than 1000 bytes (limits.request_bytes)",
                               "request_id": response.headers["x-request-id"]}


def test_a_chunked_body_over_the_limit_is_413(small, tokens) -> None:
    def chunks():
        for _ in range(20):
            yield b"x" * 100

    response = small.post("/api/v1/jobs", content=chunks(), headers=auth(tokens))
    assert response.status_code == 413


def test_the_token_is_checked_before_the_body_is_read(small) -> None:
    response = small.post("/api/v1/jobs", content=b"{not json")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {"detail": "missing bearer token (Authorization: Bearer <token>)",
                               "request_id": response.headers["x-request-id"]}
    response = small.post("/api/v1/jobs", content=b"{not json", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401


def test_json_nested_too_deep_is_refused(client, tokens) -> None:
    body = b'{"jdls": [{"text": "[Executable=\\"x\\";]"}], "resource_requests": {"a": ' + b"[" * 100 + b"]" * 100 + b"}}"
    response = client.post("/api/v1/jobs", content=body, headers=auth(tokens))
    assert response.status_code == 400
    assert response.json()["detail"] == "body: JSON nested too deep: more than 32 levels (limits.depth)"


def test_a_nul_anywhere_in_the_body_is_refused_with_its_place(client, tokens) -> None:
    response = client.post("/api/v1/jobs", json={"jdls": [{"text": "[Executable=\"x\";]"}], "project": "a\x00"},
                           headers=auth(tokens))
    assert response.status_code == 400
    assert response.json()["detail"] == "project:1:2: NUL character (U+0000) is not allowed"


def test_an_escaped_backslash_before_u0000_is_not_a_nul(client, tokens) -> None:
    response = client.post("/api/v1/jobs", json={"jdls": [{"text": '[Executable="x"; Arguments="\\\\u0000";]'}]},
                           headers=auth(tokens))
    assert response.status_code == 201, response.text


def test_validation_errors_do_not_echo_the_input(client, tokens) -> None:
    response = client.post("/api/v1/jobs", content=b"{bad json", headers=auth(tokens))
    assert response.status_code == 422
    body = response.json()
    assert isinstance(body["detail"], str)
    assert all(set(error) == {"type", "loc", "msg"} for error in body["errors"])


def test_a_job_id_past_64_bits_is_422(client, tokens) -> None:
    response = client.get(f"/api/v1/jobs/{2**63}", headers=auth(tokens))
    assert response.status_code == 422
    assert response.json()["detail"].startswith("path.job_id: ")


def test_an_unexpected_exception_is_a_json_500_with_a_request_id(runtime, tokens, caplog) -> None:
    app = create_app(runtime)

    @app.get("/api/v1/boom")
    def boom() -> None:
        raise RuntimeError("boom")

    client = TestClient(app, raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="wms.api"):
        response = client.get("/api/v1/boom")
    assert response.status_code == 500
    request_id = response.json()["request_id"]
    assert response.headers["x-request-id"] == request_id
    assert response.json()["detail"] == (f"internal server error (request id {request_id}; "
                                         "the server log has the details)")
    assert f"request {request_id} failed: GET /api/v1/boom" in caplog.text
    assert "RuntimeError: boom" in caplog.text
    # the app still serves
    assert client.get("/api/v1/health").status_code == 200


def test_a_statement_timeout_or_a_lost_database_is_503_and_a_wrong_statement_is_500(runtime, tokens) -> None:
    from sqlalchemy.exc import OperationalError, ProgrammingError

    class Cancelled(Exception):
        sqlstate = "57014"

    app = create_app(runtime)

    @app.get("/api/v1/slow")
    def slow() -> None:
        raise OperationalError("SELECT pg_sleep(60)", {}, Cancelled("canceling statement due to statement timeout"))

    @app.get("/api/v1/broken")
    def broken() -> None:
        raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))

    @app.get("/api/v1/wrong")
    def wrong() -> None:
        raise ProgrammingError("SELECT nothing", {}, Exception("no such column: nothing"))

    client = TestClient(app, raise_server_exceptions=False)
    response = client.get("/api/v1/slow")
    assert response.status_code == 503
    assert response.json() == {"detail": "the database took longer than 30 s (limits.statement_timeout); "
                                         "nothing was changed", "request_id": response.headers["x-request-id"]}
    response = client.get("/api/v1/broken")
    assert response.status_code == 503 and response.headers["retry-after"] == "5"
    assert response.json()["detail"].startswith("the database is not answering (request id ")
    response = client.get("/api/v1/wrong")
    assert response.status_code == 500 and "request_id" in response.json()


def test_nul_in_the_path_or_the_query_is_refused(client, tokens) -> None:
    response = client.get("/api/v1/pools/a%00b", headers=auth(tokens))
    assert (response.status_code, response.json()["detail"]) == (400, "path: NUL character (U+0000) is not allowed")
    response = client.get("/api/v1/jobs?owner=%00", headers=auth(tokens))
    assert (response.status_code, response.json()["detail"]) == (400, "query: NUL character (U+0000) is not allowed")


@pytest.mark.parametrize("length, status, detail", [
    (b"abc", 400, "Content-Length is not a number"),
    (b"9" * 5000, 413, "request body too large: more than 8388608 bytes (limits.request_bytes)"),
])
def test_a_content_length_that_is_not_a_small_number(runtime, length, status, detail) -> None:
    """Servers such as uvicorn refuse these themselves; the guard does not rely on it."""
    import anyio
    import json

    app = create_app(runtime)
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/jobs", "raw_path": b"/api/v1/jobs",
             "query_string": b"", "headers": [(b"content-length", length)], "http_version": "1.1",
             "scheme": "http", "server": ("test", 80), "client": ("test", 1), "root_path": "", "app": app}
    anyio.run(app, scope, receive, send)
    assert sent[0]["status"] == status
    assert json.loads(sent[1]["body"])["detail"] == detail


def test_a_bad_key_is_named_on_one_line(client, tokens) -> None:
    body = {"jdls": [{"text": '[Executable="x";]'}], "resource_requests": {"a\n\x00": 1, "b": "\x00"}}
    response = client.post("/api/v1/jobs", json=body, headers=auth(tokens))
    assert response.status_code == 400
    assert response.json()["detail"] == "resource_requests: a key:2:1: NUL character (U+0000) is not allowed"
    body = {"jdls": [{"text": '[Executable="x";]'}], "resource_requests": {"a\nb": "\x00"}}
    response = client.post("/api/v1/jobs", json=body, headers=auth(tokens))
    assert response.json()["detail"] == "resource_requests.'a\\nb':1:1: NUL character (U+0000) is not allowed"


def test_every_error_detail_is_one_line(client, tokens) -> None:
    response = client.get("/api/v1/pools/a%0Ab", headers=auth(tokens))
    assert response.status_code == 404
    assert response.json()["detail"] == "no such SubmitPool: a\\nb"
    response = client.post("/api/v1/jobs", json={"jdls": [{"text": '[Executable="x";]'}], "a\nb": 1},
                           headers=auth(tokens))
    assert response.status_code == 422
    assert "\n" not in response.json()["detail"]


def test_a_json_number_of_5000_digits_is_refused(client, tokens) -> None:
    body = b'{"job_ids": [' + b"9" * 5000 + b"]}"
    response = client.post("/api/v1/jobs/kill", content=body, headers=auth(tokens))
    assert 400 <= response.status_code < 500, response.text
    assert "\n" not in response.json()["detail"]


@pytest.mark.parametrize("method, path, body, status", [
    ("GET", "/api/v1/no-such-thing", None, 404),
    ("DELETE", "/api/v1/health", None, 405),
    ("GET", "/api/v1/jobs", None, 401),
    ("POST", "/api/v1/jobs", {"jdls": "not a list"}, 422),
])
def test_every_error_answer_names_its_request(client, tokens, method, path, body, status) -> None:
    headers = {"X-Request-ID": "req-err"} if status == 401 else {**auth(tokens), "X-Request-ID": "req-err"}
    response = client.request(method, path, json=body, headers=headers)
    assert response.status_code == status
    assert response.headers["x-request-id"] == "req-err"
    assert response.json()["request_id"] == "req-err" and response.json()["detail"]


@pytest.mark.parametrize("method, path", [
    ("GET", "/api/v1/jobs/kill"),            # GET /jobs/{job_id} would take "kill" for a job id
    ("DELETE", "/api/v1/jobs/kill"),         # DELETE /jobs/{job_id}, likewise
    ("PATCH", "/api/v1/reservations/delete"),   # PATCH /reservations/{ar_id}
])
def test_a_fixed_path_asked_with_a_method_it_does_not_take_is_405_not_a_bad_id(client, tokens, method, path):
    response = client.request(method, path, headers=auth(tokens))
    assert response.status_code == 405, response.text
    assert response.json()["detail"] == f"method {method} is not allowed on {path} (/docs lists what is)"
    assert response.headers["allow"] == "POST"


def test_a_word_where_a_job_id_belongs_is_still_a_bad_id(client, tokens):
    response = client.get("/api/v1/jobs/kil", headers=auth(tokens))
    assert response.status_code == 422
    assert response.json()["detail"].startswith("path.job_id: Input should be a valid integer")
