"""Run one job: working directory, child process, limits, heartbeats, output.

:func:`run_job` is the whole life of a matched job on the node. It talks to
the server only through the three callables of a :class:`Reporter`, so it
runs the same against the real API (``main`` wires in the HTTP client) and
in tests (small recording functions).

The child
    ``Executable`` plus ``Arguments`` split with :func:`shlex.split`, started
    in a new session (so a new process group) in ``<workdir>/<JobID>``,
    where the job's input sandbox files are first written (checked against
    their SHA-256; pilot/sandboxes.py), and from where the files its
    OutputSandbox names are sent after it ends. An Executable that names a
    file of that directory (``run.sh`` brought by the input sandbox) is run
    from there, made executable, as DIRAC's job wrapper does; any other is
    looked up in PATH. stdin from /dev/null, stdout/stderr to the files the
    JDL's StdOutput/StdError name there (default ``std.out``/``std.err``;
    one name for both gets both),
    inside the pilot's sandbox (pilot/isolation.py: the sandbox tool is the
    session's leader, the job runs in a PID namespace of its own).
    Environment: of the pilot's, only what pilot.isolation.inherited lets
    through (PATH, the locale, TERM, SLURM_*, the site's --job-env names),
    never the pilot's own credential (``WMS_TOKEN``, ``WMS_PILOT_TOKEN``);
    ``HOME`` the job's directory; then the job's ``Environment``; then
    ``WMS_JOB_ID``, ``WMS_JOB_DIR`` and the job's own token
    ``WMS_JOB_TOKEN`` (these last, so a job cannot fake them).

Limits enforced (Grid Engine queue_conf(5) meanings)
    ``h_rt``      wall clock. When reached: SIGTERM to the job's process
                  group and session, ``grace`` seconds, then SIGKILL.
                  Failed "Exceeded h_rt (N s)".
    ``s_rt``      soft wall clock. When reached: SIGUSR1 to the group (the
                  job may catch it and finish); if it still runs ``grace``
                  seconds later it is terminated as above,
                  Failed "Exceeded s_rt (N s)".
    ``cpu_time``  CPU seconds (user + system) of the whole process tree.
                  Two mechanisms: (1) the monitor sums utime+stime+cutime+
                  cstime of every live process in the job's session from
                  /proc each poll and terminates the tree when the sum
                  reaches the limit; (2) RLIMIT_CPU is set on the leader
                  (soft = limit -> SIGXCPU, hard = limit + grace -> SIGKILL),
                  inherited by every process it forks, so a single busy
                  process is stopped by the kernel even between polls. After
                  the end, ``wait4``'s rusage (leader plus reaped
                  descendants) gives the figure that is logged.
    pilot stop    SIGTERM/SIGINT to the pilot or its lifetime running out:
                  the job is terminated as above, Failed "Pilot stopped".
                  With ``--on-sigterm leave`` (pilots of a batch system) a
                  SIGTERM instead terminates the job and reports nothing:
                  the batch system is ending the allocation, the job is
                  lost through no fault of its own, and the server, missing
                  its heartbeats, declares it Stalled and runs it again.
    Kill          a heartbeat answering ``Kill: true``, or HTTP 409 on any
                  job call: the job is terminated and nothing more is
                  reported for it (no output, no status).
    lease         half the job's lease gone by since the last heartbeat
                  that was answered was sent (pilot/leases.py): the pilot
                  is cut off, and the server will hand the job out again
                  once the whole lease has passed. The job is terminated
                  (a grace of at most an eighth of the lease) and nothing
                  more is reported for this attempt. Heartbeats run on a
                  thread of their own, so a call hanging on a cut network
                  delays none of the limits above.
    runner fault  an unexpected exception in the runner itself (a defect,
                  not the job's doing): the job is terminated as above and
                  reported Failed "Pilot error: <what>", at once, rather
                  than left Running with no one watching it until the
                  server misses its heartbeats.

Unisolated, processes that escape with ``setsid()`` or that are
reparented and exit before a poll are beyond the pilot's sight; that is
the limit of a user-space watchdog without cgroups. In a sandbox they
cannot escape: the kernel ends every process of its PID namespace when
its init ends. When the leader ends, everything left
in its group and session is SIGKILLed *before* the leader is reaped, so the
group id cannot have been reused by then.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import resource
import select
import shlex
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pilot.client import ClientError, JobLost
from pilot.leases import SHARE, Heartbeats, Lease, lease_clock
from pilot.isolation import Isolation, Launch, inherited
from pilot.logs import job_context
from pilot.orphans import Sessions
from pilot.sandboxes import SandboxCalls, SandboxError, fetch_inputs, safe_name, send_outputs

# A job's first process waits at a gate, a pipe, until the pilot has
# registered its session and set its CPU limit, so a pilot killed at any
# moment leaves no payload unknown to its watchdog (_gated). Unsandboxed,
# and with a site's container command, it is a shell that waits on its
# standard input until the pilot says go (one line, "g"), then becomes the
# job's command with /dev/null for input; a pilot gone before that leaves
# end-of-file, and the job never runs. A shell, not Python: it starts in a
# tenth of the CPU time. bwrap needs no shell: it reads its options from
# the pipe (--args) before it does anything else.
GATE = 'read -r go; [ "$go" = g ] || exit 0; exec "$@" </dev/null'
GATE_SHELL = "/bin/sh"
GO = b"g\n"
# bwrap reads at once: one that has not read its options in this many
# seconds (stopped, stuck) never will, and the start fails rather than
# hold the pilot.
GATE_TIMEOUT = 60.0

log = logging.getLogger("pilot.runner")

STDOUT_NAME = "std.out"
STDERR_NAME = "std.err"
DEFAULT_OUTPUT_LIMIT = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Variables of the pilot that a user job must not inherit.
PRIVATE_ENV = ("WMS_TOKEN", "WMS_PILOT_TOKEN")
JOB_TOKEN_ENV = "WMS_JOB_TOKEN"
# What bwrap prints when the job's program cannot be started inside the sandbox.
SANDBOX_EXEC_FAILED = "bwrap: execvp "

DONE_MINOR = "Execution Complete"
# How long the output upload and the final report are retried across a
# server outage, and the longest wait between two tries.
DEFAULT_PATIENCE = 300.0
PATIENCE_STEP_MAX = 30.0
OUTPUT_LOST_MINOR = "Output not stored: {error}"
RUNNING_MINOR = "Application"
INPUT_SANDBOX_MINOR = "Input sandbox not downloaded"
OUTPUT_SANDBOX_MINOR = "Output sandbox not stored"
RUNNER_FAULT_MINOR = "Pilot error: {error}"
LEASE_MINOR = "Lease expired: no heartbeat answered for half the job's lease"


# -- the job ----------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """The ``Limits`` object of a matched job, in seconds (None = no limit)."""

    h_rt: float | None = None
    s_rt: float | None = None
    cpu_time: float | None = None


@dataclass(frozen=True)
class JobSpec:
    """A matched job as the pilot needs it."""

    job_id: int
    executable: str
    arguments: str = ""
    # Which hand-out of the job this is; every report quotes it (fencing).
    attempt: int | None = None
    slots: int = 1
    # The start window, then the running lease (pilot/leases.py); None: no lease promised.
    lease: float | None = None
    run_lease: float | None = None
    limits: Limits = field(default_factory=Limits)
    environment: Mapping[str, str] = field(default_factory=dict)
    jdl: str = ""
    # The payload's own credential (WMS_JOB_TOKEN): good for this job and attempt only.
    job_token: str = ""
    # The files of the job's directory its streams go to (JDL StdOutput/StdError).
    stdout_name: str = STDOUT_NAME
    stderr_name: str = STDERR_NAME

    @classmethod
    def from_match(cls, job: Mapping[str, Any]) -> JobSpec:
        """Build from the ``job`` object of a request-job answer."""
        limits = job.get("Limits") or {}

        def seconds(name: str) -> float | None:
            value = limits.get(name)
            return None if value is None else float(value)

        env = job.get("Environment") or {}
        return cls(
            job_id=int(job["JobID"]),
            attempt=None if job.get("Attempt") is None else int(job["Attempt"]),
            executable=str(job.get("Executable") or ""),
            arguments=str(job.get("Arguments") or ""),
            slots=max(1, int(job.get("Slots") or 1)),
            lease=None if job.get("Lease") is None else float(job["Lease"]),
            run_lease=None if job.get("RunLease") is None else float(job["RunLease"]),
            limits=Limits(h_rt=seconds("h_rt"), s_rt=seconds("s_rt"), cpu_time=seconds("cpu_time")),
            environment={str(k): str(v) for k, v in env.items()},
            jdl=str(job.get("JDL") or ""),
            job_token=str(job.get("JobToken") or ""),
            stdout_name=_stream_name(job.get("StdOutput"), STDOUT_NAME),
            stderr_name=_stream_name(job.get("StdError"), STDERR_NAME),
        )


def _stream_name(name: Any, default: str) -> str:
    """A stream's file as the server named it; the default for a name that is
    not a plain file name of the job's directory (the server checks it too)."""
    try:
        return safe_name(name) if name else default
    except SandboxError:
        log.warning("refusing stream file name %r: writing %s instead", name, default)
        return default


def sandbox_executable(job_dir: Path, executable: str) -> str:
    """The program to start for ``executable``: a file of the job's directory
    (its input sandbox brought it) is run from there, made executable by its
    owner, as DIRAC's job wrapper does; any other name is looked up in PATH.
    A name that leads out of the job's directory is left to PATH too."""
    if not executable or os.path.isabs(executable):
        return executable
    candidate = job_dir / executable
    try:
        if not candidate.resolve().is_relative_to(job_dir.resolve()) or not candidate.is_file() \
                or candidate.is_symlink():
            return executable
        mode = candidate.stat().st_mode
        if not mode & stat.S_IXUSR:
            candidate.chmod(mode | stat.S_IXUSR)
    except OSError:
        return executable
    return executable if "/" in executable else f"./{executable}"


@dataclass
class Reporter:
    """How the runner talks to the server, one callable per job call.

    Each may raise :class:`~pilot.client.JobLost` (the job is no longer
    ours: stop it, say nothing more) or any other
    :class:`~pilot.client.ClientError` (logged; the job goes on).
    """

    # (job id, status, minor status, exit code[, seconds since the payload ended][, output=(stdout,
    # stderr, truncated)]): at the job's end the output goes with the status, stored with it or not at all.
    status: Callable[..., Any]
    heartbeat: Callable[[int], bool]  # True means: kill the job
    # The job's input and output files (pilot/sandboxes.py); None: no sandboxes.
    sandbox: SandboxCalls | None = None


class Stop(threading.Event):
    """An event that also says why the pilot is stopping (the minor status),
    and whether its running jobs are to be left to the server unreported."""

    def __init__(self, leave_jobs_on_term: bool = False) -> None:
        super().__init__()
        self.reason = "Pilot stopped"
        self.leave_jobs = False
        # --on-sigterm leave: a SIGTERM comes from the batch system.
        self.leave_jobs_on_term = leave_jobs_on_term
        # Readable once set: a job's watcher waits on it beside the job's end (_Child.pause).
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)

    def set(self) -> None:
        super().set()
        try:
            os.write(self._wake_write, b"s")
        except BlockingIOError:
            pass                        # already readable

    def fileno(self) -> int:
        return self._wake_read

    def stop(self, reason: str = "Pilot stopped", leave_jobs: bool = False) -> None:
        if not self.is_set():
            self.reason = reason
            self.leave_jobs = leave_jobs
        self.set()


@dataclass
class JobResult:
    """What happened to a job.

    ``status`` is Done or Failed for a job that ran to an end we report,
    Killed (the server asked), Lost (HTTP 409), Expired (the pilot was cut
    off for half the job's lease) or Left (the batch system ended the
    pilot, ``--on-sigterm leave``) when nothing more was reported. ``reported`` says whether the final status call succeeded.
    """

    job_id: int
    status: str
    minor_status: str
    exit_code: int | None
    workdir: Path | None = None
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    truncated: bool = False
    reported: bool = False


# -- /proc helpers ------------------------------------------------------------


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat the watchdog needs (times in seconds)."""

    pid: int
    state: str
    pgrp: int
    session: int
    cpu: float  # utime + stime + cutime + cstime


def parse_proc_stat(text: str, clk_tck: int = CLK_TCK) -> ProcStat:
    """Parse proc(5) ``stat``; the command name may hold spaces and ')'."""
    head, _, tail = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    f = tail.split()
    # f[0] is field 3 (state); field n is f[n - 3].
    ticks = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return ProcStat(pid=pid, state=f[0], pgrp=int(f[2]), session=int(f[3]), cpu=ticks / clk_tck)


def read_proc_stat(pid: int | str, proc: str = "/proc") -> ProcStat | None:
    """One process's stat, or None when it is gone or unreadable (os calls:
    pathlib's text layer cost the pilot more than the kernel's read)."""
    try:
        fd = os.open(f"{proc}/{pid}/stat", os.O_RDONLY)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return parse_proc_stat(data.decode(errors="replace"))
    except (OSError, ValueError, IndexError):
        return None


def session_processes(session: int, proc: Path = Path("/proc")) -> list[ProcStat]:
    """Every process of a session (the job's tree unless it called setsid).
    It reads every process's stat on the node: a cost that grows with the
    node's processes, so a sandboxed job's tree is walked instead
    (:func:`tree_processes`)."""
    try:
        entries = os.listdir(proc)
    except OSError:
        return []
    found = (read_proc_stat(name, str(proc)) for name in entries if name.isdigit())
    return [st for st in found if st is not None and st.session == session]


def descendants(pid: int, proc: str = "/proc") -> list[int]:
    """The processes below ``pid``, from the kernel's lists of each thread's
    children: a cost that grows with the job's processes, not the node's. In
    a sandbox nothing leaves the tree (an orphan goes to the sandbox's init,
    itself below the leader); outside one, a daemon's orphan goes to the
    node's init, and only the session finds it."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            threads = os.listdir(f"{proc}/{parent}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                fd = os.open(f"{proc}/{parent}/task/{thread}/children", os.O_RDONLY)
                try:
                    children = [int(c) for c in os.read(fd, 1 << 16).split()]
                finally:
                    os.close(fd)
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


def tree_processes(leader: int, session: int) -> list[ProcStat]:
    """The leader and its descendants that are still in its session (a
    recycled pid is in another)."""
    found = (read_proc_stat(pid) for pid in (leader, *descendants(leader)))
    return [st for st in found if st is not None and st.session == session]


def job_processes(leader: int, sandboxed: bool) -> list[ProcStat]:
    """A job's processes, its leader's id also its group's and session's: in
    a sandbox the leader's tree (nothing leaves it), else the session."""
    return tree_processes(leader, leader) if sandboxed else session_processes(leader)


def tree_cpu_seconds(session: int, sandboxed: bool = False) -> float:
    """CPU seconds used so far by the live processes of ``session`` (led by
    its own id); in a sandbox, of the leader's tree.

    cutime/cstime fold in descendants already reaped by their parents.
    """
    return sum(p.cpu for p in job_processes(session, sandboxed))


def signal_tree(pgid: int, sig: int, spare_leader: bool = False) -> list[ProcStat]:
    """Send ``sig`` to the job's process group and to its session's stragglers;
    returns the job's processes as found before the signal (job_processes).

    ``spare_leader``: the leader is the sandbox tool (bwrap), which a
    signal would end, taking the sandbox with it: only SIGKILL goes to the
    whole group, other signals to each process but the leader. (The
    sandbox's own init, PID 1 of its namespace, ignores the signals it has
    no handler for, as the kernel rules for a namespace's init.) In a
    sandbox the stragglers are the leader's tree, where a setsid cannot
    take them."""
    whole_group = not spare_leader or sig == signal.SIGKILL
    if whole_group:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    found = job_processes(pgid, spare_leader)
    for p in found:
        if p.state == "Z" or (whole_group and p.pgrp == pgid) or (not whole_group and p.pid == pgid):
            continue        # gone, reached by killpg, or the sandbox tool
        try:
            os.kill(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return found


def read_tail(path: Path, limit: int) -> tuple[str, bool]:
    """The last ``limit`` bytes of a file as text, and whether it was cut.

    Bytes that are not UTF-8, and NUL (which the server refuses in any
    text), come out as U+FFFD."""
    try:
        # The payload may have put a link or a pipe in the file's place: never
        # follow it out of the job's directory (another job's files, the
        # pilot's own), never block on it.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "", False
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            log.warning("not reading %s: the payload left something other than a file there", path.name)
            return "", False
        size = info.st_size
        if size > limit:
            handle.seek(size - limit)
        data = handle.read(limit if limit >= 0 else -1)
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd"), size > limit


def job_directory(workdir: Path, job_id: int) -> Path:
    """A fresh ``<workdir>/<JobID>``; ``<JobID>.1``, ... if the job came back."""
    workdir.mkdir(parents=True, exist_ok=True)
    candidate = workdir / str(job_id)
    n = 0
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = workdir / f"{job_id}.{n}"


def _left_by_the_batch_system(status: int | None, stop: Stop) -> bool:
    """A job that died of a signal while the pilot is told to leave its jobs.

    The batch system signals every process of the allocation at once, the
    job too, so the job's end may be seen a moment before the pilot's own
    handler has run: a job killed by a signal waits a second for it.
    """
    if not stop.leave_jobs_on_term:
        return False
    if status is not None and os.WIFSIGNALED(status):
        stop.wait(1.0)
    return stop.is_set() and stop.leave_jobs


def may_have_sandboxes(jdl: str) -> bool:
    """Whether the job's JDL may name sandbox files: a JDL that never says
    "sandbox" has none, and its job needs no sandbox call (one request less
    per job); an unknown JDL is asked about."""
    return not jdl or "sandbox" in jdl.casefold()


def job_environment(spec: JobSpec, job_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment (see the module docstring for the order)."""
    env = inherited(os.environ) if base is None else dict(base)
    for name in PRIVATE_ENV:
        env.pop(name, None)
    env["HOME"] = str(job_dir)
    env.update(spec.environment)
    env["WMS_JOB_ID"] = str(spec.job_id)
    env["WMS_JOB_DIR"] = str(job_dir)
    if spec.job_token:
        env[JOB_TOKEN_ENV] = spec.job_token
    else:
        env.pop(JOB_TOKEN_ENV, None)
    return env


def exec_problem(program: str, path: str | None, cwd: Path) -> str | None:
    """Why ``program`` cannot be started as execvp would look for it (a name
    with a slash is a path from ``cwd``, else it is searched on ``path``),
    worded as Python words an OSError; None when it can. The gate's shell
    would only print its own words to the job's stderr and exit 127."""
    if "/" in program:
        candidates = [cwd / program]
    else:
        candidates = [Path(d or ".") / program for d in (path if path is not None else os.defpath).split(":")]
        candidates = [c if c.is_absolute() else cwd / c for c in candidates]
    error = errno.ENOENT
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return None
        if candidate.exists():
            error = errno.EACCES
    return f"[Errno {error}] {os.strerror(error)}: {program!r}"


def _killed_by(status: int, sandboxed: bool) -> int | None:
    """The signal that ended the job, or None if it exited.

    bwrap reports a payload killed by signal N as exit code 128 + N (the
    shell's convention), so in a sandbox such a code is read as that
    signal: a program that exits with 137 by itself is reported as killed
    by signal 9, as a shell would say."""
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    code = os.WEXITSTATUS(status)
    if sandboxed and 128 < code < 128 + signal.NSIG:
        return code - 128
    return None


def _sandbox_refusal(job_dir: Path, stderr_name: str = STDERR_NAME) -> str | None:
    """The minor status "Cannot start: ..." when bwrap could not start the job's
    program (exit 1, its one line first in the job's stderr), else None."""
    first, _ = read_tail(job_dir / stderr_name, 4096)
    line = first.partition("\n")[0]
    return f"Cannot start: {line[len('bwrap: '):]}"[:500] if line.startswith(SANDBOX_EXEC_FAILED) else None


def _fmt_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# -- running ------------------------------------------------------------------


class _Child:
    """The job's leader process, waited for without reaping until we choose."""

    def __init__(self, popen: subprocess.Popen[bytes], sandboxed: bool = False) -> None:
        self.popen = popen
        # The leader is the sandbox tool: soft signals spare it (signal_tree).
        self.sandboxed = sandboxed
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: leader of its group and session
        self.status: int | None = None
        self.rusage: resource.struct_rusage | None = None
        # Readable once the leader ends: the watcher wakes at the job's end, not at its next poll.
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):
            pass                        # not Linux 5.3+: the watcher polls

    def pause(self, timeout: float, stop: "Stop | None") -> None:
        """Up to ``timeout`` seconds: less when the leader ends or ``stop`` is set."""
        waits = [fd for fd in (self.pidfd, stop.fileno() if stop is not None else None) if fd is not None]
        if waits:
            select.select(waits, [], [], timeout)
        else:
            time.sleep(timeout)

    def exited(self) -> bool:
        """True once the leader has ended (it stays a zombie until reap())."""
        if self.status is not None:
            return True
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.exited():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def reap(self) -> None:
        """Kill what is left of the tree, then collect status and rusage."""
        if self.status is not None:
            return
        # The zombie leader still holds the group id, so this cannot hit a
        # recycled group: clean away daemons the job left running.
        # A sandbox's tree is read before its leader dies (its orphans then
        # go to the node's init); a session, once all of it has the signal.
        # A session, as the signal found it: one reading of the node's
        # processes, not two (the wait below drops those that are gone).
        # A sandbox whose leader has ended on its own is gone whole: bwrap
        # ends only after the sandbox's init, whose end the kernel completes
        # only once every process of its namespace has ended (and a bwrap
        # killed takes its init along, --die-with-parent); a zombie leader
        # has no children left to read. The signal to the group is enough.
        left: list[ProcStat] = []
        if self.sandboxed and self.exited():
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            before = self.processes() if self.sandboxed else None
            found = signal_tree(self.pgid, signal.SIGKILL, spare_leader=self.sandboxed)
            left = before if before is not None else [p for p in found if p.state not in ("Z", "X")]
        try:
            _, status, rusage = os.wait4(self.pid, 0)
        except ChildProcessError:
            status, rusage = 0, None
        self.status, self.rusage = status, rusage
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        # Tell Popen it is over, or it warns that the child still runs.
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        # SIGKILL is delivered, not yet acted on: wait (briefly) until the
        # stragglers are really gone, so that the job's end is the end of
        # every process it started.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and left:
            left = [p for p in left if (now := read_proc_stat(p.pid)) is not None and now.session == self.pgid
                    and now.state not in ("Z", "X")]
            if left:
                time.sleep(0.01)

    def processes(self) -> list[ProcStat]:
        """The job's live processes: its sandbox's tree, or its session."""
        return [p for p in job_processes(self.pgid, self.sandboxed) if p.state not in ("Z", "X")]

    def terminate(self, grace: float) -> None:
        """SIGTERM, ``grace`` seconds, SIGKILL; returns once the leader ended."""
        if not self.exited():
            self.signal(signal.SIGTERM)
            if not self.wait_exit(grace):
                signal_tree(self.pgid, signal.SIGKILL)
                self.wait_exit(grace + 5)

    def signal(self, sig: int) -> None:
        signal_tree(self.pgid, sig, spare_leader=self.sandboxed)

    def cpu_seconds(self) -> float:
        if self.rusage is None:
            return 0.0
        return self.rusage.ru_utime + self.rusage.ru_stime


def _gated(launch: Launch, gate: int) -> tuple[list[str], int, tuple[int, ...], bytes]:
    """How to start ``launch`` held at the gate, the pipe whose read end is
    ``gate``: the command, its stdin, the descriptors it keeps, and what the
    pilot writes to let it go.

    bwrap (``launch.args``) is its own gate: it reads its options from the
    pipe to the end before it forks or mounts anything, then closes it (the
    job inherits none of it). A pilot gone before writing leaves it the
    job's command with no options: its bare sandbox has an empty root,
    where no program is found (execvp fails, exit 1). Options longer than
    the pipe holds (64 KiB; a job's are usually under 1 KiB) go in several
    writes, and a pilot killed between two leaves them cut short: bwrap
    refuses an option cut in its middle, or starts a sandbox with its
    namespaces (they come first) and part of its mounts and variables. Its
    session was registered before the first byte, and the watchdog ends it
    with its pilot (--die-with-parent cannot: bwrap asks for it after
    reading, when the pilot may be gone already)."""
    if launch.args:
        return launch.argv, subprocess.DEVNULL, (gate,), launch.args_data()
    return [GATE_SHELL, "-c", GATE, "wms-gate", *launch.argv], gate, (), GO


def _let_go(fd: int, data: bytes, timeout: float) -> None:
    """Write ``data`` to the gate's pipe and close it. It never blocks for
    good (more than the pipe holds waits for the reader): BrokenPipeError
    when the reader has ended, TimeoutError when it read nothing for
    ``timeout`` seconds."""
    try:
        os.set_blocking(fd, False)
        writable = select.poll()
        writable.register(fd, select.POLLOUT)
        view = memoryview(data)
        while view:
            # A closed read end is an event too (POLLERR): the write then fails.
            if not writable.poll(timeout * 1000):
                raise TimeoutError(f"the job's first process read nothing for {timeout:g} s")
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise BrokenPipeError("the job's first process ended before it was let go") from None
    finally:
        os.close(fd)


def _set_cpu_rlimit(pid: int, seconds: float, grace: float) -> None:
    """Kernel back-stop for cpu_time (soft -> SIGXCPU, hard -> SIGKILL)."""
    soft = max(1, math.ceil(seconds))
    hard = soft + max(1, math.ceil(grace))
    try:
        _, current_hard = resource.prlimit(pid, resource.RLIMIT_CPU)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
            soft = min(soft, hard)
        resource.prlimit(pid, resource.RLIMIT_CPU, (soft, hard))
    except (AttributeError, OSError, ValueError) as exc:
        log.debug("cannot set RLIMIT_CPU on %d: %s", pid, exc)


def run_job(
    spec: JobSpec,
    workdir: Path,
    reporter: Reporter,
    *,
    heartbeat_interval: float = 60.0,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    grace: float = 10.0,
    poll_interval: float = 0.5,
    stop: Stop | None = None,
    patience: float = DEFAULT_PATIENCE,
    sessions: Sessions | None = None,
    isolation: Isolation | None = None,
    base_env: Mapping[str, str] | None = None,
) -> JobResult:
    """Run ``spec`` to its end and report it; never raises for job trouble.

    Starts the child only once its Running report is confirmed, heartbeats every
    ``heartbeat_interval`` seconds, enforces the limits (module docstring),
    uploads the tails of stdout/stderr (``output_limit`` bytes each) and
    reports Done or Failed with the exit code. The upload and the final
    report are retried for up to ``patience`` seconds across server
    outages; Done is reported only once the output is stored. The job's
    session is registered in ``sessions`` while it runs, so that it dies
    with the pilot (pilot/orphans.py). ``isolation`` is the sandbox it runs
    in (pilot/isolation.py; None: none, and no warning); ``base_env`` what
    it inherits of the pilot's environment (default: pilot.isolation.inherited).
    """
    with job_context(spec.job_id):
        children: list[_Child] = []     # the job's process, once there is one
        try:
            return _run(spec, Path(workdir), reporter, heartbeat_interval, output_limit, grace, poll_interval, stop,
                        patience, sessions, children, isolation, base_env)
        except Exception as exc:        # a defect of ours: the job must not run on unwatched
            log.exception("the runner failed")
            return _runner_fault(spec, reporter, children, grace, sessions, exc)


def _runner_fault(spec: JobSpec, reporter: Reporter, children: list[_Child], grace: float,
                  sessions: Sessions | None, exc: Exception) -> JobResult:
    """End what the job started and report it Failed, saying what went wrong."""
    for child in children:
        child.terminate(grace)
        child.reap()
        if sessions is not None:
            sessions.remove(child.pgid)
    minor = RUNNER_FAULT_MINOR.format(error=f"{type(exc).__name__}: {exc}")[:500]
    sent = _report(reporter, spec, "Failed", minor, None)
    return JobResult(spec.job_id, "Lost" if sent is False else "Failed", minor, None, reported=bool(sent))


def _patiently(call: Callable[[], Any], what: str, patience: float, sleep: Callable[[float], Any] = time.sleep
               ) -> tuple[bool | None, str]:
    """``call()`` until it succeeds or ``patience`` seconds are spent (each call has
    its own short retries); (True, ""), (False, why) when the job is no longer
    ours, (None, the last error) when the server stayed out of reach."""
    deadline = time.monotonic() + patience
    delay = 1.0
    while True:
        try:
            call()
            return True, ""
        except JobLost as exc:
            log.warning("%s: job is no longer ours (%s)", what, exc)
            return False, str(exc)
        except ClientError as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                log.error("could not %s, giving up: %s", what, exc)
                return None, str(exc)
            log.warning("could not %s (%s); again in %.0f s", what, exc, min(delay, left))
            sleep(min(delay, left))
            delay = min(delay * 2, PATIENCE_STEP_MAX)


def _report(reporter: Reporter, spec: JobSpec, status: str, minor: str, exit_code: int | None) -> bool | None:
    """Report a status: True sent, None failed (network; logged), False the job is not ours any more."""
    try:
        reporter.status(spec.job_id, status, minor, exit_code)
    except JobLost as exc:
        log.warning("job is no longer ours (%s)", exc)
        return False
    except ClientError as exc:
        log.error("could not report %s: %s", status, exc)
        return None
    return True


def _run(
    spec: JobSpec,
    workdir: Path,
    reporter: Reporter,
    heartbeat_interval: float,
    output_limit: int,
    grace: float,
    poll_interval: float,
    stop: Stop | None,
    patience: float,
    sessions: Sessions | None,
    children: list[_Child],
    isolation: Isolation | None = None,
    base_env: Mapping[str, str] | None = None,
) -> JobResult:
    started = time.monotonic()
    job_dir = job_directory(workdir, spec.job_id)

    def failed_to_start(minor: str) -> JobResult:
        log.error("%s", minor)
        sent = _report(reporter, spec, "Failed", minor, None)
        return JobResult(spec.job_id, "Lost" if sent is False else "Failed", minor, None, job_dir, reported=bool(sent))

    try:
        argv = [spec.executable, *shlex.split(spec.arguments)]
    except ValueError as exc:
        return failed_to_start(f"Bad Arguments: {exc}")
    if not spec.executable:
        return failed_to_start("No Executable")

    # -- confirm, then start: the hand-over's second phase --------------------
    # Nothing runs before the Matcher has recorded Running for this pilot:
    # a job whose claim was lost or given to another pilot (lease expired)
    # is refused here and never started twice.
    confirmed, confirmed_at = _confirm(reporter, spec)
    if confirmed is not True:
        minor = "No longer this pilot's job" if confirmed is False else "Running not confirmed"
        return JobResult(spec.job_id, "Lost", minor, None, job_dir, wall_seconds=time.monotonic() - started)
    lease = Lease(spec.lease, spec.run_lease, confirmed_at)

    # -- the input sandbox, into the job's directory before the job starts --
    patterns: list[str] = []
    if reporter.sandbox is not None and may_have_sandboxes(spec.jdl):
        try:
            patterns = fetch_inputs(reporter.sandbox, spec.job_id, job_dir)
        except JobLost as exc:
            log.warning("input sandbox: job is no longer ours (%s)", exc)
            return JobResult(spec.job_id, "Lost", "No longer this pilot's job", None, job_dir,
                             wall_seconds=time.monotonic() - started)
        except (ClientError, SandboxError) as exc:
            return failed_to_start(f"{INPUT_SANDBOX_MINOR}: {exc}"[:500])

    if lease.expired():
        # The input took longer than the start window allows: the server may
        # hand the job out again before this copy would be seen.
        log.warning("the job's lease ran out before it could start: not starting it")
        return JobResult(spec.job_id, "Expired", LEASE_MINOR, None, job_dir, wall_seconds=time.monotonic() - started)

    argv[0] = sandbox_executable(job_dir, spec.executable)
    limits = spec.limits
    sandboxed = isolation is not None and isolation.isolated
    log.info("starting %s in %s (limits h_rt=%s s_rt=%s cpu_time=%s)", shlex.join(argv), job_dir,
             limits.h_rt, limits.s_rt, limits.cpu_time)
    if isolation is not None and not sandboxed:
        log.warning("job %d runs WITHOUT isolation: it can reach this pilot's files and processes (%s)",
                    spec.job_id, isolation.describe())
    env = job_environment(spec, job_dir, base_env)
    if not sandboxed:
        # In a sandbox, bwrap says why the program cannot start (_sandbox_refusal).
        problem = exec_problem(argv[0], env.get("PATH"), job_dir)
        if problem is not None:
            return failed_to_start(f"Cannot start: {problem}")
    gate_read, gate_write = os.pipe()
    try:
        launch = Launch(argv, env) if isolation is None else isolation.launch(argv, job_dir, env, gate_read)
        command, stdin, kept, go = _gated(launch, gate_read)
        with open(job_dir / spec.stdout_name, "wb") as out, \
                open(job_dir / spec.stderr_name, "ab" if spec.stderr_name == spec.stdout_name else "wb") as err:
            popen = subprocess.Popen(
                command,
                cwd=job_dir,
                env=launch.env,
                stdin=stdin,
                pass_fds=kept,
                stdout=out,
                # One file named for both streams gets both, as a shell's 2>&1 gives them.
                stderr=subprocess.STDOUT if spec.stderr_name == spec.stdout_name else err,
                start_new_session=True,  # own group and session: the unit we signal and measure
            )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        os.close(gate_write)
        return failed_to_start(f"Cannot start: {exc}")
    finally:
        os.close(gate_read)
    child = _Child(popen, sandboxed)
    children.append(child)
    # Registered, and limited, before the job runs a single instruction of
    # its own: a pilot killed at any moment leaves no payload unknown to its
    # watchdog (the job waits at the gate until told to go). The CPU limit
    # is inherited by all that the leader starts, bwrap's sandbox too.
    if sessions is not None:
        sessions.add(child.pgid)
    if limits.cpu_time is not None:
        _set_cpu_rlimit(child.pid, limits.cpu_time, grace)
    try:
        _let_go(gate_write, go, GATE_TIMEOUT)
    except OSError as exc:
        # Its first process ended, or stalled, at the gate: the job did not
        # start. reap() kills what is left of it.
        child.reap()
        if sessions is not None:
            sessions.remove(child.pgid)
        return failed_to_start(f"Cannot start: {exc}")

    # Its thread starts when the first heartbeat is due (_watch).
    heartbeats = Heartbeats(lambda: reporter.heartbeat(spec.job_id), lease, heartbeat_interval,
                            name=f"heartbeat-{spec.job_id}")
    try:
        return _watch(spec, job_dir, reporter, child, heartbeats, lease, started, output_limit, grace,
                      poll_interval, stop, patience, sessions, sandboxed, patterns)
    finally:
        heartbeats.stop()


def _confirm(reporter: Reporter, spec: JobSpec, sleep: Callable[[float], Any] = time.sleep
             ) -> tuple[bool | None, float]:
    """The Running report, and when the one that was answered was sent (on the lease clock).

    A report whose answer is lost may have been recorded: the server answers
    a repeated one again (it is idempotent until the first heartbeat), so the
    pilot asks again for as long as the start window lasts, and starts the
    job as soon as it is told the job is its own, or learns at once that it
    is not (False). None: no answer in time; nothing is started, and the
    server takes the job back when its start window closes."""
    first = lease_clock()
    delay = 1.0
    while True:
        sent_at = lease_clock()
        confirmed = _report(reporter, spec, "Running", RUNNING_MINOR, None)
        if confirmed is not None or spec.lease is None or spec.run_lease is None:
            return confirmed, sent_at
        left = first + spec.lease - lease_clock()
        if left <= 0:
            return None, sent_at
        log.warning("no answer to the Running report: asking again in %.0f s whether the job is this pilot's",
                    min(delay, left))
        sleep(min(delay, left))
        delay = min(delay * 2, PATIENCE_STEP_MAX)


def _watch(spec: JobSpec, job_dir: Path, reporter: Reporter, child: _Child, heartbeats: Heartbeats, lease: Lease,
           started: float, output_limit: int, grace: float, poll_interval: float, stop: Stop | None,
           patience: float, sessions: Sessions | None, sandboxed: bool, patterns: list[str]) -> JobResult:
    """Watch the running job to its end (limits, stop, the server's word, the lease), then report it."""
    limits = spec.limits
    verdict: str | None = None  # a Failed minor status decided by the watchdog
    abandon: str | None = None  # "Killed" / "Lost" / "Expired": terminate, report nothing
    usr1_sent: float | None = None
    cpu_seen = 0.0
    looked = False
    while not child.exited():
        elapsed = time.monotonic() - started
        if looked and (limits.cpu_time is not None or sandboxed):
            # In a sandbox the kernel's account of the job's CPU is lost with
            # the sandbox's init (it is not reaped by the pilot's child): the
            # samples are the figure, to within one poll. Not at the first
            # look, as the job starts: it has used nothing yet, and most
            # short jobs end before the second.
            cpu_seen = max(cpu_seen, tree_cpu_seconds(child.pgid, sandboxed))
        looked = True
        if limits.h_rt is not None and elapsed >= limits.h_rt:
            verdict = f"Exceeded h_rt ({_fmt_seconds(limits.h_rt)} s)"
        elif limits.cpu_time is not None and cpu_seen >= limits.cpu_time:
            verdict = f"Exceeded cpu_time ({_fmt_seconds(limits.cpu_time)} s)"
        elif limits.s_rt is not None and elapsed >= limits.s_rt:
            if usr1_sent is None:
                log.info("s_rt reached: sending SIGUSR1")
                child.signal(signal.SIGUSR1)
                usr1_sent = time.monotonic()
            elif time.monotonic() - usr1_sent >= grace:
                verdict = f"Exceeded s_rt ({_fmt_seconds(limits.s_rt)} s)"
        if verdict is None and stop is not None and stop.is_set():
            if stop.leave_jobs:
                abandon = "Left"
            else:
                verdict = stop.reason
        if heartbeats.fault is not None:
            raise heartbeats.fault
        if abandon is None and heartbeats.verdict is not None:
            abandon = heartbeats.verdict
        if abandon is None and lease.expired():
            log.warning("no heartbeat answered for half the job's lease (%.0f s): the server will hand it out "
                        "again, stopping this copy", (lease.span or 0) * SHARE)
            abandon = "Expired"
        if verdict is not None or abandon is not None:
            log.info("terminating: %s", verdict or abandon)
            heartbeats.keep_going()
            child.terminate(lease.kill_grace(grace) if abandon == "Expired" else grace)
            break
        # Wake at the job's end or when the pilot stops; otherwise look again
        # after a poll, or when the first heartbeat is due.
        due = heartbeats.start_when_due()
        child.pause(poll_interval if due is None else min(poll_interval, due), stop)

    child.reap()
    if sessions is not None:
        sessions.remove(child.pgid)     # at once: the session id may be reused from now on
    if abandon is None and verdict is None and stop is not None and _left_by_the_batch_system(child.status, stop):
        abandon = "Left"
    ended = time.monotonic()
    wall = ended - started
    cpu = max(cpu_seen, child.cpu_seconds())
    status = child.status or 0
    signalled = _killed_by(status, sandboxed)
    if signalled is not None:
        sig = signalled
        exit_code = 128 + sig  # the shell's convention, so exit_code stays an int
        if verdict is None and limits.cpu_time is not None and sig in (signal.SIGXCPU, signal.SIGKILL) \
                and cpu >= limits.cpu_time - 0.5:
            verdict = f"Exceeded cpu_time ({_fmt_seconds(limits.cpu_time)} s)"
        minor = verdict or f"Killed by signal {sig}"
    else:
        exit_code = os.WEXITSTATUS(status)
        minor = verdict or (DONE_MINOR if exit_code == 0 else f"Exit code {exit_code}")
        if sandboxed and exit_code == 1 and verdict is None:
            minor = _sandbox_refusal(job_dir, spec.stderr_name) or minor
    log.info("ended: %s (exit code %s, %.1f s wall, %.2f s cpu)", abandon or minor, exit_code, wall, cpu)

    if abandon is not None:
        minor = {"Killed": "Killed by the WMS", "Left": "Left to the server: the pilot was ended",
                 "Expired": LEASE_MINOR}.get(abandon, "No longer this pilot's job")
        return JobResult(spec.job_id, abandon, minor, exit_code, job_dir, cpu, wall)

    final = "Done" if verdict is None and exit_code == 0 else "Failed"
    # The output sandbox goes whatever the job's end: a failed job's files
    # are what its owner needs most.
    if reporter.sandbox is not None and patterns:
        calls = reporter.sandbox
        problems: list[str] = []

        def send() -> None:
            problems[:] = send_outputs(calls, spec.job_id, job_dir, patterns)

        sent_files, error = _patiently(send, "upload output sandbox", patience)
        if sent_files is False:
            return JobResult(spec.job_id, "Lost", "No longer this pilot's job", exit_code, job_dir, cpu, wall)
        problem = error if sent_files is None else "; ".join(problems)
        if problem and final == "Done":
            final, minor = "Failed", f"{OUTPUT_SANDBOX_MINOR}: {problem}"[:500]
    # The output stays in the job directory until the server has stored it.
    stdout, cut_out = read_tail(job_dir / spec.stdout_name, output_limit)
    stderr, cut_err = ("", False) if spec.stderr_name == spec.stdout_name else \
        read_tail(job_dir / spec.stderr_name, output_limit)
    truncated = cut_out or cut_err
    # One call: the status and the output, stored together or not at all.
    # Each try says how long ago the payload ended: the server dates the end
    # by that, not by when the report (after the uploads) got through.
    sent, error = _patiently(lambda: reporter.status(spec.job_id, final, minor, exit_code, time.monotonic() - ended,
                                                     output=(stdout, stderr, truncated)),
                             f"report {final} with the output", patience)
    if sent is None:          # never Done without its output: say what happened
        final, minor = "Failed", OUTPUT_LOST_MINOR.format(error=error)[:500]
        sent, _ = _patiently(lambda: reporter.status(spec.job_id, final, minor, exit_code,
                                                     time.monotonic() - ended), f"report {final}", patience)
    return JobResult(spec.job_id, "Lost" if sent is False else final, minor, exit_code, job_dir, cpu, wall,
                     truncated, reported=bool(sent))
