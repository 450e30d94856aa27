"""The pilot's HTTP client against a real ``wms server`` (tests/pilot/conftest.py)."""

from __future__ import annotations

import time

import pytest

from pilot.client import ApiError, Client, JobLost, NetworkError
from pilot.credentials import load_token
from tests.helpers import patience
from tests.pilot.conftest import LOCAL, jdl, status, submit
from tests.servers import free_port

NO_WAITING = "no waiting job for the pools this queue serves"


def client(url: str, token: str, **kw) -> Client:
    kw.setdefault("sleep", lambda s: None)
    kw.setdefault("timeout", patience(30))
    return Client(url, token, **kw)


def request_body(pool: str, pilot_id: str = "pid") -> dict:
    site, ce, queue = LOCAL
    return {"site": site, "ce": ce, "queue": queue, "host": "wn01", "pilot_id": pilot_id, "pools": [pool],
            "slots": 1, "platform": "x86_64-el9", "cpu_time_left": 1000, "tags": [],
            "load": {"num_proc": 2, "arch": "lx-amd64"}}


def matched_job(server, tokens, tmp_path, c: Client, pilot_id: str = "pid") -> int:
    """Submit one job and have ``c`` match it for ``pilot_id``; its JobID."""
    [job] = submit(server, tokens, tmp_path, jdl("true"))
    answer = c.request_job(request_body(status(server, tokens, job)["SubmitPool"], pilot_id))
    assert answer["match"] is True and answer["job"]["JobID"] == job, answer
    return job


def test_calls_follow_the_contract(server, tokens, tmp_path):
    [job] = submit(server, tokens, tmp_path, jdl("echo hi"))
    pool = status(server, tokens, job)["SubmitPool"]
    c = client(server.url, tokens["pilot"])
    assert pool in c.submit_pools(*LOCAL)
    answer = c.request_job(request_body(pool))
    assert answer["match"] is True
    got = answer["job"]
    assert got["JobID"] == job and got["Executable"] == "/bin/sh" and got["Arguments"] == "-c 'echo hi'"
    assert (got["Slots"], got["Lease"], got["Environment"]) == (1, 300, {"WMS_JOB_ID": str(job)})
    assert got["Limits"] == {"h_rt": None, "s_rt": None, "cpu_time": 300.0}
    assert c.request_job(request_body(pool)) == {"match": False, "reason": NO_WAITING}
    assert c.pilot_status(job, "pid", "Running", "Application", None) == {"JobID": job, "Status": "Running"}
    assert c.heartbeat(job, "pid") == {"JobID": job, "Status": "Running", "Kill": False}
    assert c.output(job, "pid", "out", "err", True) is None  # 204
    assert server.json("output", str(job), token=tokens["roland"]) == {
        "JobID": job, "stdout": "out", "stderr": "err", "truncated": True}
    assert c.pilot_status(job, "pid", "Done", "Execution Complete", 0) == {"JobID": job, "Status": "Done"}
    row = status(server, tokens, job)
    assert (row["Status"], row["MinorStatus"]) == ("Done", "Execution Complete")


def test_a_jobs_end_carries_its_output_in_the_same_call(server, tokens, tmp_path):
    c = client(server.url, tokens["pilot"])
    job = matched_job(server, tokens, tmp_path, c)
    with pytest.raises(ApiError) as err:         # output belongs to the end of a job
        c.pilot_status(job, "pid", "Running", "Application", None, output=("out", "", False))
    assert err.value.status == 400 and "not with Running" in err.value.detail
    assert c.pilot_status(job, "pid", "Running", "Application", None) == {"JobID": job, "Status": "Running"}
    assert c.pilot_status(job, "pid", "Done", "Execution Complete", 0, ended_ago=0.2,
                          output=("out\n", "err\n", False)) == {"JobID": job, "Status": "Done"}
    assert server.json("output", str(job), token=tokens["roland"]) == {
        "JobID": job, "stdout": "out\n", "stderr": "err\n", "truncated": False}
    # Refused (the job is over): nothing of it stored.
    with pytest.raises(JobLost):
        c.pilot_status(job, "pid", "Failed", "again", 1, output=("other", "", False))
    assert server.json("output", str(job), token=tokens["roland"])["stdout"] == "out\n"


def test_base_url_with_or_without_prefix():
    assert Client("http://h:1/", "t").base == "http://h:1/api/v1"
    assert Client("http://h:1/api/v1", "t").base == "http://h:1/api/v1"


def test_error_detail_and_no_retry_on_4xx(server, tokens):
    delays: list[float] = []
    with pytest.raises(ApiError) as err:
        client(server.url, "wrong-token", sleep=delays.append).submit_pools(*LOCAL)
    assert err.value.status == 401 and err.value.detail == "invalid token (unknown to this server)"
    assert "GET /matcher/submit-pools: HTTP 401: invalid token (unknown to this server)" in str(err.value)
    with pytest.raises(ApiError) as err:
        client(server.url, tokens["roland"], sleep=delays.append).request_job(request_body("p"))
    assert err.value.status == 403 and err.value.detail.startswith("role 'user' may not do this")
    with pytest.raises(ApiError) as err:  # the server validates the body: one line of detail
        client(server.url, tokens["pilot"], sleep=delays.append).request_job({"site": "S"})
    assert err.value.status == 422 and "\n" not in err.value.detail and "ce" in err.value.detail
    assert delays == []  # none of them was retried


def test_409_is_job_lost(server, tokens, tmp_path):
    c = client(server.url, tokens["pilot"])
    job = matched_job(server, tokens, tmp_path, c, "pid")
    # Another pilot cannot confirm it, with its own token ...
    other = client(server.url, tokens["other-pilot"])
    other.renew_token("other-pilot")                        # binds the hand-made token to its pilot
    with pytest.raises(JobLost) as err:
        other.pilot_status(job, "other-pilot", "Running", "Application", None)
    assert err.value.status == 409
    assert err.value.detail == f"job {job} is not held by pilot other-pilot (it is Matched)"
    # ... nor this pilot's token speak for another pilot.
    with pytest.raises(ApiError) as err:
        c.pilot_status(job, "other-pilot", "Running", "Application", None)
    assert err.value.status == 403 and "cannot speak for pilot 'other-pilot'" in err.value.detail
    assert c.pilot_status(job, "pid", "Running", "Application", None)["Status"] == "Running"
    # Killed meanwhile: the heartbeat says so, and the final report is refused.
    server.ok("kill", str(job), token=tokens["roland"])
    assert c.heartbeat(job, "pid") == {"JobID": job, "Status": "Killed", "Kill": True}
    with pytest.raises(JobLost) as err:
        c.pilot_status(job, "pid", "Done", "Execution Complete", 0)
    assert err.value.detail.endswith("(it is Killed)")
    # An unknown job is a 404, not a lost job.
    with pytest.raises(ApiError) as err:
        c.heartbeat(10**9, "pid")
    assert err.value.status == 404 and not isinstance(err.value, JobLost)


def test_a_server_down_for_a_while_is_retried_then_answers(server, tokens):
    """Connection refused while the server restarts: retried until it answers."""
    delays: list[float] = []

    def nap(delay: float) -> None:
        delays.append(delay)
        time.sleep(0.1)

    server.stop()
    try:
        server.start(wait=False)
        # Retried for a minute or more: a loaded machine may take a while to start the server.
        pools = client(server.url, tokens["pilot"], sleep=nap, retries=int(patience(600))).submit_pools(*LOCAL)
    finally:
        server.wait_ready()
    assert isinstance(pools, list)
    assert len(delays) >= 1
    if len(delays) > 1:
        assert delays[1] > delays[0] * 0.5  # back-off grows (with jitter)


def test_unreachable_server_is_a_network_error():
    tries: list[float] = []
    with pytest.raises(NetworkError):
        client(f"http://127.0.0.1:{free_port()}", "t", retries=2, sleep=tries.append).request_job({})
    assert len(tries) == 2


def test_load_token(tmp_path):
    f = tmp_path / "tok"
    f.write_text("from-file\n")
    assert load_token("explicit", f, {"WMS_TOKEN": "env"}) == "explicit"
    assert load_token(None, f, {"WMS_TOKEN": "env"}) == "from-file"
    assert load_token(None, None, {"WMS_TOKEN": " env "}) == "env"
    assert load_token(None, None, {"WMS_TOKEN": "old", "WMS_PILOT_TOKEN": "pilot"}) == "pilot"
    assert load_token(None, None, {}) is None
    env = {"WMS_TOKEN": "old", "WMS_PILOT_TOKEN": "pilot", "HOME": "/h"}
    assert load_token(None, f, env, scrub=True) == "from-file" and env == {"HOME": "/h"}
