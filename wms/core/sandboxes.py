"""Input and output sandboxes: the rules on names, sizes and digests.

DIRAC's model (docs/architecture.md, "Sandboxes"): a job's
``InputSandbox`` lists local files that travel with it to the worker node,
where they appear in the job's directory under their base names; its
``OutputSandbox`` lists the files of the job's directory (names, or
patterns such as ``*.log``) that come back after it ends. Here each file
is stored once by its SHA-256 and every job names the files it holds.

Pure logic: no I/O. The CLI, the API and the pilot share these rules
(the pilot keeps a copy of the name rule, being standard library only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from wms.core.errors import InvalidInput, TooLarge

INPUT, OUTPUT = "input", "output"
KINDS = (INPUT, OUTPUT)

#: Bytes per stored piece of a file (the database store's rows, the
#: streams): far below MariaDB's smallest max_allowed_packet (1 MiB before
#: 10.2, 16 MiB since), so one INSERT never exceeds it.
CHUNK_BYTES = 256 * 1024
MAX_NAME = 255
# DIRAC names files from a data catalogue "LFN:/vo/..."; there is none here.
_CATALOGUE_PREFIX = re.compile(r"^(lfn|sb):", re.IGNORECASE)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class SandboxLimits:
    """wms.yaml ``sandboxes.file_bytes`` and ``sandboxes.job_bytes``."""

    file_bytes: int
    job_bytes: int


@dataclass(frozen=True)
class SandboxFile:
    """One file of a job's sandbox: its name in the job's directory, size and digest."""

    name: str
    size: int
    sha256: str

    def view(self) -> dict[str, object]:
        return {"name": self.name, "size": self.size, "sha256": self.sha256}


#: The files of the job's directory its stdout and stderr go to when its JDL
#: names none (DIRAC's StdOutput/StdError name others); the pilot's too.
STDOUT_NAME = "std.out"
STDERR_NAME = "std.err"


def check_name(name: str, where: str = "sandbox file") -> str:
    """``name`` if it can be a file of a job's directory, InvalidInput otherwise.

    A plain base name: no directory part, not ``.`` or ``..``, no control
    character, at most 255 bytes. So no name can reach outside the job's
    directory, nor outside the directory `wms output --dir` writes to.
    """
    if not name:
        raise InvalidInput(f"{where}: empty file name")
    if "/" in name or "\\" in name:
        raise InvalidInput(f"{where}: {name!r} is not a plain file name (no directories: '/' is not allowed)")
    if name in (".", ".."):
        raise InvalidInput(f"{where}: {name!r} is not a file name")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidInput(f"{where}: {name!r} holds a control character")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME:
        raise InvalidInput(f"{where}: file name longer than {MAX_NAME} bytes")
    return name


def check_digest(value: str, where: str = "sha256") -> str:
    """A SHA-256 as 64 lowercase hex digits, InvalidInput otherwise."""
    if not _SHA256.match(value or ""):
        raise InvalidInput(f"{where}: not a SHA-256 digest (64 lowercase hex digits): {value[:80]!r}")
    return value


def input_name(entry: str, where: str) -> str:
    """The name in the job's directory of one ``InputSandbox`` entry (its base name)."""
    if _CATALOGUE_PREFIX.match(entry):
        raise InvalidInput(f"{where}: InputSandbox entry {entry!r}: catalogue files (LFN:, SB:) are not "
                           "supported; list local files")
    if entry.endswith("/"):
        raise InvalidInput(f"{where}: InputSandbox entry {entry!r} is a directory; list its files")
    return check_name(entry.rsplit("/", 1)[-1], f"{where}: InputSandbox entry {entry!r}")


def input_names(entries: Iterable[str], where: str) -> dict[str, str]:
    """``{entry: name}`` of a job's ``InputSandbox``; two entries with one base name are refused."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for entry in entries:
        name = input_name(entry, where)
        if name in seen and seen[name] != entry:
            raise InvalidInput(f"{where}: InputSandbox entries {seen[name]!r} and {entry!r} both arrive as "
                               f"{name!r} in the job's directory")
        seen[name] = entry
        out[entry] = name
    return out


def check_output_patterns(patterns: Iterable[str], where: str) -> list[str]:
    """The ``OutputSandbox`` entries: names or shell patterns of the job's directory, no directories."""
    out = []
    for pattern in patterns:
        check_name(pattern, f"{where}: OutputSandbox entry")
        out.append(pattern)
    return out


def is_pattern(entry: str) -> bool:
    """Whether an OutputSandbox entry is a shell pattern (``*.log``) rather than a name."""
    return _GLOB.search(entry) is not None


def check_file_size(name: str, size: int, limits: SandboxLimits, where: str) -> None:
    if size > limits.file_bytes:
        raise TooLarge(f"{where}: sandbox file {name!r} is {size} bytes, more than {limits.file_bytes} "
                       "(sandboxes.file_bytes)")


#: The most contents one GET /sandboxes/limits may leave out of its figures (``sha256``, the
#: files a submission is about to send): 100 digests are 7 KB of query, well within what a
#: server takes in a request line.
MAX_LEFT_OUT = 100


def check_quota(who: str, held: int, adding: int, quota: int, key: str, what: str = "this file") -> None:
    """Refuse (TooLarge, 413) ``what`` of ``adding`` bytes when ``who`` already holds ``held``
    bytes and ``quota`` (0: none) would be passed; reaching it exactly is allowed. The one rule
    for the upload (the server, before and after the body) and for `wms submit`'s check before
    it uploads anything."""
    if quota and held + adding > quota:
        raise TooLarge(f"{who} hold {held:,} bytes; the quota is {quota:,} (sandboxes.{key}); "
                       f"{what} adds {adding:,}")


def check_job_size(files: Iterable[SandboxFile], limits: SandboxLimits, where: str) -> None:
    """Each file and the sum within the limits; TooLarge names the first that is not."""
    total = 0
    for f in files:
        check_file_size(f.name, f.size, limits, where)
        total += f.size
    if total > limits.job_bytes:
        raise TooLarge(f"{where}: sandbox of {total} bytes, more than {limits.job_bytes} per job "
                       "(sandboxes.job_bytes)")
