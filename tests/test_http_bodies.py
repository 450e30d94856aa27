"""Answers of servers we do not run are read up to a limit (wms/http_bodies.py),
against a real HTTP server on loopback that sends without end."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from wms.http_bodies import TooLarge, read_limited
from wms.services.oidc import FetchFailed, fetch_json


class Endless(BaseHTTPRequestHandler):
    """A JSON object of ``/SIZE`` bytes, or one that never ends for ``/endless``."""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        endless = self.path == "/endless"
        if not endless:
            self.send_header("Content-Length", self.path.strip("/"))
        self.end_headers()
        try:
            if endless:
                self.wfile.write(b'{"keys": "')
                while True:
                    self.wfile.write(b"x" * 65536)
            size = int(self.path.strip("/"))
            self.wfile.write(b'{"k": "' + b"x" * (size - 9) + b'"}')
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_an_answer_within_the_limit_is_read_whole(server):
    with httpx.Client() as client, client.stream("GET", f"{server}/1000") as answer:
        body = read_limited(answer, 1000)
    assert len(body) == 1000 and body.startswith(b'{"k": "')


def test_an_endless_answer_is_cut_at_the_limit(server):
    with httpx.Client() as client, client.stream("GET", f"{server}/endless") as answer:
        with pytest.raises(TooLarge, match="an answer of more than 100000 bytes"):
            read_limited(answer, 100_000)


def test_an_identity_providers_document_past_its_limit_is_refused(server, monkeypatch):
    import wms.services.oidc as oidc

    monkeypatch.setattr(oidc, "MAX_DOCUMENT_BYTES", 4096)
    assert fetch_json(f"{server}/4000", timeout=10)["k"].startswith("xxx")
    for path in ("/5000", "/endless"):
        with pytest.raises(FetchFailed, match=f"{server}{path} sent more than 4096 bytes"):
            fetch_json(f"{server}{path}", timeout=10)
