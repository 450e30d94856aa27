"""The client side of sandboxes: `wms submit` sends the local InputSandbox
files, `wms output ID --dir D` fetches the output sandbox.

Every file a submission names is found, read and checked against the
server's limits before the first byte is uploaded, so a missing or
oversized file stops the submission with nothing sent. Paths in a JDL are
relative to the JDL file's directory (the current one for standard input).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wms.cli.client import Client, ClientError
from wms.core import jdl
from wms.core.errors import TooLarge, WmsError
from wms.core.sandboxes import (
    MAX_LEFT_OUT, SandboxFile, SandboxLimits, check_file_size, check_job_size, check_name, check_quota, input_names,
    is_pattern,
)

_PIECE = 1 << 16


class LocalFileError(Exception):
    """A file the command line names cannot be used (missing, unreadable, a directory)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while piece := handle.read(_PIECE):
            digest.update(piece)
    return digest.hexdigest()


def local_path(entry: str, jdl_path: str) -> Path:
    """Where an InputSandbox entry is on this machine: relative to the JDL's directory."""
    base = Path.cwd() if jdl_path == "-" else Path(jdl_path).resolve().parent
    return (base / entry) if not os.path.isabs(entry) else Path(entry)


def _stat(path: Path, entry: str, source: str) -> int:
    try:
        info = path.stat()
    except OSError as exc:
        raise LocalFileError(f"{source}: InputSandbox file {entry!r} ({path}): {exc.strerror}") from None
    if not path.is_file():
        raise LocalFileError(f"{source}: InputSandbox entry {entry!r} ({path}) is not a regular file")
    if not os.access(path, os.R_OK):
        raise LocalFileError(f"{source}: InputSandbox file {entry!r} ({path}): permission denied")
    return info.st_size


def send_inputs(client: Client, jdls: Sequence[tuple[str, str, str]]) -> list[dict[str, str]]:
    """For each (path, source, text), ``{entry: sha256}`` of its uploaded InputSandbox files.

    A JDL that does not parse gets ``{}``: the server refuses it with its own message."""
    wanted: list[dict[str, Path]] = []
    jobs: list[list[tuple[str, list[tuple[str, str]]]]] = []
    for path, source, text in jdls:
        try:
            descriptions = jdl.parse_jdl(text, source)
            found = [input_names(d.input_sandbox, source) for d in descriptions]
        except WmsError:
            found = []
        entries = {entry: local_path(entry, path) for names in found for entry in names}
        wanted.append(entries)
        jobs.append([(source, list(names.items())) for names in found])
    if not any(wanted):
        return [{} for _ in jdls]
    sizes = {p: _stat(p, entry, source) for (path, source, _), entries in zip(jdls, wanted)
             for entry, p in entries.items()}
    view = client.get("/sandboxes/limits")
    limits = SandboxLimits(file_bytes=int(view["file_bytes"]), job_bytes=int(view["job_bytes"]))
    for entries, per_job in zip(wanted, jobs):
        for source, names in per_job:
            files = [SandboxFile(name, sizes[entries[entry]], "") for entry, name in names]
            for f in files:
                check_file_size(f.name, f.size, limits, source)
            check_job_size(files, limits, source)
    digests: dict[Path, str] = {}
    for p in sizes:
        digests[p] = sha256_of(p)
        if p.stat().st_size != sizes[p]:
            raise LocalFileError(f"InputSandbox file {p} changed while it was read")
    if view.get("user_bytes") or view.get("total_bytes"):
        check_quotas(client, {digest: sizes[p] for p, digest in digests.items()})
    for p, digest in digests.items():
        with p.open("rb") as handle:
            client.put_file(f"/sandboxes/{digest}", handle)
    return [{entry: digests[p] for entry, p in entries.items()} for entries in wanted]


def check_quotas(client: Client, contents: dict[str, int]) -> None:
    """Refuse, before anything is uploaded, the files (digest -> size) that would take the
    caller's sandboxes or all sandboxes past their quota (GET /sandboxes/limits), as the server
    counts them: each content once, one it already holds adding nothing. More contents than
    the server leaves out of its figures at once are all counted as new."""
    digests = sorted(contents)
    left_out = digests if len(digests) <= MAX_LEFT_OUT else []
    view = client.get("/sandboxes/limits", sha256=left_out or None)
    adding = sum(contents.values())
    what = f"this submission ({len(contents)} InputSandbox file{'s' if len(contents) != 1 else ''})"
    try:
        check_quota("your sandboxes", int(view["user_held"]), adding, int(view["user_bytes"]), "user_bytes", what)
        check_quota("all sandboxes together", int(view["total_held"]), adding, int(view["total_bytes"]),
                    "total_bytes", what)
    except TooLarge as exc:
        raise TooLarge(f"{exc}; nothing was uploaded") from None


def fetch_outputs(client: Client, job_id: int, directory: Path) -> tuple[list[Path], list[str]]:
    """The job's output sandbox (and its stdout/stderr under the names its StdOutput/StdError
    gave them, std.out/std.err by default) into ``directory``;
    (the files written, the OutputSandbox names the job did not write)."""
    manifest = client.get(f"/jobs/{job_id}/sandbox")
    files = manifest.get("OutputFiles") or []
    try:
        output: dict[str, Any] | None = client.get(f"/jobs/{job_id}/output")
    except ClientError as exc:
        if exc.status != 404:
            raise
        output = None
    if not files and output is None:
        raise ClientError(f"job {job_id} has no output yet")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in files:
        name = check_name(str(entry["name"]), f"job {job_id}: output sandbox file")
        target = directory / name
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name[:50]}.")
        try:
            with os.fdopen(fd, "w+b") as handle:
                client.download(f"/jobs/{job_id}/sandbox/output/{name}", handle)
                handle.flush()
            if sha256_of(Path(temporary)) != entry["sha256"]:
                raise ClientError(f"job {job_id}: output file {name!r} arrived damaged (checksum mismatch)")
            os.replace(temporary, target)
        finally:
            Path(temporary).unlink(missing_ok=True)
        written.append(target)
    names = {entry["name"] for entry in files}
    if output is not None:
        # Under the names the JDL's StdOutput/StdError gave the streams; an OutputSandbox that
        # names them already brought the files themselves.
        streams: dict[str, str] = {}
        for key, default, text in (("StdOutput", "std.out", output["stdout"]),
                                   ("StdError", "std.err", output["stderr"])):
            name = check_name(str(manifest.get(key) or default), f"job {job_id}: {key}")
            streams[name] = streams.get(name, "") + text
        for name, text in streams.items():
            if name not in names:
                (directory / name).write_text(text)
                written.append(directory / name)
    written_names = names | {p.name for p in written}
    missing = [p for p in manifest.get("OutputSandbox") or [] if not is_pattern(p) and p not in written_names]
    return written, missing
