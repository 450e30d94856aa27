"""A real `wms server` logging JSON at DEBUG: every answer names its
request, the access log and the Matcher's decisions carry that id, an
error answer carries it too, and no token ever reaches the log."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.helpers import EXAMPLES, eventually, tail
from tests.servers import Tokens, running_server

USERS = {"roland": ("roland", "lhcb_user", "lhcb", "user")}
QUEUE = {"site": "LCG.CERN.ch", "ce": "ce01.cern.ch", "queue": "long", "host": "wn-log-1"}
SECRET_IN_QUERY = "wms_not_a_real_token_in_a_query"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WMS_LOG_LEVEL", "DEBUG")
        patch.setenv("WMS_LOG_FORMAT", "json")
        with running_server(tmp_path_factory.mktemp("logs"), tokens=USERS) as handle:
            yield handle


@pytest.fixture(scope="module")
def tokens(server) -> Tokens:
    """roland's token, and a pilot token for any pilot id asked for."""
    return Tokens(server)


def log_entries(server) -> list[dict]:
    """The server's JSON log lines (its announcement on stderr is plain text)."""
    return [json.loads(line) for line in server.log.read_text().splitlines() if line.startswith("{")]


def logged(server, **match) -> dict:
    """The first log entry with every key/value of ``match``, once the server has written it."""
    def find() -> dict:
        found = [e for e in log_entries(server) if all(e.get(k) == v for k, v in match.items())]
        assert found, f"no log line with {match}:\n{tail(server.log)}"
        return found[0]

    return eventually(find)


def test_every_answer_names_its_request(server):
    made = httpx.get(server.url + "/api/v1/health")
    assert made.status_code == 200 and len(made.headers["x-request-id"]) == 16
    kept = httpx.get(server.url + "/api/v1/health", headers={"X-Request-ID": "lb-trace-42"})
    assert kept.headers["x-request-id"] == "lb-trace-42"
    replaced = httpx.get(server.url + "/api/v1/health", headers={"X-Request-ID": "two words"})
    assert replaced.headers["x-request-id"] not in ("two words", "")


def test_the_access_log_has_one_line_per_request_with_its_id(server):
    httpx.get(server.url + "/api/v1/health", headers={"X-Request-ID": "access-1"})
    entry = logged(server, request_id="access-1", logger="wms.access")
    assert (entry["level"], entry["method"], entry["path"], entry["status"]) == ("INFO", "GET", "/api/v1/health", 200)
    assert entry["message"].startswith('127.0.0.1 "GET /api/v1/health" 200 ')


def test_an_error_answer_carries_the_id_its_log_line_has(server, tokens):
    with server.api(tokens["roland"]) as api:
        answer = api.get("/jobs/999999/jdl", headers={"X-Request-ID": "error-1"})
    assert answer.status_code == 404
    assert answer.json()["request_id"] == answer.headers["x-request-id"] == "error-1"
    assert logged(server, request_id="error-1", logger="wms.access")["status"] == 404


def test_each_match_decision_is_one_line_with_the_request_id(server, tokens):
    with server.api(tokens["p-log-1"]) as api:
        answer = api.post("/matcher/request-job", json={**QUEUE, "pilot_id": "p-log-1"},
                          headers={"X-Request-ID": "match-none"})
    assert answer.status_code == 200 and answer.json()["match"] is False
    entry = logged(server, request_id="match-none", logger="wms.services.matcher")
    assert entry["level"] == "INFO" and entry["pilot_id"] == "p-log-1"
    assert entry["message"].startswith("no job for pilot p-log-1 on LCG.CERN.ch/ce01.cern.ch/long (wn-log-1): ")

    [job_id] = server.ok("submit", str(EXAMPLES / "hello.jdl"), token=tokens["roland"]).split()
    with server.api(tokens["p-log-2"]) as api:
        answer = api.post("/matcher/request-job", json={**QUEUE, "pilot_id": "p-log-2", "pools": []},
                          headers={"X-Request-ID": "match-one"})
    assert answer.json()["match"] is True and answer.json()["job"]["JobID"] == int(job_id)
    entry = logged(server, request_id="match-one", logger="wms.services.matcher")
    assert entry["message"] == f"job {job_id} matched to pilot p-log-2 on LCG.CERN.ch/ce01.cern.ch/long (wn-log-1)"
    assert entry["job_id"] == int(job_id)


def test_no_token_ever_reaches_the_log(server, tokens):
    with server.api(tokens["roland"]) as api:
        api.get("/jobs", params={"token": SECRET_IN_QUERY}, headers={"X-Request-ID": "secret-1"})
    httpx.get(server.url + "/api/v1/jobs", headers={"Authorization": f"Bearer {SECRET_IN_QUERY}x",
                                                    "X-Request-ID": "secret-2"})
    assert logged(server, request_id="secret-1")["path"] == "/api/v1/jobs?token=***"
    assert logged(server, request_id="secret-2")["status"] == 401
    text = server.log.read_text()
    assert tokens["roland"] not in text and tokens["p-log-1"] not in text and tokens["p-log-2"] not in text
    assert SECRET_IN_QUERY not in text
