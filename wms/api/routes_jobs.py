"""/api/v1/jobs: submit, list, status, history, JDL, kill, match-queues, application status."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from wms.api import paging
from wms.api.deps import NowDep, RuntimeDep, clock_now, require
from wms.api.openapi import answers
from wms.api import responses as r
from wms.api.models import (AlterRequest, ApplicationStatus, HoldRequest, Int64, IdPath, JobControl, JobIds, MatchQueuesRequest,
                            ReleaseRequest, RescheduleRequest, SubmitRequest)
from wms.core.errors import InvalidInput
from wms.core.holds import parse_types
from wms.core.identity import Identity
from wms.services import holds as holds_service
from wms.services import jobs as jobs_service
from wms.services import pools as pools_service
from wms.services import altering, deletion, rescheduling
from wms.services.access import JOB, MANAGER, OPERATOR, PILOT, USER
from wms.services import submission as submission_service
from wms.services.submission import SubmitOptions

router = APIRouter(prefix="/jobs", tags=["jobs"])

Submitter = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]
Reader = Annotated[Identity, Depends(require(USER, PILOT, OPERATOR, MANAGER))]
# A job token reads its own job's status and JDL, and sets its application status: nothing else.
JobReader = Annotated[Identity, Depends(require(USER, PILOT, JOB, OPERATOR, MANAGER))]
ApplicationReporter = Annotated[Identity, Depends(require(JOB, PILOT, OPERATOR, MANAGER))]


@router.post("", status_code=201, **answers(r.SubmittedJobs, 404, 409, status=201))
def submit(body: SubmitRequest, request: Request, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
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
                                       held=body.held, clock=lambda: clock_now(request),
                                       input_sandboxes=[j.input_sandbox for j in body.jdls])
    return {"job_ids": result.job_ids, "warnings": result.warnings}


@router.get("", **answers(list[r.JobSummary], 404))
def list_jobs(
    request: Request,
    response: Response,
    runtime: RuntimeDep,
    caller: Reader,
    job_id: Annotated[list[Int64] | None, Query()] = None,
    status: str | None = None,
    owner: str | None = None,
    limit: paging.Limit = None,
    pilot: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    cursor: paging.Cursor = None,
    order: Annotated[Literal["asc", "desc"], Query(description="by job id: oldest (asc) or newest first")] = "asc",
) -> list[dict[str, Any]]:
    """The jobs named by ``job_id`` (all of them), or one page of the jobs the caller sees, by id;
    the headers X-Next-Cursor and Link (rel="next") say where the next page is (docs/api.md, "Pages")."""
    if job_id:
        return jobs_service.job_status(runtime, caller, job_id)
    query = {"status": status, "owner": owner, "pilot": pilot, "order": order}
    page = paging.page_of(runtime, "jobs", query, cursor, limit)
    rows = jobs_service.list_jobs(runtime, caller, status=status, owner=owner, pilot=pilot, page=page,
                                  descending=order == "desc")
    return paging.answer(request, response, "jobs", query, page, rows, "JobID")


@router.get("/{job_id}", **answers(r.JobSummary))
def job_status(job_id: IdPath, runtime: RuntimeDep, caller: JobReader) -> dict[str, Any]:
    return jobs_service.job_status(runtime, caller, [job_id])[0]


@router.get("/{job_id}/history", **answers(list[r.HistoryEntry]))
def history(job_id: IdPath, runtime: RuntimeDep, caller: Reader) -> list[dict[str, Any]]:
    return jobs_service.history(runtime, caller, job_id)


@router.get("/{job_id}/jdl", **answers(r.JobJDL))
def jdl(job_id: IdPath, runtime: RuntimeDep, caller: JobReader) -> dict[str, Any]:
    return jobs_service.job_jdl(runtime, caller, job_id)


@router.post("/{job_id}/application-status", **answers(r.ApplicationStatusAnswer, 409))
def application_status(job_id: IdPath, body: ApplicationStatus, runtime: RuntimeDep, now: NowDep,
                       caller: ApplicationReporter) -> dict[str, Any]:
    """setApplicationStatus: the running job's progress line, from its payload (the job
    token in WMS_JOB_TOKEN), the pilot holding it, or an operator or manager."""
    return jobs_service.set_application_status(runtime, caller, job_id, body.application_status, now)


@router.get("/{job_id}/match-queues", **answers(r.QueueMatch))
def match_queues_of_job(job_id: IdPath, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return pools_service.match_queues_for_job(runtime, caller, job_id, now)


@router.post("/kill", **answers(r.KillReport, 404))
def kill(body: JobIds, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return jobs_service.kill_jobs(runtime, caller, body.job_ids, now)


@router.delete("/{job_id}", **answers(r.KillReport))
def kill_one(job_id: IdPath, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return jobs_service.kill_jobs(runtime, caller, [job_id], now)


def _selection(body: JobControl) -> jobs_service.Selection:
    return jobs_service.Selection(job_ids=body.job_ids, status=body.status, owner=body.owner, after=body.after)


@router.post("/hold", **answers(r.HoldReport, 404))
def hold(body: HoldRequest, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    """qhold: hold Waiting jobs (user hold u by default; o operators, s managers), with a reason."""
    return holds_service.hold_jobs(runtime, caller, _selection(body), parse_types(body.hold_types), body.reason,
                                   now)


@router.post("/release", **answers(r.ReleaseReport, 404))
def release(body: ReleaseRequest, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    """qrls: release holds (default: every kind the caller may); a job whose last hold goes waits again."""
    types = parse_types(body.hold_types) if body.hold_types is not None else None
    return holds_service.release_jobs(runtime, caller, _selection(body), types, body.reason, now)


@router.post("/reschedule", **answers(r.RescheduleReport, 404, 409))
def reschedule(body: RescheduleRequest, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    """dirac-wms-job-reschedule: ended jobs run again as a new attempt, within max_reschedule
    (``reset``, for operators and managers, starts the count again)."""
    return rescheduling.reschedule_jobs(runtime, caller, _selection(body), body.reset, body.reason, now,
                                        running=body.running)


@router.post("/delete", **answers(r.DeleteReport, 404))
def delete_jobs(body: JobControl, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    """dirac-wms-job-delete: jobs leave every list (those not ended are killed first) and are
    purged after deleted_job_retention."""
    return deletion.delete_jobs(runtime, caller, _selection(body), body.reason, now)


@router.post("/alter", **answers(r.AlterReport, 404))
def alter(body: AlterRequest, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    """qalter: a Waiting or Held job's priority, -l requests, queues and name; filed again."""
    overrides: dict[str, Any] = {}
    if body.priority is not None:
        overrides["Priority"] = body.priority
    requests = dict(body.resource_requests or {})
    if body.queues:
        requests["qname"] = "|".join(body.queues)
    if requests:
        overrides["ResourceRequests"] = requests
    if body.job_name is not None:
        overrides["JobName"] = body.job_name
    return altering.alter_jobs(runtime, caller, _selection(body), overrides, body.reason, now)


match_router = APIRouter(tags=["jobs"])


@match_router.post("/match-queues", **answers(r.QueueMatch))
def match_queues_of_jdl(body: MatchQueuesRequest, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    return pools_service.match_queues_for_text(runtime, caller, body.source, body.text, now)
