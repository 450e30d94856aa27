"""A pilot's status reports, one job at a time or several in one call.

A pilot of several slots reports a job's Running and its end for each of
its slots; with short jobs those reports are most of the calls a server
answers. ``report_statuses`` takes the reports of one call as
``leases.pilot_statuses`` takes them: each is taken or refused as it
would be alone (the same holder check, the same refusals), and the ones
taken are recorded in one transaction. What it saves is a request and a
transaction a report (docs/benchmarks.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wms.core.errors import WmsError
from wms.core.identity import Identity
from wms.core.states import JobStatus
from wms.services import leases, rescheduling
from wms.services.leases import StatusReport
from wms.services.runtime import Runtime

__all__ = ["StatusReport", "report_status", "report_statuses"]


def report_status(runtime: Runtime, identity: Identity, report: StatusReport, now: datetime) -> dict[str, Any]:
    """One report: ``{"JobID", "Status"}``, or the refusal raised."""
    [answer] = _taken(runtime, identity, [report], now)
    if isinstance(answer, WmsError):
        raise answer
    return answer


def report_statuses(runtime: Runtime, identity: Identity, reports: list[StatusReport],
                    now: datetime) -> list[dict[str, Any]]:
    """Each report recorded or refused on its own, answered in order: ``{"JobID",
    "Status"}``, or ``{"JobID", "Error": {"Status", "Detail"}}`` with the HTTP
    status and the reason the single call answers."""
    return [answer if not isinstance(answer, WmsError) else
            {"JobID": report.job_id, "Error": {"Status": int(answer.status), "Detail": str(answer)}}
            for report, answer in zip(reports, _taken(runtime, identity, reports, now))]


def _taken(runtime: Runtime, identity: Identity, reports: list[StatusReport],
           now: datetime) -> list[dict[str, Any] | WmsError]:
    """The reports taken (a Failed job whose JDL asks for a retry on its exit
    code, MaxRetries, waits again), or the errors that refused them."""
    answers = leases.pilot_statuses(runtime, identity, reports, now)
    for report, answer in zip(reports, answers):
        if not isinstance(answer, WmsError) and answer["Status"] == JobStatus.FAILED.value:
            rescheduling.retry_failed(runtime, report.job_id, now)
    return answers
