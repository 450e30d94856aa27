"""The pilot keeps its connection to the server between calls (pilot/connections.py),
against a real ``wms server`` behind a forwarder that counts the connections made."""

from __future__ import annotations

import threading
import time

import pytest

import pilot.connections
from pilot.client import Client
from tests.faults.netcuts import Forwarder
from tests.helpers import patience
from tests.pilot.conftest import LOCAL


@pytest.fixture
def counted(server):
    """The server's address behind a forwarder that counts the connections it accepts."""
    host, port = server.url.split("//", 1)[1].rsplit(":", 1)
    forwarder = Forwarder(target=(host, int(port.split("/")[0]))).start()
    yield forwarder
    forwarder.stop()


def client(forwarder: Forwarder, token: str) -> Client:
    return Client(f"http://127.0.0.1:{forwarder.port}", token, timeout=patience(30), sleep=lambda s: None)


def test_a_pilot_makes_its_calls_on_one_connection(counted, tokens):
    c = client(counted, tokens["pilot"])
    for _ in range(20):
        assert c.submit_pools(*LOCAL) is not None
    with pytest.raises(Exception, match="HTTP 404"):      # an error answer keeps the connection too
        c.call("GET", "/no/such/route", retries=0)
    c.submit_pools(*LOCAL)
    assert (counted.accepted, c.connections.opened) == (1, 1)


def test_each_thread_has_its_own_connection(counted, tokens):
    c = client(counted, tokens["pilot"])
    threads = [threading.Thread(target=lambda: [c.submit_pools(*LOCAL) for _ in range(5)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counted.accepted == c.connections.opened == 3


def test_a_connection_idle_past_the_servers_keep_alive_is_opened_anew(counted, tokens, monkeypatch):
    """The server (uvicorn) closes a connection idle for 5 s. A pilot that
    waits longer opens a new one; one that reuses the closed connection
    anyway (here: told it may keep it for a minute) sends its call again on a
    new one, and the call succeeds without a retry."""
    c = client(counted, tokens["pilot"])
    c.submit_pools(*LOCAL)
    time.sleep(pilot.connections.KEEP_IDLE + 0.5)
    c.submit_pools(*LOCAL)
    assert counted.accepted == 2
    monkeypatch.setattr(pilot.connections, "KEEP_IDLE", 60.0)
    time.sleep(6.0)                                         # past uvicorn's timeout_keep_alive
    c = Client(c.base, c.token, retries=0, timeout=patience(30))
    c.submit_pools(*LOCAL)
    time.sleep(6.0)
    assert c.submit_pools(*LOCAL) is not None               # retries=0: the resend is not a retry
    assert c.connections.opened == 2


def test_an_answer_not_read_to_its_end_gives_its_connection_up(counted, tokens):
    c = client(counted, tokens["pilot"])
    first = c.call("GET", "/matcher/submit-pools", query=dict(zip(("site", "ce", "queue"), LOCAL)),
                   sink=lambda answer: answer.read(1))
    assert first == b"["
    assert c.submit_pools(*LOCAL) is not None
    assert (counted.accepted, c.connections.opened) == (2, 2)
