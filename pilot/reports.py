"""A pilot's job reports, several in one call when its slots report at once.

Each slot reports its job's Running and its end (with the output). With
short jobs on many slots those reports are most of the calls a server
answers, each a request and a transaction of its own there
(docs/benchmarks.md). So the slots' reports go through one sender
thread: a report goes at once when no call is on its way; the reports
made while one is on its way go together in the next call
(``POST /jobs/pilot-status``, at most ``MAX_REPORTS`` and about
``MAX_BYTES`` of body, a larger one alone). A pilot whose slots report
one at a time waits for nothing; a busy one sends fewer calls.

Each report is answered on its own, as the single call answers it: a
refused one raises what ``Client.pilot_status`` would raise (JobLost for
409), and refuses nothing else. A call that fails (the network, the
server's 5xx) fails each of its reports with that error, and each slot
sends its report again as it would have (pilot/runner.py). A server
without the route (404 or 405: older than it) gets one call per report
from then on.

Standard library only, like the rest of the pilot.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from pilot.client import ApiError, Client, ClientError, NetworkError, api_error, status_body

log = logging.getLogger("pilot.reports")

#: The most reports one call carries (the server's limit).
MAX_REPORTS = 64
#: About the most body one call carries: a report larger than this goes alone.
MAX_BYTES = 1 << 20
#: The statuses of a server that has no such route.
NO_ROUTE = (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED)
PATH = "/jobs/pilot-status"


@dataclass
class _Report:
    """One slot's report, and its answer once it comes."""

    job_id: int
    body: dict[str, Any]
    size: int
    done: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] | None = None
    error: BaseException | None = None
    alone: bool = False             # the server has no batch route: the slot sends it itself


class Reports:
    """``reports.status(...)``: ``Client.pilot_status``, in a shared call when others report too."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.batched = True
        self._waiting: list[_Report] = []
        self._ready = threading.Condition()
        self._sender: threading.Thread | None = None

    def status(self, job_id: int, pilot_id: str, status: str, minor_status: str, exit_code: int | None,
               attempt: int | None = None, ended_ago: float | None = None,
               output: tuple[str, str, bool] | None = None) -> dict[str, Any]:
        """The job's report, answered ({"JobID", "Status"}) or raised as the single call raises."""
        if not self.batched:
            return self.client.pilot_status(job_id, pilot_id, status, minor_status, exit_code, attempt,
                                            ended_ago=ended_ago, output=output)
        body = {"job_id": job_id, **status_body(pilot_id, status, minor_status, exit_code, attempt, ended_ago, output)}
        report = _Report(job_id, body, len(json.dumps(body)))
        with self._ready:
            self._waiting.append(report)
            self._ready.notify()
            if self._sender is None:
                self._sender = threading.Thread(target=self._serve, name="reports", daemon=True)
                self._sender.start()
        report.done.wait()
        if report.alone:
            return self.client.pilot_status(job_id, pilot_id, status, minor_status, exit_code, attempt,
                                            ended_ago=ended_ago, output=output)
        if report.error is not None:
            raise report.error
        assert report.answer is not None
        return report.answer

    # -- the sender thread ----------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._waiting:
                    self._ready.wait()
                batch = self._take()
            try:
                self._send(batch)
            except BaseException as exc:    # noqa: BLE001 - a defect here must not leave slots waiting
                log.exception("sending %d report(s) failed", len(batch))
                for report in batch:
                    if not report.done.is_set():
                        report.error = ClientError(f"POST {PATH}: {type(exc).__name__}: {exc}")
                        report.done.set()

    def _take(self) -> list[_Report]:
        """The reports of the next call, oldest first (under ``_ready``)."""
        batch = [self._waiting.pop(0)]
        size = batch[0].size
        while self._waiting and len(batch) < MAX_REPORTS and size + self._waiting[0].size <= MAX_BYTES:
            size += self._waiting[0].size
            batch.append(self._waiting.pop(0))
        return batch

    def _send(self, batch: list[_Report]) -> None:
        try:
            answer = self.client.call("POST", PATH, {"reports": [report.body for report in batch]})
            results = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(results, list) or len(results) != len(batch):
                raise NetworkError(f"POST {PATH}: expected one result per report, got {answer!r:.200}")
        except ClientError as exc:
            no_route = isinstance(exc, ApiError) and exc.status in NO_ROUTE
            if no_route:
                log.info("the server has no %s (%s): one call per report", PATH, exc)
                self.batched = False
            for report in batch:
                if no_route:
                    report.alone = True
                else:
                    report.error = exc
                report.done.set()
            return
        for report, result in zip(batch, results):
            report.answer, report.error = _answer(report.job_id, result)
            report.done.set()


def _answer(job_id: int, result: Any) -> tuple[dict[str, Any] | None, BaseException | None]:
    """One report's result as ``Client.pilot_status`` gives it: the answer, or the error it raises."""
    path = f"/jobs/{job_id}/pilot-status"
    if not isinstance(result, dict) or result.get("JobID") != job_id:
        return None, NetworkError(f"POST {PATH}: the result for job {job_id} is {result!r:.200}")
    refusal = result.get("Error")
    if refusal is None:
        return result, None
    status = refusal.get("Status") if isinstance(refusal, dict) else None
    detail = str(refusal.get("Detail", "")) if isinstance(refusal, dict) else str(refusal)
    if not isinstance(status, int):
        return None, NetworkError(f"POST {PATH}: the refusal for job {job_id} is {refusal!r:.200}")
    return None, api_error(status, detail, "POST", path)
