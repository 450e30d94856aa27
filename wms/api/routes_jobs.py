"""/api/v1/jobs: submit, list, status, history, JDL, kill, match-queues."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import answers
from wms.api import responses as r
from wms.api.models import Int64, IdPath, JobIds, MatchQueuesRequest, SubmitRequest
from wms.core.errors import InvalidInput
from wms.core.limits import INT32_MAX
from wms.core.identity import Identity
from wms.services import jobs as jobs_service
from wms.services import pools as pools_service
from wms.services.access import MANAGER, OPERATOR, PILOT, USER
from wms.services import submission as submission_service
from wms.services.submission import SubmitOptions

router = APIRouter(prefix="/jobs", tags=["jobs"])

Submitter = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]
Reader = Annotated[Identity, Depends(require(USER, PILOT, OPERATOR, MANAGER))]


@router.post("", status_code=201, **answers(r.SubmittedJobs, 404, 409, status=201))
def submit(body: SubmitRequest, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    if (body.parallel_environment is None) != (body.slots is None):
        raise InvalidInput("a parallel environment needs a slot count (-pe PE N)")
    options = SubmitOptions(
        resource_requests=body.resource_requests,
        soft_resource_requests=body.soft_resource_requests,
        parallel_environment=(body.parallel_environment, body.slots) if body.parallel_environment else None,
        reservation=body.reservation,
        project=body.project,
        job_name=body.job_name,
    )
    sources = [(j.source, j.text) for j in body.jdls]
    result = submission_service.submit(runtime, caller, sources, options, now, strict=body.strict,
                                       input_sandboxes=[j.input_sandbox for j in body.jdls])
    return {"job_ids": result.job_ids, "warnings": result.warnings}


@router.get("", **answers(list[r.JobSummary], 404))
def list_jobs(
    runtime: RuntimeDep,
    caller: Reader,
    job_id: Annotated[list[Int64] | None, Query()] = None,
    status: str | None = None,
    owner: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    pilot: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
) -> list[dict[str, Any]]:
    if job_id:
        return jobs_service.job_status(runtime, caller, job_id)
    return jobs_service.list_jobs(runtime, caller, status=status, owner=owner, limit=limit, pilot=pilot)


@router.get("/{job_id}", **answers(r.JobSummary))
def job_status(job_id: IdPath, runtime: RuntimeDep, caller: Reader) -> dict[str, Any]:
    return jobs_service.job_status(runtime, caller, [job_id])[0]


@router.get("/{job_id}/history", **answers(list[r.HistoryEntry]))
def history(job_id: IdPath, runtime: RuntimeDep, caller: Reader) -> list[dict[str, Any]]:
    return jobs_service.history(runtime, caller, job_id)


@router.get("/{job_id}/jdl", **answers(r.JobJDL))
def jdl(job_id: IdPath, runtime: RuntimeDep, caller: Reader) -> dict[str, Any]:
    return jobs_service.job_jdl(runtime, caller, job_id)


@router.get("/{job_id}/match-queues", **answers(r.QueueMatch))
def match_queues_of_job(job_id: IdPath, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return pools_service.match_queues_for_job(runtime, caller, job_id, now)


@router.post("/kill", **answers(r.KillReport, 404))
def kill(body: JobIds, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return jobs_service.kill_jobs(runtime, caller, body.job_ids, now)


@router.delete("/{job_id}", **answers(r.KillReport))
def kill_one(job_id: IdPath, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return jobs_service.kill_jobs(runtime, caller, [job_id], now)


match_router = APIRouter(tags=["jobs"])


@match_router.post("/match-queues", **answers(r.QueueMatch))
def match_queues_of_jdl(body: MatchQueuesRequest, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return pools_service.match_queues_for_text(runtime, caller, body.source, body.text, now)
