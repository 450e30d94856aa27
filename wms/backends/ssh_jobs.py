"""Pure parts of the ssh backend: where a pilot runs (the reference), the
shell scripts sent to the remote node on ssh's stdin, and their answers.
No process is started here (wms/backends/ssh.py does that).

Every script is read by ``sh -s`` on the remote node from ssh's stdin, so
nothing in it (the token included) is on a command line or in a file. The
node needs python3, /bin/sh, base64 and setsid, not this package: the
submission script carries the pilot as a base64 zipapp, stored once per
version as ``pilot-<hash>.pyz`` in the remote directory (a running pilot
keeps reading its own file, which is never replaced).
"""

from __future__ import annotations

import base64
import hashlib
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from wms.backends.base import DONE, EXIT_WRAPPER, FAILED, RUNNING

DEFAULT_DIRECTORY = ".wms/pilots"
_END = "WMS_PILOT_ZIPAPP"
_TOKEN_END = "WMS_PILOT_TOKEN_END"
_LOG_START, _LOG_END = "@@log ", "@@end"


@dataclass(frozen=True)
class SshTarget:
    """How to reach a node: user@host:port with a key, the known_hosts file
    that names the host's key, and the pilots' directory there (relative
    to the remote home, or absolute)."""

    host: str
    user: str
    port: int = 22
    key: str = ""
    known_hosts: str = ""
    directory: str = DEFAULT_DIRECTORY

    def ssh_argv(self) -> list[str]:
        """ssh running ``sh -s`` there; never a password prompt, never an unknown host key."""
        argv = ["ssh", "-p", str(self.port), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", "ConnectTimeout=20"]
        if self.key:
            argv += ["-i", self.key, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        return [*argv, f"{self.user}@{self.host}" if self.user else self.host, "sh", "-s"]

    def ref(self, pid: str, pilot_id: str) -> str:
        """``ssh://user@host:port/<pid>/<pilot id>?key=...&known_hosts=...&dir=...``."""
        query = urlencode({k: v for k, v in (("key", self.key), ("known_hosts", self.known_hosts),
                                             ("dir", self.directory)) if v})
        netloc = f"{quote(self.user, safe='')}@{self.host}:{self.port}" if self.user else f"{self.host}:{self.port}"
        return f"ssh://{netloc}/{pid}/{quote(pilot_id, safe='')}" + (f"?{query}" if query else "")


def parse_ref(ref: str) -> tuple[SshTarget, str, str] | None:
    """(target, pid, pilot id) of a reference :meth:`SshTarget.ref` made, else None."""
    try:
        parts = urlsplit(ref)
        port = parts.port or 22
    except ValueError:
        return None
    pid, _, pilot_id = parts.path.lstrip("/").partition("/")
    if parts.scheme != "ssh" or not parts.hostname or not pid.isdigit() or not pilot_id:
        return None
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    target = SshTarget(host=parts.hostname, user=unquote(parts.username or ""), port=port,
                       key=query.get("key", ""), known_hosts=query.get("known_hosts", ""),
                       directory=query.get("dir", DEFAULT_DIRECTORY))
    return target, pid, unquote(pilot_id)


def _directory(target: SshTarget) -> str:
    """Shell words for the remote directory (a relative one is under $HOME)."""
    quoted = shlex.quote(target.directory)
    return quoted if target.directory.startswith("/") else f'"$HOME"/{quoted}'


def submit_script(target: SshTarget, zipapp: bytes, pilots: Sequence[tuple[str, Sequence[str], str]]) -> str:
    """Start each (pilot id, pilot argv, token) in its own session, detached
    from ssh, its token in its environment alone (WMS_PILOT_TOKEN); the
    n-th prints ``started <n> <pid>`` (numbers, whatever the ids hold)."""
    name = f"pilot-{hashlib.sha256(zipapp).hexdigest()[:16]}.pyz"
    payload = "\n".join(textwrap.wrap(base64.b64encode(zipapp).decode("ascii"), 76))
    lines = [
        "set -e",
        "umask 077",
        f"dir={_directory(target)}",
        'mkdir -p "$dir"',
        f'if [ ! -s "$dir/{name}" ]; then',
        f"base64 -d > \"$dir/{name}.$$\" <<'{_END}'",
        payload,
        _END,
        f'mv "$dir/{name}.$$" "$dir/{name}"',
        "fi",
        "unset WMS_TOKEN",
    ]
    wrapper = shlex.quote(EXIT_WRAPPER)
    for number, (pilot_id, argv, token) in enumerate(pilots):
        files = f'"$dir"/{shlex.quote(pilot_id)}'
        lines += [
            f"rm -f {files}.exit",
            f"setsid /bin/sh -c {wrapper} {files}.exit"
            f" python3 \"$dir/{name}\" {shlex.join(argv)} --token-file -"
            f" > {files}.log 2>&1 <<'{_TOKEN_END}' &",
            token,
            _TOKEN_END,
            f"echo started {number} $!",
        ]
    return "\n".join(lines) + "\n"


def parse_started(stdout: str) -> dict[int, str]:
    """pilot number -> pid from the submission script's answer."""
    started = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "started" and parts[1].isdigit() and parts[2].isdigit():
            started[int(parts[1])] = parts[2]
    return started


def status_script(target: SshTarget, pilots: Sequence[tuple[str, str]]) -> str:
    """For the n-th (pid, pilot id): ``<n> running``, or ``<n> exit <code>``
    / ``<n> gone`` (ended without an exit status: killed) followed by its
    log in base64 between ``@@log <n>`` and ``@@end``. A pid counts only
    while its command line names the pilot (pids are reused)."""
    lines = [
        f"dir={_directory(target)}",
        "check() {",
        '  if kill -0 "$2" 2>/dev/null && grep -qaF -- "$3" "/proc/$2/cmdline" 2>/dev/null; then',
        '    echo "$1 running"',
        '    return',
        "  fi",
        '  if [ -f "$dir/$3.exit" ]; then echo "$1 exit $(cat "$dir/$3.exit")"; else echo "$1 gone"; fi',
        f'  echo "{_LOG_START}$1"; base64 "$dir/$3.log" 2>/dev/null || true; echo "{_LOG_END}"',
        "}",
    ]
    lines += [f"check {number} {int(pid)} {shlex.quote(pilot_id)}" for number, (pid, pilot_id) in enumerate(pilots)]
    return "\n".join(lines) + "\n"


def parse_status(stdout: str) -> tuple[dict[int, str], dict[int, bytes]]:
    """The status script's answer: pilot number -> state (Running, Done,
    Failed: a pilot gone without an exit status was killed, as for local
    pilots), and pilot number -> the log of each ended pilot."""
    states: dict[int, str] = {}
    logs: dict[int, bytes] = {}
    reading: int | None = None
    chunks: list[str] = []
    for line in stdout.splitlines():
        if reading is not None:
            if line == _LOG_END:
                logs[reading] = base64.b64decode("".join(chunks))
                reading, chunks = None, []
            else:
                chunks.append(line)
            continue
        if line.startswith(_LOG_START) and line[len(_LOG_START):].isdigit():
            reading = int(line[len(_LOG_START):])
            continue
        parts = line.split()
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        number = int(parts[0])
        if parts[1] == "running":
            states[number] = RUNNING
        elif parts[1] == "exit":
            states[number] = DONE if parts[2:] == ["0"] else FAILED
        elif parts[1] == "gone":
            states[number] = FAILED
    return states, logs


def kill_script(pid: str, pilot_id: str) -> str:
    """SIGTERM to the pilot's session (its pid is the group's), if the pid is still that pilot."""
    return (f"if grep -qaF -- {shlex.quote(pilot_id)} /proc/{int(pid)}/cmdline 2>/dev/null; then "
            f"kill -TERM -{int(pid)}; fi\n")
