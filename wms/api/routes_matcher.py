"""/api/v1/matcher and the pilot's job reports."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import answers
from wms.api import responses as r
from wms.api.models import (ComplexFile, Heartbeat, IdPath, JobOutput, JobPilotStatus, JobRequest, JobsRequest,
                            PilotStatus, PilotStatuses)
from wms.core.identity import Identity
from wms.core.match.context import PilotRequest
from wms.services import complexes as complexes_service
from wms.services import diagnosis
from wms.services import jobs as jobs_service
from wms.services import leases
from wms.services import matcher
from wms.services import pilot_reports
from wms.services import tokens as tokens_service
from wms.services.access import MANAGER, OPERATOR, OUTPUT, PILOT, USER, matching_vo

router = APIRouter(tags=["matcher"])

# The routes every pilot calls in a loop answer JSONResponse: a dict
# returned is first copied by FastAPI's jsonable_encoder, which for a job
# (its JDL, limits, environment) cost more than writing the JSON. What
# they answer is plain JSON data already (strings, numbers, lists).

Pilot = Annotated[Identity, Depends(require(PILOT, OPERATOR, MANAGER))]
Reader = Annotated[Identity, Depends(require(USER, PILOT, OPERATOR, MANAGER))]
Manager = Annotated[Identity, Depends(require(MANAGER))]


def _pilot_request(body: JobRequest, runtime: RuntimeDep, caller: Identity) -> PilotRequest:
    """The body as the Matcher's request, validated, the caller's token bound to
    ``pilot_id``, the VO rule and the token's declared slots applied (a
    refused request binds nothing)."""
    request = PilotRequest(
        site=body.site, ce=body.ce, queue=body.queue, host=body.host, pilot_id=body.pilot_id,
        pools=tuple(body.pools) if body.pools is not None else None, slots=body.slots, load=body.load,
        platform=body.platform, cpu_time_left=body.cpu_time_left, tags=tuple(body.tags),
    )
    matcher.validate_request(runtime, request)        # before binding: a refused request binds nothing
    caller = tokens_service.bind_pilot(runtime.engine, caller, body.pilot_id,
                                            runtime.caches.verified_tokens)
    return dataclasses.replace(request, vo=matching_vo(caller), owner=caller.user if body.owner_only else None,
                               declared_slots=tokens_service.declared_slots(caller))


@router.post("/matcher/request-job", **answers(r.MatchResult))
def request_job(body: JobRequest, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> JSONResponse:
    """requestJob: one job for this pilot, or why there is none.

    A pilot token speaks for its own pilot only (a hand-made one is bound
    to ``pilot_id`` here, on its first request) and gets jobs of its VO only."""
    result = matcher.request_job(runtime, _pilot_request(body, runtime, caller), now)
    if result.job is None:
        return JSONResponse({"match": False, "reason": result.reason})
    return JSONResponse({"match": True, "job": result.job})


@router.post("/matcher/request-jobs", **answers(r.BatchMatchResult))
def request_jobs(body: JobsRequest, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> JSONResponse:
    """Up to ``count`` jobs for a pilot with ``slots`` free slots, each claimed as
    request-job claims one and offered the slots the ones before it left;
    ``reason`` is the first no-match's, null when ``count`` jobs came."""
    result = matcher.request_jobs(runtime, _pilot_request(body, runtime, caller), body.count, now)
    return JSONResponse({"jobs": result.jobs, "reason": result.reason})


@router.post("/jobs/pilot-status", **answers(r.PilotStatusAnswers))
def pilot_statuses(body: PilotStatuses, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> JSONResponse:
    """Several jobs' reports in one call (a pilot's slots'), each taken or refused on its
    own as ``/jobs/{job_id}/pilot-status`` takes it; the answers in the reports' order."""
    reports = [_status_report(report.job_id, report) for report in body.reports]
    return JSONResponse({"results": pilot_reports.report_statuses(runtime, caller, reports, now)})


@router.post("/jobs/{job_id}/pilot-status", **answers(r.JobState, 409))
def pilot_status(job_id: IdPath, body: PilotStatus, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> JSONResponse:
    return JSONResponse(pilot_reports.report_status(runtime, caller, _status_report(job_id, body), now))


def _status_report(job_id: int, body: PilotStatus | JobPilotStatus) -> pilot_reports.StatusReport:
    output = None if body.output is None else (body.output.stdout, body.output.stderr, body.output.truncated)
    return pilot_reports.StatusReport(job_id, body.pilot_id, body.status, body.minor_status, body.exit_code,
                                      body.attempt, body.ended_ago, output)


@router.post("/jobs/{job_id}/heartbeat", **answers(r.HeartbeatAnswer, 409))
def heartbeat(job_id: IdPath, body: Heartbeat, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> JSONResponse:
    return JSONResponse(leases.heartbeat(runtime, caller, job_id, body.pilot_id, now, attempt=body.attempt))


@router.post("/jobs/{job_id}/output", status_code=204,
             **answers(None, 409, status=204, description="stored"))
def upload_output(job_id: IdPath, body: JobOutput, runtime: RuntimeDep, now: NowDep, caller: Pilot) -> None:
    leases.store_output(runtime, caller, job_id, body.pilot_id, body.stdout, body.stderr, body.truncated, now,
                         attempt=body.attempt)


@router.get("/jobs/{job_id}/output", **answers(r.StoredOutput))
def get_output(job_id: IdPath, runtime: RuntimeDep, caller: Reader) -> dict[str, Any]:
    jobs_service.visible_jobs(runtime, caller, [job_id], OUTPUT)
    return leases.job_output(runtime, job_id)


@router.get("/jobs/{job_id}/why", **answers(r.WhyReport))
def why(job_id: IdPath, runtime: RuntimeDep, now: NowDep, caller: Reader) -> dict[str, Any]:
    """Every queue and the first layer that keeps the job from it."""
    return diagnosis.why(runtime, caller, job_id, now)


@router.get("/queues", **answers(list[r.QueueLoad]))
def queues(runtime: RuntimeDep, caller: Reader) -> list[dict[str, Any]]:
    """Reserved/used/total slots and consumables per queue, host and global (qstat -f)."""
    return diagnosis.queues_overview(runtime)


@router.get("/complexes", **answers(r.Text))
def complexes(runtime: RuntimeDep, caller: Reader) -> dict[str, Any]:
    """The complex table as `qconf -sc` prints it."""
    return {"text": complexes_service.show(runtime)}


@router.put("/complexes", **answers(r.Messages))
def modify_complexes(body: ComplexFile, runtime: RuntimeDep, now: NowDep, caller: Manager) -> dict[str, Any]:
    """qconf -Mc: replace the whole complex table (managers)."""
    return {"messages": complexes_service.modify(runtime, caller, body.text, now)}
