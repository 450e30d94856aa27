"""Input and output sandboxes: upload, attach at submission, hand to the
pilot, take back, retrieve, expire (docs/architecture.md, "Sandboxes").

The life of an input file: `wms submit` uploads it (:func:`upload`: the
content by its SHA-256, and a record that this user sent it), then submits
the JDL with ``{entry: sha256}`` for each ``InputSandbox`` entry;
:func:`plan_inputs` checks, before anything is stored, that every entry
was uploaded by the submitter and that sizes are within wms.yaml
``sandboxes``; :func:`attach_inputs` names the files of each job in the
submission's own transaction. The job's pilot reads them
(:func:`manifest`, :func:`open_file`), and after the job uploads the files
its ``OutputSandbox`` asks for (:func:`store_output_file`), which the
job's owner retrieves. :func:`clean` is the SandboxCleaner agent.

Who may do what (services/access.py holds the rule): a job's owner,
operators and managers read its sandboxes; only the pilot that holds the
job (in the attempt it quotes) reads its input and uploads its output.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, BinaryIO

from sqlalchemy import Connection

from wms.core import jdl
from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from wms.core.identity import Identity
from wms.core.sandboxes import (
    STDERR_NAME, STDOUT_NAME,
    INPUT, OUTPUT, SandboxFile, check_digest, check_file_size, check_job_size, check_name, check_output_patterns,
    MAX_LEFT_OUT, check_quota, input_names,
)
from wms.core.states import FINAL_STATES
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db import sandboxes as sandboxes_db
from wms.db.engine import reading
from wms.services import access
from wms.services import jobs as jobs_service
from wms.services import tokens as tokens_service
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime
from wms.services.sandbox_stores import SandboxStore, make_store


@dataclass(frozen=True)
class Received:
    """A body the API has read: spooled content, its size and its SHA-256."""

    content: BinaryIO
    size: int
    sha256: str


def store_of(runtime: Runtime) -> SandboxStore:
    return make_store(runtime.config.settings, runtime.engine)


def limits_view(runtime: Runtime, identity: Identity, left_out: Sequence[str] = ()) -> dict[str, Any]:
    """What `wms submit` checks before it uploads anything: the size limits, the quotas
    (0: none) and what the caller's sandboxes and all sandboxes hold now, leaving out the
    contents ``left_out`` (the files about to be sent: one already held adds nothing, as at
    the upload)."""
    if len(left_out) > MAX_LEFT_OUT:
        raise InvalidInput(f"sha256: {len(left_out)} digests; at most {MAX_LEFT_OUT} may be named at once")
    but = {check_digest(value, "sha256") for value in left_out}
    s = runtime.config.settings.sandboxes
    with reading(runtime.engine) as conn:
        user_held = sandboxes_db.bytes_held(conn, identity.user, but=but) if s.user_bytes else 0
        total_held = sandboxes_db.bytes_held(conn, but=but) if s.total_bytes else 0
    return {"file_bytes": s.file_bytes, "job_bytes": s.job_bytes, "store": s.store,
            "user_bytes": s.user_bytes, "total_bytes": s.total_bytes, "user_held": user_held,
            "total_held": total_held}


def _check_content(claimed: str, received: Received, where: str) -> None:
    if received.sha256 != claimed:
        raise InvalidInput(f"{where}: the content's SHA-256 is {received.sha256}, not {claimed} as announced "
                           "(changed or cut during the transfer?)")


# -- input: upload, plan, attach ----------------------------------------------------
def upload(runtime: Runtime, identity: Identity, claimed: str, received: Received, now: datetime) -> dict[str, Any]:
    """Store one input file for the caller's next submissions."""
    check_digest(claimed)
    limits = runtime.config.settings.sandboxes.limits()
    check_file_size(claimed[:12], received.size, limits, "upload")
    _check_content(claimed, received, "upload")
    check_quotas(runtime, identity, claimed, received.size)
    store_of(runtime).put(claimed, received.content, now)
    run_in_transaction(runtime.engine,
                       lambda conn: sandboxes_db.record_upload(conn, identity.user, claimed, received.size, now))
    return {"sha256": claimed, "size": received.size}


def check_quotas(runtime: Runtime, identity: Identity, sha256: str, size: int) -> None:
    """Refuse (413) an upload that would take the caller's sandboxes past ``sandboxes.user_bytes``
    or all sandboxes past ``sandboxes.total_bytes``; the same content sent again adds nothing.
    Checked twice: from the Content-Length before the body is read (the route), and with the
    size received before the content is stored.

    Read before the content is stored, without a lock: two uploads of one user
    at the same moment may both pass, by at most one file each
    (``sandboxes.file_bytes``); docs/security.md says so."""
    settings = runtime.config.settings.sandboxes
    with reading(runtime.engine) as conn:
        if settings.user_bytes:
            check_quota(f"user {identity.user}'s sandboxes", sandboxes_db.bytes_held(conn, identity.user, but=(sha256,)),
                        size, settings.user_bytes, "user_bytes")
        if settings.total_bytes:
            check_quota("all sandboxes together", sandboxes_db.bytes_held(conn, but=(sha256,)), size,
                        settings.total_bytes, "total_bytes")


def job_origins(sources: Sequence[str], parsed_sources: Sequence[str]) -> list[int]:
    """For each parsed job, the index of the JDL it came from.

    wms.services.submission.parse_sources names the jobs of JDL ``s`` either
    ``s`` (one job) or ``s[0]``, ``s[1]``... (parametric), in order."""
    out: list[int] = []
    n = 0
    for name in parsed_sources:
        while n < len(sources) and not (name == sources[n] or name.startswith(f"{sources[n]}[")):
            n += 1
        if n == len(sources):
            raise ValueError(f"job {name!r} comes from no JDL of the submission")
        out.append(n)
        if name == sources[n]:
            n += 1
    return out


def plan_inputs(
    runtime: Runtime,
    identity: Identity,
    sources: Sequence[str],
    mappings: Sequence[Mapping[str, str]],
    jobs: Sequence[tuple[str, jdl.JobDescription]],
) -> list[list[SandboxFile]]:
    """The input files of each job, checked whole before anything is stored.

    Every ``InputSandbox`` entry must be in its JDL's mapping (the digest
    `wms submit` uploaded), uploaded by the submitter, and within the size
    limits; ``OutputSandbox`` entries must be plain names or patterns.
    """
    limits = runtime.config.settings.sandboxes.limits()
    origins = job_origins(sources, [source for source, _ in jobs])
    wanted = {digest for mapping in mappings for digest in mapping.values()}
    for n, mapping in enumerate(mappings):
        for entry, digest in mapping.items():
            check_digest(digest, f"{sources[n]}: input_sandbox[{entry!r}]")
    uploaded: dict[str, int] = {}
    if wanted:
        with reading(runtime.engine) as conn:
            uploaded = sandboxes_db.uploads_of(conn, identity.user, wanted)
    plans: list[list[SandboxFile]] = []
    for (source, description), origin in zip(jobs, origins):
        check_output_patterns(description.output_sandbox, source)
        mapping = mappings[origin] if origin < len(mappings) else {}
        files = []
        for entry, name in input_names(description.input_sandbox, source).items():
            digest = mapping.get(entry)
            if digest is None:
                raise InvalidInput(f"{source}: InputSandbox file {entry!r} was not sent with the job "
                                   "(`wms submit` uploads the local files a JDL lists)")
            if digest not in uploaded:
                raise InvalidInput(f"{source}: InputSandbox file {entry!r}: no upload of yours has SHA-256 "
                                   f"{digest} (upload it first: PUT /api/v1/sandboxes/{{sha256}})")
            files.append(SandboxFile(name=name, size=uploaded[digest], sha256=digest))
        check_job_size(files, limits, source)
        plans.append(files)
    return plans


def attach_inputs(conn: Connection, job_ids: Sequence[int], plans: Sequence[Sequence[SandboxFile]],
                  now: datetime) -> None:
    """Name each new job's input files; on the submission's connection, in its transaction."""
    sandboxes_db.add_files(conn, [
        {"job_id": job_id, "kind": INPUT, "name": f.name, "sha256": f.sha256, "size": f.size, "created": now}
        for job_id, files in zip(job_ids, plans, strict=True) for f in files
    ])


# -- access ---------------------------------------------------------------------
def _job_row(runtime: Runtime, job_id: int) -> dict[str, Any]:
    with reading(runtime.engine) as conn:
        placement = match_db.job_placement(conn, job_id)
    if placement is None:
        raise NotFound(f"no such job: {job_id}")
    return placement


def _check_holder(placement: dict[str, Any], job_id: int, pilot_id: str, attempt: int | None) -> None:
    """Unless ``pilot_id`` holds the job, it answers as a missing job does (so that a
    pilot cannot probe ids, as for its other job calls); Conflict when the attempt
    it quotes is over."""
    if placement["pilot_id"] != pilot_id:
        raise NotFound(f"no such job: {job_id}")
    if attempt is not None and placement["attempt"] != attempt:
        raise Conflict(f"job {job_id} was handed out again (attempt {placement['attempt']}, not {attempt})")


def check_access(runtime: Runtime, identity: Identity, job_id: int, kind: str, pilot_id: str | None,
                 attempt: int | None) -> dict[str, Any]:
    """The job's row if the caller may read its ``kind`` sandbox.

    A job the caller may not see answers as a missing one (NotFound, as
    every job route does); one it sees but does not own is Forbidden: a
    job's sandboxes are its owner's."""
    if identity.role == access.PILOT:
        if kind != INPUT:
            raise Forbidden("pilots upload output sandboxes; they do not read them")
        if not pilot_id:
            raise InvalidInput("pilot_id must be given")
        tokens_service.check_pilot(identity, pilot_id)
        placement = _job_row(runtime, job_id)
        _check_holder(placement, job_id, pilot_id, attempt)
        return placement
    [row] = jobs_service.visible_jobs(runtime, identity, [job_id])
    if not access.may_read_sandbox(identity, row["owner"]):
        raise Forbidden(f"job {job_id} belongs to another user: its sandboxes are its owner's")
    return row


def _description(runtime: Runtime, job_id: int) -> jdl.JobDescription:
    with reading(runtime.engine) as conn:
        _, text = jobs_db.get_jdl(conn, job_id)
    [description] = jdl.parse_jdl(text, f"job {job_id}")[:1]
    return description


def manifest(runtime: Runtime, identity: Identity, job_id: int, pilot_id: str | None = None,
             attempt: int | None = None) -> dict[str, Any]:
    """The job's input files, its OutputSandbox entries, and the output files stored so far."""
    placement = check_access(runtime, identity, job_id, INPUT, pilot_id, attempt)
    with reading(runtime.engine) as conn:
        inputs = sandboxes_db.files_of(conn, job_id, INPUT)
        outputs = (sandboxes_db.files_of(conn, job_id, OUTPUT, placement["attempt"])
                   if identity.role != access.PILOT else [])
    description = _description(runtime, job_id)
    return {"JobID": job_id, "InputSandbox": inputs, "OutputSandbox": list(description.output_sandbox),
            "OutputFiles": outputs, "StdOutput": description.std_output or STDOUT_NAME,
            "StdError": description.std_error or STDERR_NAME}


def open_file(runtime: Runtime, identity: Identity, job_id: int, kind: str, name: str,
              pilot_id: str | None = None, attempt: int | None = None) -> tuple[SandboxFile, Iterator[bytes]]:
    """One file of a job's sandbox and its content in pieces."""
    if kind not in (INPUT, OUTPUT):
        raise NotFound(f"no sandbox {kind!r} (input or output)")
    check_name(name)
    placement = check_access(runtime, identity, job_id, kind, pilot_id, attempt)
    with reading(runtime.engine) as conn:
        # Output: only what the job's latest attempt sent.
        row = sandboxes_db.file_of(conn, job_id, kind, name, placement["attempt"] if kind == OUTPUT else None)
    if row is None:
        raise NotFound(f"job {job_id} has no {kind} sandbox file {name!r}")
    try:
        pieces = store_of(runtime).read(row["sha256"])
    except FileNotFoundError:
        raise NotFound(f"job {job_id}: the content of {kind} sandbox file {name!r} is gone "
                       "(expired: sandboxes.max_age)") from None
    return SandboxFile(name=row["name"], size=row["size"], sha256=row["sha256"]), pieces


# -- output ---------------------------------------------------------------------
def check_output_upload(runtime: Runtime, identity: Identity, job_id: int, pilot_id: str,
                        attempt: int | None, name: str) -> None:
    """Refuse an upload that cannot be accepted before its body is read."""
    check_name(name, "output sandbox file")
    if identity.role not in (access.PILOT, *access.ADMINS):
        raise Forbidden("only the job's pilot uploads its output sandbox")
    tokens_service.check_pilot(identity, pilot_id)
    _check_holder(_job_row(runtime, job_id), job_id, pilot_id, attempt)


def store_output_file(runtime: Runtime, identity: Identity, job_id: int, pilot_id: str, attempt: int | None,
                      name: str, claimed: str, received: Received, now: datetime) -> dict[str, Any]:
    """One file of the job's output sandbox, from the pilot that holds it."""
    check_output_upload(runtime, identity, job_id, pilot_id, attempt, name)
    check_digest(claimed)
    limits = runtime.config.settings.sandboxes.limits()
    check_file_size(name, received.size, limits, f"job {job_id}")
    _check_content(claimed, received, f"job {job_id}: output sandbox file {name!r}")
    store_of(runtime).put(claimed, received.content, now)

    def record(conn: Connection) -> None:
        placement = match_db.job_placement(conn, job_id)
        if placement is None:
            raise NotFound(f"no such job: {job_id}")
        _check_holder(placement, job_id, pilot_id, attempt)
        others = [SandboxFile(f["name"], f["size"], f["sha256"])
                  for f in sandboxes_db.files_of(conn, job_id, OUTPUT, placement["attempt"]) if f["name"] != name]
        check_job_size([*others, SandboxFile(name, received.size, claimed)], limits, f"job {job_id}")
        sandboxes_db.put_file(conn, {"job_id": job_id, "kind": OUTPUT, "name": name, "sha256": claimed,
                                     "size": received.size, "created": now, "attempt": placement["attempt"]})

    run_in_transaction(runtime.engine, record)
    return {"JobID": job_id, "name": name, "size": received.size, "sha256": claimed}


# -- expiry -----------------------------------------------------------------------
def clean(runtime: Runtime, now: datetime) -> dict[str, int]:
    """The SandboxCleaner agent: what finished jobs and stale uploads no longer need.

    1. files of jobs that ended more than ``max_age`` ago;
    2. upload records older than ``orphan_grace`` (submitted jobs name
       their files themselves);
    3. content no job and no upload names, stored more than
       ``orphan_grace`` ago (so never a file being uploaded).
    Safe to run twice at once: each step deletes only what is still there.
    """
    settings = runtime.config.settings.sandboxes
    finished = [s.value for s in FINAL_STATES]
    files = run_in_transaction(runtime.engine, lambda conn: sandboxes_db.drop_files_of_finished_jobs(
        conn, finished, now - timedelta(seconds=settings.max_age)))
    grace = now - timedelta(seconds=settings.orphan_grace)
    uploads = run_in_transaction(runtime.engine, lambda conn: sandboxes_db.forget_uploads(conn, grace))
    store = store_of(runtime)
    candidates = store.stored_before(grace)
    with reading(runtime.engine) as conn:
        unused = sandboxes_db.unreferenced(conn, candidates) if candidates else []
    removed = sum(1 for digest in unused if store.delete(digest, grace))
    return {"files_removed": files, "uploads_forgotten": uploads, "contents_removed": removed}

