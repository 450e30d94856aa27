"""The job's sandboxes on the node: input files in, output files out.

Before the job starts, :func:`fetch_inputs` asks the server for the job's
input files and writes each into the job's directory, checking its size
and SHA-256 (a file that does not match is an error: the job does not
start). After the job ends, :func:`send_outputs` uploads the regular files
of the job's directory that its ``OutputSandbox`` names (plain names or
patterns such as ``*.log``); a symbolic link is never followed, so a job
cannot send back files from outside its directory. Listed names the job
did not write are reported, not an error (as DIRAC does).

The name rule is wms.core.sandboxes.check_name's, kept here too because
the pilot uses the standard library only.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pilot.client import ApiError, JobLost

log = logging.getLogger("pilot.sandboxes")

_PIECE = 1 << 16


class SandboxError(Exception):
    """The sandbox cannot be set up or sent: one line saying which file and why."""


@dataclass
class SandboxCalls:
    """The server calls for one job's sandboxes (the pilot's id and the attempt bound in)."""

    manifest: Callable[[int], dict[str, Any]]
    download: Callable[[int, str, BinaryIO], None]
    upload: Callable[[int, str, BinaryIO, str], Any]


def safe_name(name: Any) -> str:
    """``name`` if it is a plain file name of the job's directory, else SandboxError."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name \
            or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise SandboxError(f"refusing sandbox file name {name!r}: not a plain file name")
    return name


def file_digest(handle: BinaryIO) -> tuple[int, str]:
    """(size, SHA-256) of an open file, read from its start."""
    handle.seek(0)
    digest = hashlib.sha256()
    size = 0
    while piece := handle.read(_PIECE):
        digest.update(piece)
        size += len(piece)
    return size, digest.hexdigest()


def fetch_inputs(calls: SandboxCalls, job_id: int, job_dir: Path) -> list[str]:
    """Write the job's input files into ``job_dir``; its OutputSandbox entries.

    Raises SandboxError for a file that cannot be written or does not
    match its checksum, ClientError (JobLost included) for the server."""
    manifest = calls.manifest(job_id)
    for entry in manifest.get("InputSandbox") or []:
        name = safe_name(entry.get("name"))
        target = job_dir / name
        try:
            # O_EXCL and O_NOFOLLOW: never through something already there.
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w+b") as handle:
                calls.download(job_id, name, handle)
                size, digest = file_digest(handle)
        except OSError as exc:
            raise SandboxError(f"cannot write input file {name!r}: {exc.strerror or exc}") from None
        if digest != entry.get("sha256") or size != entry.get("size"):
            target.unlink(missing_ok=True)
            raise SandboxError(f"input file {name!r}: got {size} bytes with SHA-256 {digest}, expected "
                               f"{entry.get('size')} bytes with {entry.get('sha256')}")
        log.info("input file %s: %d bytes, checksum verified", name, size)
    return [str(p) for p in manifest.get("OutputSandbox") or []]


def select_outputs(job_dir: Path, patterns: list[str]) -> tuple[list[str], list[str]]:
    """(the regular files of ``job_dir`` the patterns name, the plain names not found)."""
    try:
        entries = {e.name: e for e in os.scandir(job_dir)}
    except OSError:
        entries = {}
    files = sorted(n for n, e in entries.items() if stat.S_ISREG(e.stat(follow_symlinks=False).st_mode))
    chosen: list[str] = []
    missing: list[str] = []
    for pattern in patterns:
        wild = any(c in pattern for c in "*?[")
        found = fnmatch.filter(files, pattern) if wild else [n for n in files if n == pattern]
        if not found and not wild:
            missing.append(pattern)
        chosen.extend(n for n in found if n not in chosen)
    return chosen, missing


def send_outputs(calls: SandboxCalls, job_id: int, job_dir: Path, patterns: list[str]) -> list[str]:
    """Upload the output files; the problems (a file the server refused, with why).

    A ClientError that may pass (network, 5xx, JobLost) is raised for the
    caller to retry or give up; a refusal (4xx) of one file is a problem,
    and the others are still sent."""
    chosen, missing = select_outputs(job_dir, patterns)
    if missing:
        log.warning("OutputSandbox files the job did not write: %s", ", ".join(missing))
    problems = []
    for name in chosen:
        try:
            fd = os.open(job_dir / name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            problems.append(f"{name}: {exc.strerror}")
            continue
        with os.fdopen(fd, "rb") as handle:
            size, digest = file_digest(handle)
            try:
                calls.upload(job_id, name, handle, digest)
            except JobLost:
                raise
            except ApiError as exc:
                if exc.status >= 500 or exc.status == 429:
                    raise
                problems.append(f"{name}: {exc.detail}")
                continue
        log.info("output file %s: %d bytes sent", name, size)
    return problems
