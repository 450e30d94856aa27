"""A small JSON-over-HTTP client for the Matcher and job-status API.

Standard library only; each thread keeps its connection to the server
(pilot/connections.py). Every call sends ``Authorization: Bearer``;
an HTTP error becomes :class:`ApiError` carrying the server's one-line
``detail``; HTTP 409 on a job call becomes :class:`JobLost` because the
contract gives it one meaning: the job is no longer this pilot's.

Transient failures (connection refused or reset, time-outs, HTTP 429 and
5xx) are retried with exponential back-off and jitter, then raised as
:class:`NetworkError`. Callers catch :class:`ClientError` and carry on: one
failed call must never bring the pilot down.

A busy server (HTTP 429 or 503 with ``Retry-After``, docs/deployment.md
"Backpressure") is not a failure: the pilot waits what it is told, plus
jitter (pilot/backoff.py), and asks again, without using up its retries,
for up to ``busy_patience`` seconds in all.

A retried ``request-job`` (or ``request-jobs``) whose first attempt did reach the server may
leave a claimed job behind; the Matcher's lease returns it to Waiting, so
retrying is still the better trade than losing the slot.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import time
import urllib.error
import urllib.parse
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, BinaryIO

from pilot.backoff import busy_delay, retry_after
from pilot.connections import Connections

API_PREFIX = "/api/v1"
DEFAULT_URL = "http://127.0.0.1:8080"
#: The most jobs one request-jobs call may ask for (the server's limit).
MAX_BATCH = 64

log = logging.getLogger("pilot.client")


# The statuses of a server shedding load, when they carry Retry-After.
BUSY = (HTTPStatus.TOO_MANY_REQUESTS, HTTPStatus.SERVICE_UNAVAILABLE)


class ClientError(Exception):
    """Any failed call; the pilot logs it and goes on."""


class ApiError(ClientError):
    """The server answered with an HTTP error status."""

    def __init__(self, status: int, detail: str, method: str = "", path: str = "") -> None:
        self.status = status
        self.detail = detail
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}HTTP {status}: {detail}")


class JobLost(ApiError):
    """HTTP 409 on a job call: stop the job and report nothing more."""


class NetworkError(ClientError):
    """The server could not be reached (after retries) or answered garbage."""


def _detail(body: bytes, fallback: str) -> str:
    """The ``detail`` of an error body, as one line."""
    try:
        data = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return text.splitlines()[0][:500] if text else fallback
    detail = data.get("detail", fallback) if isinstance(data, dict) else data
    if not isinstance(detail, str):
        # FastAPI validation errors carry a list of objects.
        detail = json.dumps(detail, separators=(",", ":"))
    return " ".join(detail.split()) or fallback


def api_error(status: int, detail: str, method: str, path: str) -> ApiError:
    """The error an answer's status raises: JobLost for a 409 on a job's call, else ApiError."""
    cls = JobLost if status == HTTPStatus.CONFLICT and path.startswith("/jobs/") else ApiError
    return cls(status, detail, method, path)


def status_body(pilot_id: str, status: str, minor_status: str, exit_code: int | None, attempt: int | None,
                ended_ago: float | None = None, output: tuple[str, str, bool] | None = None) -> dict[str, Any]:
    """A job's status report as the API takes it (POST /jobs/{id}/pilot-status)."""
    body: dict[str, Any] = {"pilot_id": pilot_id, "status": status, "minor_status": minor_status,
                            "exit_code": exit_code, "attempt": attempt}
    if ended_ago is not None:
        body["ended_ago"] = round(ended_ago, 3)
    if output is not None:
        body["output"] = {"stdout": output[0], "stderr": output[1], "truncated": output[2]}
    return body


class Client:
    """The pilot's view of the API: one method per endpoint of the contract."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 1.0,
        busy_patience: float = 600.0,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        base = url.rstrip("/")
        # Accept both http://host:8080 and http://host:8080/api/v1.
        self.base = base if base.endswith(API_PREFIX) else base + API_PREFIX
        self.token = token
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self.busy_patience = busy_patience
        self.sleep = sleep
        self.connections = Connections(self.base)

    # -- transport ---------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None, *,
             raw: BinaryIO | None = None, headers: Mapping[str, str] | None = None,
             sink: Callable[[Any], Any] | None = None, retries: int | None = None,
             timeout: float | None = None, busy_patience: float | None = None) -> Any:
        """One call with retries; returns the decoded JSON body.

        ``raw``: a file sent as the body instead of JSON (rewound for each
        try); ``sink``: given the response instead of decoding it (a
        download), its result returned. ``retries``, ``timeout`` and
        ``busy_patience`` override the client's for this call."""
        retries = self.retries if retries is None else max(0, retries)
        timeout = self.timeout if timeout is None else timeout
        busy_patience = self.busy_patience if busy_patience is None else busy_patience
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        sent = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        elif raw is not None:
            sent["Content-Type"] = "application/octet-stream"
            sent["Content-Length"] = str(os.fstat(raw.fileno()).st_size)
        target = urllib.parse.urlsplit(url)._replace(scheme="", netloc="").geturl()
        attempt = 0
        busy_waited = 0.0
        while True:
            try:
                answer = self.connections.send(method, url, target, raw if raw is not None else data, sent, timeout)
                try:
                    status = answer.status
                    if status < 300:
                        if sink is not None:
                            return sink(answer)
                        content = answer.read()
                        return json.loads(content) if content else None
                    detail = _detail(answer.read() or b"", getattr(answer, "reason", "") or f"HTTP {status}")
                    retry_header = answer.headers.get("Retry-After")
                except BaseException:
                    self.connections.close()      # cut off mid-answer: the connection can carry nothing more
                    raise
                finally:
                    self.connections.finished(answer)
                transient = status == HTTPStatus.TOO_MANY_REQUESTS or status >= 500
                if not transient:
                    raise api_error(status, detail, method, path) from None
                error: ClientError = ApiError(status, detail, method, path)
                asked = retry_after(retry_header) if status in BUSY else None
                if asked is not None:
                    delay = busy_delay(asked)
                    if busy_waited + delay <= busy_patience:
                        log.info("%s %s: server busy (HTTP %d), asking again in %.1f s", method, path, status, delay)
                        self.sleep(delay)
                        busy_waited += delay
                        continue
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                error = NetworkError(f"{method} {path}: {reason or type(exc).__name__}")
            except ValueError as exc:  # a body that is not JSON: not worth retrying
                raise NetworkError(f"{method} {path}: bad JSON answer: {exc}") from None
            if attempt >= retries:
                raise error
            delay = self.backoff * (2**attempt) * (0.5 + random.random())
            log.warning("%s; retry %d/%d in %.1f s", error, attempt + 1, retries, delay)
            self.sleep(delay)
            attempt += 1

    # -- the contract ------------------------------------------------------

    def submit_pools(self, site: str, ce: str, queue: str) -> list[str]:
        """getSubmitPoolsForQueue: the pools a pilot of this queue serves."""
        answer = self.call("GET", "/matcher/submit-pools", query={"site": site, "ce": ce, "queue": queue})
        if not isinstance(answer, list):
            raise NetworkError(f"GET /matcher/submit-pools: expected a list, got {type(answer).__name__}")
        return [str(p) for p in answer]

    def request_job(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Ask for one job; ``{"match": false, "reason"}`` or ``{"match": true, "job"}``."""
        answer = self.call("POST", "/matcher/request-job", dict(body))
        if not isinstance(answer, dict):
            raise NetworkError("POST /matcher/request-job: expected an object")
        return answer

    def request_jobs(self, body: Mapping[str, Any], count: int) -> dict[str, Any]:
        """Ask for up to ``count`` jobs at once (a multi-slot pilot): ``{"jobs": [job, ...],
        "reason"}``. A server older than the route answers 404 (:class:`ApiError`)."""
        answer = self.call("POST", "/matcher/request-jobs", {**body, "count": count})
        if not isinstance(answer, dict) or not isinstance(answer.get("jobs"), list):
            raise NetworkError("POST /matcher/request-jobs: expected an object with a list of jobs")
        return answer

    # Every job call quotes the attempt (the job's hand-out) when known: the
    # server refuses those of an attempt that is over (HTTP 409).

    def pilot_status(
        self, job_id: int, pilot_id: str, status: str, minor_status: str, exit_code: int | None,
        attempt: int | None = None, ended_ago: float | None = None,
        output: tuple[str, str, bool] | None = None,
    ) -> dict[str, Any]:
        """A job's status; at its end with its ``output`` (stdout, stderr,
        truncated), stored with the status in one call. A server that does not
        take the output there (HTTP 422) gets it as two calls, output first."""
        body = status_body(pilot_id, status, minor_status, exit_code, attempt, ended_ago)
        if output is None:
            return self.call("POST", f"/jobs/{job_id}/pilot-status", body)
        stdout, stderr, truncated = output
        try:
            return self.call("POST", f"/jobs/{job_id}/pilot-status",
                             status_body(pilot_id, status, minor_status, exit_code, attempt, ended_ago, output))
        except ApiError as exc:
            # An older server names the field it does not know: "output: Extra inputs are not permitted".
            if exc.status != 422 or not exc.detail.startswith("output:"):
                raise
        log.info("the server takes no output with a job's status (HTTP 422): sending it first")
        self.output(job_id, pilot_id, stdout, stderr, truncated, attempt)
        return self.call("POST", f"/jobs/{job_id}/pilot-status", body)

    def renew_token(self, pilot_id: str, declaration: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Renew this pilot's token (pilot/credentials.py): ``ExpiresIn`` seconds, null for no end.
        ``declaration``: the pilot's slots and isolation; a server that does
        not know them (HTTP 422) is asked again without."""
        body: dict[str, Any] = {"pilot_id": pilot_id, **(declaration or {})}
        try:
            answer = self.call("POST", "/pilots/token/renew", body)
        except ApiError as exc:
            if exc.status != 422 or not declaration:
                raise
            log.info("the server takes no pilot declaration (HTTP 422): renewing without")
            answer = self.call("POST", "/pilots/token/renew", {"pilot_id": pilot_id})
        return answer if isinstance(answer, dict) else {}

    def heartbeat(self, job_id: int, pilot_id: str, attempt: int | None = None, *,
                  timeout: float | None = None) -> dict[str, Any]:
        """One try, no waiting out a busy server: the next heartbeat is the retry,
        and the job's lease (pilot/leases.py) says how long to keep trying."""
        answer = self.call("POST", f"/jobs/{job_id}/heartbeat", {"pilot_id": pilot_id, "attempt": attempt},
                           retries=0, timeout=timeout, busy_patience=0)
        return answer if isinstance(answer, dict) else {}

    def output(self, job_id: int, pilot_id: str, stdout: str, stderr: str, truncated: bool,
               attempt: int | None = None) -> Any:
        body = {"pilot_id": pilot_id, "stdout": stdout, "stderr": stderr, "truncated": truncated,
                "attempt": attempt}
        return self.call("POST", f"/jobs/{job_id}/output", body)


    # -- sandboxes (pilot/sandboxes.py) ---------------------------------------

    def sandbox(self, job_id: int, pilot_id: str, attempt: int | None = None) -> dict[str, Any]:
        """The job's input files (name, size, sha256) and its OutputSandbox entries."""
        answer = self.call("GET", f"/jobs/{job_id}/sandbox", query={"pilot_id": pilot_id, "attempt": attempt})
        if not isinstance(answer, dict):
            raise NetworkError(f"GET /jobs/{job_id}/sandbox: expected an object")
        return answer

    def download_input(self, job_id: int, pilot_id: str, name: str, target: BinaryIO,
                       attempt: int | None = None) -> None:
        """One input file of the job into ``target`` (truncated first at every try)."""
        def copy(response: Any) -> None:
            target.seek(0)
            target.truncate()
            while piece := response.read(1 << 16):
                target.write(piece)

        self.call("GET", f"/jobs/{job_id}/sandbox/input/{urllib.parse.quote(name, safe='')}",
                  query={"pilot_id": pilot_id, "attempt": attempt}, sink=copy)

    def upload_output(self, job_id: int, pilot_id: str, name: str, source: BinaryIO, sha256: str,
                      attempt: int | None = None) -> Any:
        """One file of the job's output sandbox."""
        return self.call("PUT", f"/jobs/{job_id}/sandbox/output/{urllib.parse.quote(name, safe='')}",
                         query={"pilot_id": pilot_id, "attempt": attempt}, raw=source,
                         headers={"X-Content-SHA256": sha256})
