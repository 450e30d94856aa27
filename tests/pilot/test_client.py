"""The HTTP client against a real local HTTP server."""

from __future__ import annotations

import socket

import pytest

from pilot.client import ApiError, Client, JobLost, NetworkError, load_token
from tests.pilot.contract_server import TOKEN, ContractServer, job


def client(url: str, **kw) -> Client:
    kw.setdefault("sleep", lambda s: None)
    kw.setdefault("timeout", 5)
    return Client(url, TOKEN, **kw)


def test_calls_follow_the_contract():
    with ContractServer([job(5, "true")], pools=["p1"]) as srv:
        c = client(srv.url)
        assert c.submit_pools("S", "C", "Q") == ["p1"]
        assert srv.calls[0][3] == {"site": ["S"], "ce": ["C"], "queue": ["Q"]}
        answer = c.request_job({"site": "S", "slots": 1})
        assert answer["match"] is True and answer["job"]["JobID"] == 5
        assert c.request_job({"site": "S", "slots": 1}) == {"match": False, "reason": "no job in the pools"}
        assert c.pilot_status(5, "pid", "Running", "Application", None) == {"JobID": 5, "Status": "Running"}
        assert srv.bodies("/jobs/5/pilot-status") == [
            {"pilot_id": "pid", "status": "Running", "minor_status": "Application", "exit_code": None}
        ]
        assert c.heartbeat(5, "pid") == {"Status": "Running", "Kill": False}
        c.output(5, "pid", "out", "err", True)
        assert srv.bodies("/jobs/5/output") == [{"pilot_id": "pid", "stdout": "out", "stderr": "err", "truncated": True}]


def test_base_url_with_or_without_prefix():
    assert Client("http://h:1/", "t").base == "http://h:1/api/v1"
    assert Client("http://h:1/api/v1", "t").base == "http://h:1/api/v1"


def test_error_detail_and_no_retry_on_4xx():
    with ContractServer() as srv:
        with pytest.raises(ApiError) as err:
            Client(srv.url, "wrong-token", sleep=lambda s: None).submit_pools("S", "C", "Q")
        assert err.value.status == 401 and err.value.detail == "Invalid or missing token"
        assert "HTTP 401: Invalid or missing token" in str(err.value)
        assert len(srv.calls) == 1


def test_409_is_job_lost():
    with ContractServer() as srv:
        srv.conflict.add(9)
        with pytest.raises(JobLost) as err:
            client(srv.url).heartbeat(9, "pid")
        assert err.value.detail == "Job 9 is not assigned to this pilot"


def test_5xx_is_retried_then_succeeds():
    with ContractServer(pools=["p"]) as srv:
        srv.fail_next = [503, 500]
        delays: list[float] = []
        assert client(srv.url, sleep=delays.append, retries=3).submit_pools("S", "C", "Q") == ["p"]
        assert len(srv.calls) == 3 and len(delays) == 2
        assert delays[1] > delays[0] * 0.5  # back-off grows (with jitter)


def test_5xx_gives_up_after_the_retries():
    with ContractServer() as srv:
        srv.fail_next = [502] * 5
        with pytest.raises(ApiError) as err:
            client(srv.url, retries=2).request_job({})
        assert err.value.status == 502 and len(srv.calls) == 3


def test_unreachable_server_is_a_network_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tries: list[float] = []
    with pytest.raises(NetworkError):
        client(f"http://127.0.0.1:{port}", retries=2, sleep=tries.append).request_job({})
    assert len(tries) == 2


def test_load_token(tmp_path):
    f = tmp_path / "tok"
    f.write_text("from-file\n")
    assert load_token("explicit", f, {"WMS_TOKEN": "env"}) == "explicit"
    assert load_token(None, f, {"WMS_TOKEN": "env"}) == "from-file"
    assert load_token(None, None, {"WMS_TOKEN": " env "}) == "env"
    assert load_token(None, None, {}) is None
