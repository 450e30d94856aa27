"""The ``local`` backend: pilots as processes on this host, one session
each; it stands in for every queue of resources.yaml (``make demo``,
``wms up``)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

from wms.backends.base import (
    DONE,
    EXIT_WRAPPER,
    FAILED,
    PILOT_TOKEN_ENV,
    RUNNING,
    PilotArgs,
    check_count,
    log_file,
    log_tail,
)
from wms.core.errors import InvalidInput
from wms.core.resources import QueueRef

log = logging.getLogger("wms.backends.local")

# Seconds a local pilot has to end its jobs when `wms up` stops, before it is killed
# (its jobs come back through their leases at the next start).
LOCAL_STOP_GRACE = 5.0


class LocalBackend:
    """Pilots as processes on this host (``python -m pilot``), one session each.

    A pilot's reference is ``host:pid:pilot_id``. Its log goes to
    ``log_dir/<pilot_id>.log`` (``output`` reads it) and its exit status to
    ``log_dir/<pilot_id>.exit``. Status: alive = Running, exit 0 = Done,
    anything else (or vanished without a status) = Failed. References of
    another host are left out of ``status``.
    """

    name = "local"
    emulates_queues = True
    parameters: tuple[str, ...] = ()
    # Processes this interpreter started, shared by every instance so that
    # any director in the process can reap them (no zombies).
    _children: dict[int, subprocess.Popen] = {}
    _lock = threading.Lock()

    def __init__(self, log_dir: Path | str = "var/pilots", python: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.python = python or sys.executable
        self.env = dict(env) if env is not None else None
        self.host = socket.gethostname()

    # -- submission ----------------------------------------------------------
    def command(self, pilot_args: PilotArgs, pilot_id: str) -> list[str]:
        return [self.python, "-m", "pilot", "--url", pilot_args.url, "--pilot-id", pilot_id, *pilot_args.argv,
                "--token-file", "-"]

    def submit_pilots(self, queue_ref: QueueRef, count: int, pilot_args: PilotArgs) -> list[str]:
        check_count(count, pilot_args)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(self.env if self.env is not None else os.environ)
        env.pop("WMS_TOKEN", None)
        refs = []
        env.pop(PILOT_TOKEN_ENV, None)
        for pilot_id in pilot_args.pilot_ids:
            exit_file = self.log_dir / f"{pilot_id}.exit"
            exit_file.unlink(missing_ok=True)
            with open(log_file(self.log_dir, pilot_id), "ab") as log:
                process = subprocess.Popen(
                    ["/bin/sh", "-c", EXIT_WRAPPER, str(exit_file), *self.command(pilot_args, pilot_id)],
                    env=env, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True,
                )
            # The token on the pilot's standard input, which it reads to the
            # end at once: in no file, no command line, and not in the
            # environment of the shell that waits to record its exit.
            assert process.stdin is not None
            try:
                process.stdin.write(pilot_args.token_for(pilot_id).encode() + b"\n")
                process.stdin.close()
            except OSError as exc:           # the pilot died at once; its exit status tells
                log.warning("pilot %s: could not hand over its token: %s", pilot_id, exc)
            with self._lock:
                self._children[process.pid] = process
            refs.append(f"{self.host}:{process.pid}:{pilot_id}")
        return refs

    # -- status ----------------------------------------------------------------
    def _parse(self, ref: str) -> tuple[str, int, str] | None:
        host, _, rest = ref.partition(":")
        pid, _, pilot_id = rest.partition(":")
        if not pid.isdigit() or not pilot_id:
            return None
        return host, int(pid), pilot_id

    def status(self, backend_refs: Sequence[str]) -> dict[str, str]:
        states: dict[str, str] = {}
        for ref in backend_refs:
            parsed = self._parse(ref)
            if parsed is None or parsed[0] != self.host:
                continue
            _, pid, pilot_id = parsed
            states[ref] = self._state(pid, pilot_id)
        return states

    def _state(self, pid: int, pilot_id: str) -> str:
        with self._lock:
            child = self._children.get(pid)
        if child is not None:
            code = child.poll()
            if code is None:
                return RUNNING
            with self._lock:
                self._children.pop(pid, None)
            return DONE if code == 0 else FAILED
        if _alive(pid):
            return RUNNING
        exit_file = self.log_dir / f"{pilot_id}.exit"
        try:
            code = exit_file.read_text().strip()
        except OSError:
            return FAILED
        return DONE if code == "0" else FAILED

    @classmethod
    def stop_started(cls, grace: float) -> int:
        """End every pilot this process started that still runs: SIGTERM to its
        process group, SIGKILL to what is left after ``grace`` seconds. For
        `wms up`, whose local pilots would otherwise go on asking a server that
        is gone until their empty answers run out. Returns how many were running."""
        with cls._lock:
            running = [p for p in cls._children.values() if p.poll() is None]
        for process in running:
            _signal_group(process.pid, signal.SIGTERM)
        # The shell wrapper dies at once; the pilot in its group may take its time: watch the group.
        deadline = time.monotonic() + grace
        left = [p.pid for p in running]
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [pid for pid in left if _signal_group(pid, 0)]
        for pid in left:
            _signal_group(pid, signal.SIGKILL)
        for process in running:
            process.wait()
        return len(running)

    def kill(self, ref: str) -> None:
        parsed = self._parse(ref)
        if parsed is None or parsed[0] != self.host:
            raise InvalidInput(f"not a local pilot of this host: {ref!r}")
        _signal_group(parsed[1], signal.SIGTERM)

    # -- output ----------------------------------------------------------------
    def output(self, ref: str, limit: int) -> str | None:
        """The end of the log the pilot writes as it runs. A pilot of another
        host is read too: its log is here when the log directory is shared."""
        parsed = self._parse(ref)
        if parsed is None:
            raise InvalidInput(f"not a local pilot reference: {ref!r}")
        return log_tail(log_file(self.log_dir, parsed[2]), limit)


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to a process group (0: only ask whether it has a process left); False if it has none."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:     # a process of someone else's: alive, and not ours to signal
        return True
    return True


def stop_local_pilots(grace: float = LOCAL_STOP_GRACE) -> int:
    """Stop the local pilots this process started (LocalBackend.stop_started)."""
    return LocalBackend.stop_started(grace)


def _alive(pid: int) -> bool:
    """True if ``pid`` is a live process (a zombie is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
