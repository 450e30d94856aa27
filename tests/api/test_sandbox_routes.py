"""The sandbox routes in-process (the app on each database): raw bodies,
digests, the refusals each route gives, and what a download carries."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient

from tests.helpers import PILOT
from tests.sandboxes_config import FILE_BYTES, sandbox_runtime
from wms.api.app import create_app
from wms.api.routes_sandboxes import streams_body
from wms.services.tokens import create_token

pytestmark = pytest.mark.databases


@pytest.fixture
def app(engine, tmp_path) -> TestClient:
    return TestClient(create_app(sandbox_runtime(engine, "database", tmp_path / "unused")),
                      raise_server_exceptions=False)


def auth(tokens, user: str = "roland") -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens[user]}"}


def put(app, path, data: bytes, headers) -> object:
    return app.put("/api/v1" + path, content=data, headers={"Content-Type": "application/octet-stream", **headers})


def test_a_file_goes_up_by_its_digest_and_a_submission_names_it(app, tokens):
    data = b"#!/bin/sh\necho hi\n"
    digest = hashlib.sha256(data).hexdigest()
    response = put(app, f"/sandboxes/{digest}", data, auth(tokens))
    assert (response.status_code, response.json()) == (201, {"sha256": digest, "size": len(data)})
    submitted = app.post("/api/v1/jobs", headers=auth(tokens), json={"jdls": [{
        "source": "a.jdl", "text": '[ Executable = "/bin/sh"; CPUTime = 300; InputSandbox = {"x/run.sh"}; ]',
        "input_sandbox": {"x/run.sh": digest}}]})
    [job_id] = submitted.json()["job_ids"]
    manifest = app.get(f"/api/v1/jobs/{job_id}/sandbox", headers=auth(tokens)).json()
    assert manifest["InputSandbox"] == [{"name": "run.sh", "size": len(data), "sha256": digest}]
    download = app.get(f"/api/v1/jobs/{job_id}/sandbox/input/run.sh", headers=auth(tokens))
    assert download.content == data
    assert download.headers["x-content-sha256"] == digest
    assert download.headers["content-length"] == str(len(data))


@pytest.mark.parametrize("path, token, headers, status, says", [
    ("/sandboxes/" + "a" * 64, False, {}, 401, "missing bearer token"),
    ("/sandboxes/" + "a" * 64, True, {"Content-Length": "12x"}, 400, "Content-Length is not a number"),
    ("/sandboxes/ABC", True, {}, 400, "not a SHA-256 digest"),
    ("/sandboxes/" + "a" * 64, True, {}, 400, "the content's SHA-256 is"),
])
def test_uploads_that_are_refused(app, tokens, path, token, headers, status, says):
    response = put(app, path, b"some content", {**(auth(tokens) if token else {}), **headers})
    assert response.status_code == status and says in response.json()["detail"], response.text


def test_reads_that_are_refused(app, tokens):
    pilot = create_token(app.app.state.runtime.engine, PILOT, datetime.now(timezone.utc))
    [job_id] = app.post("/api/v1/jobs", headers=auth(tokens), json={"jdls": [{
        "text": '[ Executable = "/bin/true"; CPUTime = 300; ]'}]}).json()["job_ids"]
    cases = [
        (f"/jobs/{job_id}/sandbox/other/x", auth(tokens), 404, "no sandbox 'other' (input or output)"),
        (f"/jobs/{job_id}/sandbox/output/x", auth(tokens), 404, f"job {job_id} has no output sandbox file 'x'"),
        (f"/jobs/{job_id}/sandbox", auth(tokens, "andre"), 404, f"no such job: {job_id}"),
        (f"/jobs/{job_id}/sandbox", {"Authorization": f"Bearer {pilot}"}, 400, "pilot_id must be given"),
        ("/jobs/999999/sandbox", auth(tokens), 404, "no such job: 999999"),
    ]
    for path, headers, status, says in cases:
        response = app.get("/api/v1" + path, headers=headers)
        assert response.status_code == status and says in response.json()["detail"], (path, response.text)


def test_the_limits_are_public_to_every_caller_with_a_token(app, tokens):
    answer = app.get("/api/v1/sandboxes/limits", headers=auth(tokens)).json()
    assert {key: answer[key] for key in ("file_bytes", "job_bytes", "store", "user_bytes", "total_bytes")} == {
        "file_bytes": FILE_BYTES, "job_bytes": 1_000_000, "store": "database", "user_bytes": 5 * 1024**3,
        "total_bytes": 500 * 1024**3}
    assert app.get("/api/v1/sandboxes/limits").status_code == 401


@pytest.mark.parametrize("method, path, streamed", [
    ("PUT", "/api/v1/sandboxes/" + "a" * 64, True),
    ("PUT", "/api/v1/jobs/12/sandbox/output/result.txt", True),
    ("POST", "/api/v1/sandboxes/" + "a" * 64, False),
    ("PUT", "/api/v1/complexes/sandboxes/x", False),
    ("PUT", "/api/v1/jobs/12/sandbox/output/a/b", False),
    ("PUT", "/api/v1/jobs/12/sandbox/input/x", False),
])
def test_only_the_two_upload_routes_read_their_own_bodies(method, path, streamed):
    assert streams_body(method, path) is streamed
