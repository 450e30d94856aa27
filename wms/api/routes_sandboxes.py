"""/api/v1/sandboxes and /api/v1/jobs/{id}/sandbox: input and output sandboxes.

Files travel as raw bodies (``application/octet-stream``), not JSON: the
outer guard (api/guard.py) authenticates these requests and leaves their
bodies to the route (:func:`streams_body`), which refuses a body over
``sandboxes.file_bytes``, or one that would pass a sandbox quota, from its
Content-Length before reading it, or as soon as the count passes the limit
(chunked bodies), and checks the SHA-256 the caller announced
(``X-Content-SHA256``, or the path).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from wms.api import responses as r
from wms.api.deps import NowDep, RuntimeDep, require
from wms.api.openapi import BINARY, answers
from wms.api.models import IdPath, Int32
from wms.core.errors import InvalidInput, TooLarge
from wms.core.identity import Identity
from wms.core.sandboxes import CHUNK_BYTES, check_digest
from wms.services import sandboxes as sandboxes_service
from wms.services.access import MANAGER, OPERATOR, PILOT, USER

router = APIRouter(tags=["sandboxes"])

Submitter = Annotated[Identity, Depends(require(USER, OPERATOR, MANAGER))]
Reader = Annotated[Identity, Depends(require(USER, PILOT, OPERATOR, MANAGER))]
Pilot = Annotated[Identity, Depends(require(PILOT, OPERATOR, MANAGER))]
PilotId = Annotated[str | None, Query(min_length=1, max_length=255)]
Attempt = Annotated[Int32 | None, Query(ge=1)]
SHA_HEADER = "X-Content-SHA256"
# What /docs shows for the raw bodies these routes read themselves.
RAW_BODY = {"requestBody": {"required": True, "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}

# The two upload routes, whole paths: no other route is ever spared the guard's reading.
_STREAMED = re.compile(r"/api/v1(?:/sandboxes/[^/]+|/jobs/[^/]+/sandbox/output/[^/]+)")
# Bytes kept in memory before a received body spills to a temporary file.
_SPOOL = 4 * CHUNK_BYTES


def streams_body(method: str, path: str) -> bool:
    """Whether the route of this request reads its body itself (file uploads)."""
    return method == "PUT" and _STREAMED.fullmatch(path) is not None


def declared_length(request: Request) -> int | None:
    """The body's Content-Length (None: not given, a chunked body); 400 when it is not a number."""
    length = request.headers.get("content-length")
    if length is None:
        return None
    if not length.strip().isdigit():
        raise InvalidInput("Content-Length is not a number")
    return int(length)


async def receive(request: Request, limit: int, what: str) -> sandboxes_service.Received:
    """The body, counted and hashed while it is read; TooLarge past ``limit`` bytes."""
    too_large = TooLarge(f"{what}: more than {limit} bytes (sandboxes.file_bytes)")
    length = declared_length(request)
    if length is not None and length > limit:
        raise too_large
    digest = hashlib.sha256()
    size = 0
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL)
    try:
        async for piece in request.stream():
            size += len(piece)
            if size > limit:
                raise too_large
            digest.update(piece)
            spool.write(piece)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return sandboxes_service.Received(content=spool, size=size, sha256=digest.hexdigest())


@router.get("/sandboxes/limits", **answers(r.SandboxLimits))
def limits(runtime: RuntimeDep, caller: Reader,
           sha256: Annotated[list[str] | None, Query(description="contents to leave out of user_held and "
                                                                 "total_held: the files about to be sent")] = None,
           ) -> dict[str, Any]:
    """The size limits and quotas `wms submit` checks before it uploads anything, with what the
    caller's sandboxes and all sandboxes hold now."""
    return sandboxes_service.limits_view(runtime, caller, sha256 or ())


@router.put("/sandboxes/{sha256}", status_code=201, openapi_extra=RAW_BODY, **answers(r.UploadedFile, status=201))
async def upload(sha256: str, request: Request, runtime: RuntimeDep, now: NowDep, caller: Submitter) -> dict[str, Any]:
    """Upload one input file (raw body), named by its SHA-256, for the caller's next submissions."""
    limit = runtime.config.settings.sandboxes.file_bytes
    length = declared_length(request)
    if length is not None and length <= limit:
        # A body that would pass a quota is refused before a byte of it is read.
        check_digest(sha256)
        await run_in_threadpool(sandboxes_service.check_quotas, runtime, caller, sha256, length)
    received = await receive(request, limit, "sandbox file")
    with received.content:
        return await run_in_threadpool(sandboxes_service.upload, runtime, caller, sha256, received, now)


@router.get("/jobs/{job_id}/sandbox", **answers(r.SandboxManifest, 404))
def manifest(job_id: IdPath, runtime: RuntimeDep, caller: Reader, pilot_id: PilotId = None,
             attempt: Attempt = None) -> dict[str, Any]:
    """The job's input files, its OutputSandbox entries and (for its owner) the output files stored."""
    return sandboxes_service.manifest(runtime, caller, job_id, pilot_id, attempt)


@router.get("/jobs/{job_id}/sandbox/{kind}/{name}", **answers(BINARY, 404, description="the file's bytes"))
def download(job_id: IdPath, kind: str, name: str, runtime: RuntimeDep, caller: Reader,
             pilot_id: PilotId = None, attempt: Attempt = None) -> StreamingResponse:
    """One file of the job's input or output sandbox, as raw bytes."""
    info, pieces = sandboxes_service.open_file(runtime, caller, job_id, kind, name, pilot_id, attempt)
    return StreamingResponse(pieces, media_type="application/octet-stream", headers={
        SHA_HEADER: info.sha256, "Content-Length": str(info.size)})


@router.put("/jobs/{job_id}/sandbox/output/{name}", status_code=201, openapi_extra=RAW_BODY,
            **answers(r.StoredOutputFile, 404, 409, status=201))
async def upload_output(
    job_id: IdPath, name: str, request: Request, runtime: RuntimeDep, now: NowDep, caller: Pilot,
    pilot_id: Annotated[str, Query(min_length=1, max_length=255)],
    sha256: Annotated[str, Header(alias=SHA_HEADER)],
    attempt: Attempt = None,
) -> dict[str, Any]:
    """One file of the job's output sandbox (raw body), from the pilot that holds the job."""
    # Refused before a byte of the body is read: not this pilot's job, a bad name.
    await run_in_threadpool(sandboxes_service.check_output_upload, runtime, caller, job_id, pilot_id, attempt, name)
    received = await receive(request, runtime.config.settings.sandboxes.file_bytes,
                             f"job {job_id}: output sandbox file {name!r}")
    with received.content:
        return await run_in_threadpool(sandboxes_service.store_output_file, runtime, caller, job_id, pilot_id,
                                       attempt, name, sha256, received, now)

