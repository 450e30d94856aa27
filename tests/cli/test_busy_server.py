"""The `wms` CLI against a busy server, a small real HTTP server that answers
429 or 503 with Retry-After: it waits and asks again (a line on stderr per
wait) while that is safe, and fails with one line once it has waited enough."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.helpers import REPO, send_json, small_http_server


class Busy:
    """Answers ``busy`` (status, Retry-After) to the first ``times`` requests, then 200 with ``answer``."""

    def __init__(self) -> None:
        self.busy = (429, "1")
        self.times = 0
        self.answer: object = []
        self.seen: list[tuple[str, str]] = []


@pytest.fixture
def busy() -> Iterator[tuple[str, Busy]]:
    state = Busy()

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.seen_it()
            if len(state.seen) <= state.times:
                status, after = state.busy
                send_json(self, status, {"detail": "server busy"}, {"Retry-After": after} if after else {})
            else:
                send_json(self, 200, state.answer)

        def seen_it(self) -> None:
            state.seen.append((self.command, self.path.split("?")[0]))

        do_GET = do_POST = answer

        def log_message(self, *args: object) -> None:
            pass

    with small_http_server(Handler) as url:
        yield url, state


def wms(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WMS_URL": url, "WMS_TOKEN": "t"}
    return subprocess.run([sys.executable, "-m", "wms.cli.main", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("status", [429, 503])
def test_a_get_waits_out_a_busy_server_and_gets_its_answer(busy, status):
    url, state = busy
    state.busy, state.times = (status, "1"), 2
    run = wms(url, "jobs", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []
    lines = run.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("server busy, retrying in ") for line in lines), run.stderr
    assert state.seen == [("GET", "/api/v1/jobs")] * 3


def test_after_its_bound_the_cli_fails_with_one_line(busy):
    url, state = busy
    state.busy, state.times = (429, "1"), 100
    run = wms(url, "jobs")
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert lines[:3] == [line for line in lines[:3] if line.startswith("server busy, retrying in ")]
    assert len(lines) == 4 and "Traceback" not in run.stderr
    assert "server busy: HTTP 429 after 3 retries" in lines[3] and "it last asked to retry after 1 s" in lines[3]
    assert len(state.seen) == 4


def test_a_post_is_sent_again_after_a_429_only(busy):
    url, state = busy
    state.busy, state.times = (429, "1"), 1
    state.answer = {"killed": [5], "not_killed": {}}
    run = wms(url, "kill", "5")
    assert run.returncode == 0, run.stderr
    assert "5 killed" in run.stdout and state.seen == [("POST", "/api/v1/jobs/kill")] * 2
    # A 503 on a POST may come after part of the work: reported, not repeated.
    state.seen.clear()
    state.busy, state.times = (503, "1"), 1
    run = wms(url, "kill", "5")
    assert run.returncode == 1 and "retrying" not in run.stderr
    assert run.stderr.strip().endswith("server busy") and state.seen == [("POST", "/api/v1/jobs/kill")]


def test_a_busy_answer_without_retry_after_is_an_error_at_once(busy):
    url, state = busy
    state.busy, state.times = (429, ""), 1
    run = wms(url, "jobs")
    assert run.returncode == 1 and "retrying" not in run.stderr and len(state.seen) == 1
