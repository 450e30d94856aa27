"""A real HTTP server speaking the pilot's side of the API contract.

Stands in for the Matcher until it exists: it hands out scripted jobs,
records every request, and answers heartbeats and status calls as the
test asks. Standard library only, run in a thread on a free port.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

TOKEN = "pilot-token"


class ContractServer:
    """Scripted answers; every call lands in ``self.calls`` as (time, method, path, query, body)."""

    def __init__(self, jobs: list[dict[str, Any]] | None = None, pools: list[str] | None = None) -> None:
        self.jobs = list(jobs or [])
        self.pools = ["pool-a", "pool-b"] if pools is None else pools
        self.calls: list[tuple[float, str, str, dict[str, list[str]], Any]] = []
        self.kill: set[int] = set()
        self.matched: list[tuple[int, int]] = []  # (slots offered, JobID handed out)
        self.conflict: set[int] = set()
        self.fail_next: list[int] = []  # HTTP statuses to answer before behaving
        self.hook: Callable[[str, str, Any], None] | None = None
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _answer(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with server.lock:
                    server.calls.append((time.monotonic() - server.t0, method, url.path, parse_qs(url.query), body))
                    fail = server.fail_next.pop(0) if server.fail_next else None
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._answer(401, {"detail": "Invalid or missing token"})
                if fail:
                    return self._answer(fail, {"detail": f"scripted {fail}"})
                if server.hook:
                    server.hook(method, url.path, body)
                code, answer = server.route(method, url.path, body)
                self._answer(code, answer)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/api/v1/matcher/submit-pools":
            return 200, self.pools
        if method == "POST" and path == "/api/v1/matcher/request-job":
            with self.lock:
                if not self.jobs:
                    return 200, {"match": False, "reason": "no job in the pools"}
                if self.jobs[0].get("Slots", 1) > (body or {}).get("slots", 1):
                    # As the real Matcher: a job never gets more slots than offered.
                    return 200, {"match": False, "reason": "not enough free slots"}
                job = self.jobs.pop(0)
            self.matched.append(((body or {}).get("slots", 1), job["JobID"]))
            return 200, {"match": True, "job": job}
        m = re.fullmatch(r"/api/v1/jobs/(\d+)/(pilot-status|heartbeat|output)", path)
        if method == "POST" and m:
            job_id, what = int(m.group(1)), m.group(2)
            if job_id in self.conflict:
                return 409, {"detail": f"Job {job_id} is not assigned to this pilot"}
            if what == "heartbeat":
                return 200, {"Status": "Running", "Kill": job_id in self.kill}
            if what == "pilot-status":
                return 200, {"JobID": job_id, "Status": body["status"]}
            return 200, {"JobID": job_id}
        return 404, {"detail": "Not Found"}

    # -- views for assertions ----------------------------------------------

    def bodies(self, path_suffix: str) -> list[Any]:
        with self.lock:
            return [c[4] for c in self.calls if c[2].endswith(path_suffix)]

    def statuses(self, job_id: int) -> list[tuple[str, str, int | None]]:
        return [(b["status"], b["minor_status"], b["exit_code"]) for b in self.bodies(f"/jobs/{job_id}/pilot-status")]

    def times(self, path_suffix: str) -> list[float]:
        with self.lock:
            return [c[0] for c in self.calls if c[2].endswith(path_suffix)]

    def __enter__(self) -> ContractServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def job(job_id: int, script: str, *, slots: int = 1, h_rt: float | None = None, env: dict | None = None) -> dict:
    """A matched job in the contract's shape, running ``/bin/sh -c script``."""
    from shlex import quote

    return {
        "JobID": job_id, "JDL": "[]", "Executable": "/bin/sh", "Arguments": f"-c {quote(script)}",
        "Slots": slots, "Lease": 300, "Limits": {"h_rt": h_rt, "s_rt": None, "cpu_time": None},
        "Environment": env or {},
    }
