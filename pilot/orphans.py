"""Payloads never outlive their pilot unnoticed.

Each job runs in its own session (``start_new_session``), which the pilot
signals and measures; if the pilot itself dies (SIGKILL, out of memory, a
crash) nothing would stop those sessions, the job would be rescheduled
after the heartbeat timeout and run twice. Two mechanisms prevent it:

* **A watchdog process** per pilot, started at once, in a session of its
  own (signals to the pilot's process group do not reach it) and deaf to
  SIGINT/SIGTERM. The pilot tells it over a pipe which job sessions run
  (``+SID`` / ``-SID`` lines). When the pilot dies, however it dies, the
  kernel closes the pipe's write end; the watchdog reads end-of-file at
  once, SIGKILLs every session still registered (its process group and
  every process of the session found in /proc), and exits. A pilot that
  ends normally has no session left, so the watchdog just exits.
* **A registry on disk** for the case where the watchdog died too (a
  ``kill -9`` of both): ``<state dir>/<pilot id>.<pid>.sessions`` lists
  the pilot's pid and each running job's session with its start time (one
  file per pilot process: two pilots that share an id on one node, a
  resubmission or a test suite, must not write over each other). A pilot
  starting on the same node ends the sessions of every predecessor whose
  pilot is gone, checking the start time so that a recycled pid is never
  hit, and removes the file. Its first line is the pilot and the sessions
  running when it was last written whole; a job's start appends one line
  (one small write, no new file: a file made anew for each job cost a
  busy pilot more than its own Python did), and the file is written whole
  again once the lines outnumber the running sessions by far. A job that
  ended stays listed until then (or the pilot ends); a line cut short by
  a crash is skipped by the reader.

What escapes: a payload process that calls ``setsid()`` again leaves the
session and is beyond both (the limit of a user-space pilot without
cgroups, docs/architecture.md).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("pilot.orphans")

SUFFIX = ".sessions"
#: Appended lines after which the registry is written whole again (at least; more with many running sessions).
REWRITE_AFTER = 256

def proc_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def processes() -> list[tuple[int, list[str]]]:
    """Every process now, with its stat fields (see proc_fields)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := proc_fields(name)) is not None:
            out.append((int(name), fields))
    return out


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (proc(5) field 22), None if gone."""
    fields = proc_fields(pid)
    return None if fields is None else int(fields[19])


def session_members(sid: int) -> list[int]:
    return [pid for pid, fields in processes() if int(fields[3]) == sid]


def kill_session(sid: int) -> None:
    """SIGKILL a job's process group, then every other process of its session
    (the group first: it holds the payload as started, and must not wait for
    the look through /proc that finds the rest)."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except OSError:
        pass
    for pid in session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Sessions:
    """The job sessions of this pilot, told to the watchdog and kept on disk."""

    def __init__(self, state_dir: Path, pilot_id: str) -> None:
        self.pilot_id = pilot_id
        self.path = state_dir / f"{pilot_id}.{os.getpid()}{SUFFIX}"
        self.lock = threading.Lock()
        self.running: dict[int, int] = {}       # sid -> start time
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._write_end: int | None = None
        self._pilot_start = start_time(os.getpid())
        self._file: int | None = None            # the registry, open for appending
        self._appended = 0

    def start_watchdog(self) -> None:
        read_end, write_end = os.pipe()
        # Where the package is, a directory or the pilot's zip file, so that
        # ``-m pilot.orphans`` works however the pilot travelled to the node.
        home = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [home, os.environ.get("PYTHONPATH")]))}
        try:
            self.watchdog = subprocess.Popen([sys.executable, "-m", "pilot.orphans", str(read_end)],
                                             pass_fds=(read_end,), stdin=subprocess.DEVNULL, env=env,
                                             start_new_session=True)
        finally:
            os.close(read_end)
        self._write_end = write_end
        self._save()

    def add(self, sid: int) -> None:
        with self.lock:
            self.running[sid] = started = start_time(sid) or 0
            self._tell(f"+{sid}")
            if self._file is None or self._appended >= max(REWRITE_AFTER, 4 * len(self.running)):
                self._save()
            else:
                os.write(self._file, (json.dumps([sid, started]) + "\n").encode())
                self._appended += 1

    def remove(self, sid: int) -> None:
        # The registry on disk forgets it when it is next written whole: a
        # session that ended and is still listed is harmless there (its start
        # time matches no process any more), and a file written twice a job
        # was a fifth of a busy pilot's time.
        with self.lock:
            self.running.pop(sid, None)
            self._tell(f"-{sid}")

    def close(self) -> None:
        """The pilot ends normally: the watchdog sees end-of-file with nothing to do."""
        if self._write_end is not None:
            os.close(self._write_end)
            self._write_end = None
        if self.watchdog is not None:
            try:
                self.watchdog.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.watchdog.kill()
        if self._file is not None:
            os.close(self._file)
            self._file = None
        self.path.unlink(missing_ok=True)

    def _tell(self, line: str) -> None:
        if self._write_end is not None:
            try:
                os.write(self._write_end, (line + "\n").encode())
            except OSError as exc:
                log.warning("the watchdog is gone (%s): the registry on disk remains", exc)

    def _save(self) -> None:
        """The registry written whole, then opened for the next starts' lines."""
        record = {"pilot_id": self.pilot_id, "pilot_pid": os.getpid(), "pilot_start": self._pilot_start,
                  "sessions": [[sid, started] for sid, started in sorted(self.running.items())]}
        tmp = self.path.with_suffix(".tmp")            # this process's own, as the file is
        tmp.write_text(json.dumps(record) + "\n")
        tmp.replace(self.path)
        if self._file is not None:
            os.close(self._file)
        self._file = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._appended = 0


def read_registry(path: Path) -> dict[str, Any] | None:
    """A registry: its first line (pilot_id, pilot_pid, pilot_start) with
    "sessions", those of that line and one of each line after it; None when
    it cannot be read. A line cut short by a crash is skipped."""
    try:
        first, *lines = path.read_text().splitlines()
        record = json.loads(first)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    sessions = list(record.get("sessions", []))
    for line in lines:
        try:
            sid, started = json.loads(line)
        except (ValueError, TypeError):
            continue
        sessions.append([sid, started])
    return {**record, "sessions": sessions}


def private_dir(path: Path) -> Path:
    """``path`` made and checked: ours alone (0700), or refused. Records found
    in a directory others can write could name any of our processes."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not path.is_dir() or path.is_symlink() or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError(f"{path} must be a directory of this user's alone (mode 0700)")
    return path


def end_orphans(state_dir: Path) -> int:
    """End the job sessions of earlier pilots on this node that are gone; how many sessions ended."""
    ended = 0
    for path in sorted(state_dir.glob(f"*{SUFFIX}")):
        record = read_registry(path)
        if record is None:
            continue
        alive = start_time(int(record["pilot_pid"]))
        if alive is not None and alive == record.get("pilot_start"):
            continue                # that pilot still runs: its sessions are its own
        for sid, started in record.get("sessions", []):
            if start_time(sid) == started:
                log.warning("ending session %d left by pilot %s", sid,
                            record.get("pilot_id") or path.name.removesuffix(SUFFIX))
                kill_session(sid)
                ended += 1
        path.unlink(missing_ok=True)
    return ended


def watchdog(fd: int) -> None:
    """The watchdog's life: follow the pilot's +SID/-SID lines until the pipe
    closes, then end every session still registered."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sessions: set[int] = set()
    pending = b""
    while data := os.read(fd, 4096):
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                sessions.add(int(line[1:]))
            elif line[:1] == b"-":
                sessions.discard(int(line[1:]))
    for sid in sessions:
        kill_session(sid)


if __name__ == "__main__":
    watchdog(int(sys.argv[1]))
