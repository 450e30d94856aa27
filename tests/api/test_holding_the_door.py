"""Holding the door: clients that open requests and never finish them
(docs/security.md, "Holding the door").

A real `wms server`, with short deadlines in its wms.yaml so that each test
takes seconds. The reproduction: a user sends 64 requests with
``Content-Length: 100000``, 10 bytes of each, then nothing. A request counts
as in progress only while the server works on it, so those hold no place
of the pilots or of other users; a body must come within
``backpressure.body_seconds`` plus a second per ``body_min_rate`` bytes, else
408; headers within ``header_seconds``, else the connection is closed.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import resource
import selectors
import socket
import time
from pathlib import Path

import yaml

from tests.api.pilots import LockedTokens, user_tokens
from tests.api.scraping import scrape
from tests.helpers import patience, wait_until
from tests.pilot.conftest import LOCAL, USERS, jdl, pilot_config
from tests.servers import ServerHandle, Tokens, running_server
from wms.api.backpressure import Backpressure
from wms.api.deadlines import body_deadline
from wms.config.models import BackpressureSettings

REQUEST_JOB = "/api/v1/matcher/request-job"
JOBS = "/api/v1/jobs"
#: What a quick answer is, on a machine that runs other tests at the same time.
PROMPT = 2.0


def door_config(tmp: Path, **backpressure: object) -> Path:
    """The pilots' test configuration with these ``backpressure:`` settings."""
    config = pilot_config(tmp)
    settings = yaml.safe_load((config / "wms.yaml").read_text()) or {}
    settings["backpressure"] = {**settings.get("backpressure", {}), **backpressure}
    (config / "wms.yaml").write_text(yaml.safe_dump(settings))
    return config


def connect(server: ServerHandle) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=patience(30))


def head(method: str, path: str, token: str, length: int) -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: wms\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


def stalled_body(server: ServerHandle, token: str, length: int = 100000, sent: int = 10) -> socket.socket:
    """A submission announcing ``length`` bytes of body and sending ``sent`` of them, then nothing."""
    sock = connect(server)
    sock.sendall(head("POST", JOBS, token, length) + b'{"jdls": [{"text": "' [:sent])
    return sock


def answer(sock: socket.socket, timeout: float) -> tuple[int, dict[str, str], dict]:
    """The status, headers and JSON body of the answer on ``sock``."""
    sock.settimeout(timeout)
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(body) if body else {}


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """True when the server closes ``sock`` (after any answer) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def answered(socks: list[socket.socket], timeout: float) -> list[socket.socket]:
    """The sockets among ``socks`` the server has written to (or closed) within ``timeout`` seconds.
    (epoll, not select(): with a thousand sockets open the numbers pass select's 1,024.)"""
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        return [key.fileobj for key, _ in selector.select(timeout)]  # type: ignore[misc]


def pilot_request(pilot_id: str) -> dict:
    site, ce, queue = LOCAL
    return {"site": site, "ce": ce, "queue": queue, "host": pilot_id, "pilot_id": pilot_id,
            "pools": ["no-such-pool"], "slots": 1}


def served_promptly(server: ServerHandle, tokens: Tokens, pilot_id: str | None, user: str) -> None:
    """A pilot's request for a job and a user's list of jobs, each answered (not 429) in PROMPT seconds."""
    if pilot_id is not None:
        with server.api(tokens[pilot_id]) as api:
            started = time.monotonic()
            response = api.post("/matcher/request-job", json=pilot_request(pilot_id))
            took = time.monotonic() - started
        assert response.status_code == 200, response.text
        assert response.json()["match"] is False and took < patience(PROMPT), took
    with server.api(tokens[user]) as api:
        started = time.monotonic()
        response = api.get("/jobs")
        took = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert took < patience(PROMPT), took


def test_a_body_has_its_seconds_and_a_second_more_per_min_rate_bytes():
    settings = BackpressureSettings(body_seconds=20, body_min_rate=500)
    assert body_deadline(100.0, 0, settings) == 120.0
    assert body_deadline(100.0, 10, settings) == 120.02
    assert body_deadline(100.0, 100000, settings) == 320.0


def test_stalled_bodies_keep_neither_the_pilots_nor_other_users_out(tmp_path):
    """The reproduction: 64 requests of one user with 10 bytes of a 100000-byte
    body. The 16 a caller may send at once wait for their bodies (holding no
    place), the 48 others are refused at once; a pilot, another user and the
    same user are served meanwhile; then the 16 get 408."""
    config = door_config(tmp_path, body_seconds=4, body_min_rate=500)
    with running_server(tmp_path, config, tokens=USERS) as server:
        tokens = Tokens(server)
        tokens["door-pilot"]                                      # made before the door is held
        # His token known to the server: each request then waits for its body at once,
        # holding no place (one that arrived while the token was read would count).
        served_promptly(server, tokens, "door-pilot", "roland")
        held = [stalled_body(server, tokens["roland"]) for _ in range(64)]
        try:
            refused = answered(held, patience(5))
            deadline = time.monotonic() + patience(5)
            while len(refused) < 48 and time.monotonic() < deadline:
                refused = answered(held, 0.2)
            assert len(refused) == 48
            for sock in refused:
                status, headers, body = answer(sock, patience(5))
                assert (status, headers["retry-after"]) == (429, "5")
                assert body["detail"] == ("too many requests at once: this token is sending 16 request bodies "
                                          "to this process, the most one may (backpressure.bodies_per_identity); "
                                          "retry after 5 s")
            waiting = [sock for sock in held if sock not in refused]

            served_promptly(server, tokens, "door-pilot", "alice")
            served_promptly(server, tokens, "door-pilot", "roland")    # his stalled bodies hold no place either

            for sock in waiting:
                status, headers, body = answer(sock, patience(10))
                assert (status, headers["connection"]) == (408, "close")
                assert body["detail"].startswith("request body too slow: 10 of 100000 bytes received in 4.")
        finally:
            for sock in held:
                sock.close()


def test_a_thousand_stalled_sockets_leave_the_pilots_served(tmp_path):
    """One user holds 1,000 connections: 400 bodies stalled, 300 requests
    whose headers stop half-way, 300 connections that send nothing. Pilots
    and another user are answered as promptly as ever."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    config = door_config(tmp_path, header_seconds=60, body_seconds=60)
    with running_server(tmp_path, config, tokens=USERS) as server:
        tokens = Tokens(server)
        served_promptly(server, tokens, "door-pilot", "roland")
        socks: list[socket.socket] = []
        try:
            socks += [stalled_body(server, tokens["roland"]) for _ in range(400)]
            for _ in range(300):
                sock = connect(server)
                sock.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: wms\r\nAuthorization: Bea")
                socks.append(sock)
            socks += [connect(server) for _ in range(300)]
            time.sleep(1)                                             # all of them accepted and read
            for _ in range(5):
                served_promptly(server, tokens, "door-pilot", "alice")
            # Nothing of the held ones was answered but the bodies over the user's 16.
            assert len(answered(socks[16:400], 0)) == 400 - 16
            assert answered(socks[400:], 0) == []
        finally:
            for sock in socks:
                sock.close()


def test_a_stalled_body_is_answered_408_by_its_deadline(tmp_path):
    config = door_config(tmp_path, body_seconds=1, body_min_rate=500)
    with running_server(tmp_path, config, tokens=USERS) as server:
        tokens = Tokens(server)
        with stalled_body(server, tokens["roland"]) as sock:
            started = time.monotonic()
            status, headers, body = answer(sock, patience(10))
            took = time.monotonic() - started
            assert (status, headers["connection"]) == (408, "close")
            assert 1.0 <= took < patience(1.0 + PROMPT), took
            assert body["detail"] == (
                "request body too slow: 10 of 100000 bytes received in 1.0 s; a body has 1 s "
                "(backpressure.body_seconds) and 1 s more for every 500 bytes received (backpressure.body_min_rate)")
            assert closed_by_server(sock, patience(5))
        served_promptly(server, tokens, "door-pilot", "roland")


def trickle(server: ServerHandle, token: str, body: bytes, piece: int, every: float) -> tuple[int, dict, float]:
    """POST ``body`` as a submission, ``piece`` bytes every ``every`` seconds: the status, answer and time taken."""
    with connect(server) as sock:
        started = time.monotonic()
        sock.sendall(head("POST", JOBS, token, len(body)))
        for k in range(0, len(body), piece):
            sock.sendall(body[k:k + piece])
            if answered([sock], every):                               # answered before the end
                break
        status, _, answer_body = answer(sock, patience(10))
        return status, answer_body, time.monotonic() - started


def padded_submission(size: int) -> bytes:
    """A valid submission of one job, ``size`` bytes long (a long job name)."""
    base = json.dumps({"jdls": [{"text": jdl("true", 'JobName = "%s";')}]})
    name = "x" * (size - len(base) + 2)
    body = json.dumps({"jdls": [{"text": jdl("true", f'JobName = "{name}";')}]}).encode()
    assert abs(len(body) - size) < 16
    return body


def test_a_slow_but_steady_body_is_accepted_and_one_below_the_rate_is_not(tmp_path):
    """body_seconds 1 and 500 bytes/s: 3,000 bytes at 1,000 bytes/s take 3 s,
    and are accepted (their deadline, 1 + 3000/500 = 7 s, is never reached);
    at 200 bytes/s the deadline (1 + 200 t / 500) passes at about 1.7 s."""
    config = door_config(tmp_path, body_seconds=1, body_min_rate=500)
    with running_server(tmp_path, config, tokens=USERS) as server:
        tokens = Tokens(server)
        body = padded_submission(3000)
        status, answer_body, took = trickle(server, tokens["roland"], body, 100, 0.1)
        assert status == 201, answer_body
        # the answer comes as the last piece arrives: 29 pauses of 0.1 s before it
        assert len(answer_body["job_ids"]) == 1 and took >= 0.1 * (len(body) // 100 - 1)
        status, answer_body, took = trickle(server, tokens["roland"], body, 50, 0.25)
        assert status == 408, answer_body
        assert answer_body["detail"].startswith("request body too slow: ")
        assert 1.5 <= took < patience(1.7 + PROMPT), took


def test_headers_sent_a_byte_at_a_time_are_cut_off(tmp_path):
    """Slowloris: headers one byte every 0.2 s are answered 408 once header_seconds
    have passed, on a new connection as on a kept-alive one; a connection that
    sends nothing is closed."""
    config = door_config(tmp_path, header_seconds=1)
    with running_server(tmp_path, config, tokens=USERS) as server:
        tokens = Tokens(server)
        request = head("GET", JOBS, tokens["roland"], 0)

        def slowly(sock: socket.socket, started: float | None = None) -> tuple[int, dict, float]:
            started = time.monotonic() if started is None else started
            for byte in request:
                sock.sendall(bytes([byte]))
                if answered([sock], 0.2):                          # the server has had enough
                    break
            status, _, body = answer(sock, patience(5))
            return status, body, time.monotonic() - started

        # A new connection's clock starts when the server accepts it: time it from before the connect.
        before_connect = time.monotonic()
        with connect(server) as sock:
            status, body, took = slowly(sock, before_connect)
            assert (status, body) == (408, {"detail": "request headers not received within 1 s "
                                                      "(backpressure.header_seconds)"})
            assert 1.0 <= took < patience(1.0 + PROMPT), took
            assert closed_by_server(sock, patience(5))

        with connect(server) as sock:                              # kept alive after a first answer
            sock.sendall(request)
            assert answer(sock, patience(10))[0] == 200
            status, body, took = slowly(sock)
            assert status == 408 and 1.0 <= took < patience(1.0 + PROMPT), (status, took)

        with connect(server) as sock:                              # an idle connection
            started = time.monotonic()
            assert closed_by_server(sock, patience(10))
            assert 1.0 <= time.monotonic() - started < patience(1.0 + PROMPT)


def test_a_token_over_its_share_is_refused_on_a_real_server_while_another_is_served(database_factory, tmp_path):
    """max_in_flight 8, identity_share 0.25: a share of 2. A token the server
    has not read yet sends two lists of jobs while the tokens table is locked:
    both wait, in progress; its third is refused 429 at once, while another
    user's list is answered. Unlocked, the two are answered."""
    database_url = database_factory("postgresql")
    config = door_config(tmp_path, max_in_flight=8, identity_share=0.25)
    yaml_path = config / "wms.yaml"
    settings = yaml.safe_load(yaml_path.read_text())
    settings["limits"] = {**settings.get("limits", {}), "statement_timeout": 0}   # the two wait for the lock
    yaml_path.write_text(yaml.safe_dump(settings))
    with running_server(tmp_path, config, tokens=USERS, database_url=database_url) as server:
        tokens = Tokens(server)
        served_promptly(server, tokens, "door-pilot", "alice")     # alice's token known to the server
        [greedy] = user_tokens(database_url, 1)
        lock = LockedTokens(database_url)
        waiting = []
        try:
            for _ in range(2):
                sock = connect(server)
                sock.sendall(head("GET", JOBS, greedy, 0))
                waiting.append(sock)
            wait_until(lambda: scrape(server.url).value("wms_http_requests_in_flight") > 2, timeout=30,
                       what="the two requests in progress")
            with server.api(greedy) as api:
                refused = api.get("/jobs")
            assert (refused.status_code, refused.headers["retry-after"]) == (429, "5")
            assert refused.json()["detail"] == (
                "server busy for you: this token has 2 requests in progress in this process, its share of 8 "
                "(backpressure.identity_share 0.25); retry after 5 s")
            served_promptly(server, tokens, None, "alice")      # (a pilot's claim would wait for the lock too)
            lock.unlock()
            assert [answer(sock, patience(30))[0] for sock in waiting] == [200, 200]
        finally:
            lock.unlock()
            for sock in waiting:
                sock.close()


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Bearer " + token.encode())]


def held_until(release: asyncio.Event):
    """An app that answers 200 once ``release`` is set: its requests stay in progress until then."""

    async def held(scope, receive, send) -> None:
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return held


async def ask(door: Backpressure, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict, bytes]:
    """One GET through ``door`` from 127.0.0.1: its status, headers and body."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "method": "GET", "headers": headers, "client": ("127.0.0.1", 1)}
    await door(scope, receive, send)
    return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]


def test_a_caller_over_its_share_is_refused_while_another_is_served():
    """max_in_flight 8, identity_share 0.25: one token holds 2 requests in
    progress; its third is refused 429, another token's is served; when
    one of the first two ends, the token is served again."""

    async def scenario() -> None:
        release = asyncio.Event()
        door = Backpressure(held_until(release), BackpressureSettings(max_in_flight=8, identity_share=0.25,
                                                                      retry_after=3))

        async def call(headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[bytes, bytes], bytes]:
            return await ask(door, JOBS, headers)

        greedy = [asyncio.create_task(call(bearer("greedy"))) for _ in range(2)]
        await asyncio.sleep(0)
        status, headers, body = await call(bearer("greedy"))
        assert (status, headers[b"retry-after"]) == (429, b"3")
        assert json.loads(body)["detail"] == (
            "server busy for you: this token has 2 requests in progress in this process, its share of 8 "
            "(backpressure.identity_share 0.25); retry after 3 s")
        # The scheme's spelling or spaces do not make another caller of the same token.
        assert (await call([(b"authorization", b"bearer   greedy ")]))[0] == 429
        other = asyncio.create_task(call(bearer("other")))
        await asyncio.sleep(0)
        assert door.in_flight == 3 and door.held == {("token", b"greedy"): 2, ("token", b"other"): 1}
        release.set()
        assert [(await t)[0] for t in [*greedy, other]] == [200, 200, 200]
        assert door.in_flight == 0 and door.held == {}

    asyncio.run(scenario())


def test_a_pilot_at_its_share_still_reports_its_jobs_up_to_twice_the_share():
    """max_in_flight 8, identity_share 0.25: a share of 2. A pilot with two
    job requests in progress is refused a third, but its jobs' reports get
    through up to twice the share; the fifth is refused, saying so."""

    async def scenario() -> None:
        release = asyncio.Event()
        door = Backpressure(held_until(release), BackpressureSettings(max_in_flight=8, identity_share=0.25,
                                                                      retry_after=3))
        pilot = bearer("pilot")
        asking = [asyncio.create_task(ask(door, REQUEST_JOB, pilot)) for _ in range(2)]
        await asyncio.sleep(0)
        assert (await ask(door, REQUEST_JOB, pilot))[0] == 429
        reports = [asyncio.create_task(ask(door, f"/api/v1/jobs/{n}/{kind}", pilot))
                   for n, kind in ((1, "pilot-status"), (2, "heartbeat"))]
        await asyncio.sleep(0)
        assert door.held == {("token", b"pilot"): 4}
        status, _, body = await ask(door, "/api/v1/jobs/3/output", pilot)
        assert status == 429 and json.loads(body)["detail"] == (
            "server busy for you: this token has 4 requests in progress in this process, its share of 8 "
            "(backpressure.identity_share 0.25, twice that for the reports of running jobs); retry after 3 s")
        assert (await ask(door, JOBS, pilot))[0] == 429          # a user's command: the share, as before
        release.set()
        assert [(await t)[0] for t in [*asking, *reports]] == [200] * 4

    asyncio.run(scenario())


def test_the_consoles_files_are_never_refused_for_a_callers_share():
    """A browser fetches the console's modules a dozen at once without a
    token; every person behind one proxy address is one caller. Served
    all, whatever the share (a share of 2 here)."""

    async def scenario() -> None:
        release = asyncio.Event()
        door = Backpressure(held_until(release), BackpressureSettings(max_in_flight=8, identity_share=0.25,
                                                                      retry_after=3))

        async def fetch(path: str) -> int:
            return (await ask(door, path, []))[0]

        files = [asyncio.create_task(fetch(f"/ui/pages/{n}.js")) for n in range(12)]
        files.append(asyncio.create_task(fetch("/ui")))
        await asyncio.sleep(0)
        assert door.held == {}                                    # none counted against the address
        release.set()
        assert [await f for f in files] == [200] * 13

    asyncio.run(scenario())
