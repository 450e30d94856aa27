"""``wms-pilot``: describe the node, pull jobs, run them, report, stop.

Lifecycle
    1. Probe the node (:mod:`pilot.probe`).
    2. Pools: ``--pools``, else one ``GET /matcher/submit-pools`` for the
       pilot's Site/CE/Queue (the TaskQueueDirector case). If that call fails
       the pilot asks with ``pools: null`` rather than dying. A queue that
       serves no pool still runs the jobs without requirements (they have
       no pool and may run anywhere their VO may), so the pilot asks anyway.
    3. One slot worker thread per slot, like DIRAC's pool computing
       element. Match requests are serialised by a lock, so the ``slots``
       each one sends is exact and a multi-slot job can never overbook the
       node; the job's ``Slots`` are taken before the next request goes out
       and given back when it ends. A worker finding no free slot waits for
       one (that is not a "no match"). With more than one slot free, a
       worker asks for as many jobs at once as there are free slots and idle
       workers (``POST /matcher/request-jobs``; one job at a time with a
       server that answers 404 for it): it runs the first and leaves the
       others, their slots taken, to the idle workers, which an empty
       answer's wait does not hold back. Each job runs in the worker's thread
       through :func:`pilot.runner.run_job`, with its input sandbox fetched
       before it starts and its output sandbox sent after it ends
       (:mod:`pilot.sandboxes`).
    4. Stops: a worker ends after ``--max-empty`` consecutive empty answers
       (a failed request counts as empty, so a dead server ends the pilot
       too), waiting longer after each (``--poll`` doubled, with jitter:
       pilot/backoff.py); a busy server's 429 is not an empty answer, the
       client waits out its Retry-After; no worker asks once the remaining lifetime is below
       ``--min-time-left``; SIGTERM/SIGINT terminate running jobs, which are
       reported Failed "Pilot stopped" (with ``--on-sigterm leave``, the
       choice of pilots sent to a batch system, a SIGTERM ends them
       unreported and the server runs them again); at the end of
       ``--lifetime`` running jobs are stopped the same way ("Pilot lifetime reached") because the
       batch system is about to kill the pilot without warning. Exit 0 in
       all these cases; 2 for bad usage (no token, bad options).
    5. The token (pilot/credentials.py): read from --token-file or
       WMS_PILOT_TOKEN (``--token`` works but shows in ``ps``), then
       renewed before it expires. If the server refuses it (expired,
       revoked, the pilot ended server-side) the pilot stops: no more
       jobs, running ones ended unreported for the server to run again;
       exit 3.

``cpu_time_left`` sent to the Matcher is ``--cpu-time-left`` (default: the
lifetime) minus the wall time already spent, so it only offers jobs that
still fit.

``main(argv)`` returns the exit code and has no side effect beyond the
``pilot`` logger and the signal handlers (installed only in the main
thread), so it runs the same as ``wms-pilot``, ``python -m pilot`` or a
subprocess in tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pilot import __version__, logs
from pilot.backoff import empty_delay
from pilot.client import API_PREFIX, DEFAULT_URL, MAX_BATCH, ApiError, Client, ClientError
from pilot.credentials import CREDENTIAL_LOST, EXIT_CREDENTIAL, Keeper, forget_token_file, load_token, protect_process
from pilot.leases import call_timeout
from pilot.isolation import (APPTAINER, BUBBLEWRAP, DEFAULT_APPTAINER_COMMAND, MODES, NONE, Isolation, inherited,
                             probe, template_problem)
from pilot.orphans import Sessions, end_orphans, private_dir
from pilot.reports import Reports
from pilot.probe import NodeInfo, cpu_count, hostname, probe_node
from pilot.sandboxes import SandboxCalls
from pilot.runner import DEFAULT_OUTPUT_LIMIT, DEFAULT_PATIENCE, JobSpec, Reporter, Stop, run_job

log = logging.getLogger("pilot")

EXIT_OK = 0
EXIT_USAGE = 2
# A pilot started by hand has no batch system limit to report. Two days, so
# that it offers more than a job of the default CPUTime (operations.yaml
# DefaultCPUTime, 86,400 s) needs even after it has run for a while: with a
# lifetime of exactly one day it would offer 86,399 s a second after its
# start and never take such a job.
DEFAULT_LIFETIME = 2 * 86400.0


def split_list(value: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (for --pools and --tags)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def default_pilot_id() -> str:
    """host + pid + random: unique even for many pilots on one node."""
    return f"{hostname().split('.')[0]}-{os.getpid()}-{secrets.token_hex(4)}"


def default_state_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"wms-pilot-{os.getuid()}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wms-pilot",
        description="Pilot: describe this node, pull jobs from the Matcher, run and report them.",
    )
    p.add_argument("-help", action="help", help="print this help (as Grid Engine's commands spell it)")
    p.add_argument("--version", action="version", version=f"wms-pilot (wms) {__version__}",
                   help="print the version and exit")
    env = os.environ
    p.add_argument("--url", default=env.get("WMS_URL", DEFAULT_URL), help="server URL (env WMS_URL)")
    p.add_argument("--token", help="bearer token: visible to every user of the node in ps, prefer --token-file "
                                   "or the environment (else --token-file, else env WMS_PILOT_TOKEN, then WMS_TOKEN)")
    p.add_argument("--token-file", help="file holding the bearer token (readable by the pilot's user only)")
    p.add_argument("--site", required=True)
    p.add_argument("--ce", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--pools", help="P1,P2: SubmitPools to serve (default: ask the Matcher for the queue's)")
    p.add_argument("--slots", type=int, help="concurrent slots (default: the cores this process may use)")
    p.add_argument("--pilot-id", help="default: host-pid-random")
    p.add_argument("--max-empty", type=int, default=3, help="stop a slot after N consecutive no-match answers")
    p.add_argument("--poll", type=float, default=5.0,
                   help="seconds to wait after an empty answer (doubled after each further one, up to 8x, with jitter)")
    p.add_argument("--heartbeat", type=float, default=60.0, help="seconds between heartbeats of a running job (more often when its "
                        "lease needs it: an eighth of the lease)")
    p.add_argument("--workdir", help="where job directories go (default: a temporary directory, removed at exit)")
    p.add_argument("--output-limit", type=int, default=DEFAULT_OUTPUT_LIMIT,
                   help="bytes of stdout and of stderr uploaded (the tail)")
    p.add_argument("--lifetime", type=float, default=DEFAULT_LIFETIME,
                   help="seconds this pilot may live (default: two days)")
    p.add_argument("--cpu-time-left", type=float, help="CPU seconds offered at start (default: --lifetime)")
    p.add_argument("--min-time-left", type=float, default=300.0,
                   help="stop asking for jobs when less lifetime than this remains")
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL for a job")
    p.add_argument("--on-sigterm", choices=["fail", "leave"], default="fail",
                   help="a SIGTERM to the pilot: report its jobs Failed (fail), or end them unreported for "
                        "the server to run again (leave: the batch system is ending the allocation)")
    p.add_argument("--tags", help="T1,T2: tags of this resource")
    p.add_argument("--platform", help="DIRAC platform (default: probed, e.g. x86_64-el9)")
    p.add_argument("--http-timeout", type=float, default=30.0, help="seconds per HTTP call")
    p.add_argument("--retries", type=int, default=3, help="retries of a failed HTTP call")
    p.add_argument("--state-dir", help="where this node's pilots record their job sessions, so that a pilot "
                   "ends those of a dead predecessor (default: wms-pilot-UID in the temporary directory)")
    p.add_argument("--patience", type=float, default=DEFAULT_PATIENCE,
                   help="seconds a finished job's output upload and report are retried while the server is away")
    p.add_argument("--isolation", choices=MODES, default=env.get("WMS_PILOT_ISOLATION", BUBBLEWRAP),
                   help="the sandbox each job runs in (default bubblewrap; none only by choice: payloads then run "
                        "beside the pilot; env WMS_PILOT_ISOLATION)")
    p.add_argument("--isolation-paths", help="P1,P2: more read-only paths payloads see (bubblewrap; the system's "
                   "directories and the pilot's Python are always there)")
    p.add_argument("--isolation-command", default=DEFAULT_APPTAINER_COMMAND,
                   help="the command that runs a job for --isolation apptainer, the job's command appended; "
                        "{job_dir} and {image} are filled in")
    p.add_argument("--isolation-image", default="", help="the container image of --isolation apptainer")
    p.add_argument("--if-no-isolation", choices=["owner", "run"], default="owner",
                   help="when the sandbox does not work on this node (no user namespaces, no bwrap): take only "
                        "the jobs of this pilot's own user (owner), or run every job unisolated (run)")
    p.add_argument("--job-env", help="NAME,PREFIX_*: more of the pilot's environment for its payloads (they "
                   "get only PATH, LANG, LC_*, TZ, TERM and SLURM_* of it otherwise)")
    p.add_argument("--keep-token-file", action="store_true",
                   help="leave --token-file in place even when jobs run unisolated (it is removed then, since "
                        "a payload could read it)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   type=str.upper)
    return p


@dataclass
class Settings:
    """The parsed options, resolved (token read, lists split, defaults filled)."""

    url: str
    token: str
    site: str
    ce: str
    queue: str
    pools: list[str] | None
    slots: int
    pilot_id: str
    max_empty: int
    poll: float
    heartbeat: float
    workdir: Path | None
    output_limit: int
    lifetime: float
    cpu_time_left: float
    min_time_left: float
    grace: float
    leave_jobs_on_term: bool
    tags: list[str]
    platform: str | None
    http_timeout: float
    retries: int
    log_level: str
    patience: float = DEFAULT_PATIENCE
    state_dir: Path | None = None
    isolation: Isolation = Isolation()
    if_no_isolation: str = "owner"
    token_file: str | None = None
    keep_token_file: bool = False


def resolve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Settings:
    """Turn options into settings; ``parser.error`` (exit 2) on bad ones."""
    try:
        # Read once, then out of the environment: no job inherits it.
        token = load_token(args.token, args.token_file, os.environ, scrub=True)
    except OSError as exc:
        parser.error(f"cannot read --token-file: {exc.strerror or exc}")
    if not token:
        parser.error("no token: give --token-file, set WMS_PILOT_TOKEN, or give --token")
    for name in ("max_empty", "output_limit"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    if args.slots is not None and args.slots < 1:
        parser.error("--slots must be at least 1")
    if args.patience < 0:
        parser.error("--patience must not be negative")
    for name in ("poll", "heartbeat", "lifetime"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    if args.isolation == APPTAINER:
        problem = template_problem(args.isolation_command)
        if problem:
            parser.error(f"--isolation-command: {problem}")
        if "{image}" in args.isolation_command and not args.isolation_image:
            parser.error("--isolation apptainer needs --isolation-image (the container the jobs run in)")
    return Settings(
        url=args.url,
        token=token,
        site=args.site,
        ce=args.ce,
        queue=args.queue,
        pools=split_list(args.pools) if args.pools is not None else None,
        slots=args.slots or cpu_count(),
        pilot_id=args.pilot_id or default_pilot_id(),
        max_empty=max(1, args.max_empty),
        poll=args.poll,
        heartbeat=args.heartbeat,
        workdir=Path(args.workdir) if args.workdir else None,
        output_limit=args.output_limit,
        lifetime=args.lifetime,
        cpu_time_left=args.cpu_time_left if args.cpu_time_left is not None else args.lifetime,
        min_time_left=args.min_time_left,
        grace=args.grace,
        leave_jobs_on_term=args.on_sigterm == "leave",
        tags=split_list(args.tags),
        platform=args.platform,
        http_timeout=args.http_timeout,
        retries=args.retries,
        log_level=args.log_level,
        patience=args.patience,
        state_dir=Path(args.state_dir) if args.state_dir else default_state_dir(),
        isolation=Isolation(mode=args.isolation, paths=tuple(split_list(args.isolation_paths)),
                            command=args.isolation_command, image=args.isolation_image,
                            note="chosen with --isolation none" if args.isolation == NONE else "",
                            env_names=tuple(split_list(args.job_env))),
        if_no_isolation=args.if_no_isolation,
        token_file=None if args.token else args.token_file,
        keep_token_file=args.keep_token_file,
    )


class Pilot:
    """The slot workers and the shared state they need."""

    def __init__(self, settings: Settings, client: Client, workdir: Path, stop: Stop | None = None,
                 sessions: Sessions | None = None, isolation: Isolation | None = None,
                 owner_only: bool = False) -> None:
        self.s = settings
        # How payloads run (pilot/isolation.py); owner_only: no sandbox here,
        # so only jobs of this pilot's own user are asked for.
        self.isolation = isolation or settings.isolation
        self.owner_only = owner_only
        # WMS_URL as the command line takes it: the server, not its API's path.
        self.job_env = {**inherited(os.environ, settings.isolation.env_names),
                        "WMS_URL": client.base.removesuffix(API_PREFIX)}
        self.sessions = sessions
        self.client = client
        self.reports = Reports(client)
        self.workdir = workdir
        self.stop = stop or Stop()
        self.started = time.monotonic()
        self.free = settings.slots
        self.slots_changed = threading.Condition()
        self.request_lock = threading.Lock()  # one match request at a time: exact free-slot counts
        # Jobs of a batched answer waiting for an idle worker (their slots already taken),
        # and the workers alive and not running a job (a batch asks for no more jobs than that).
        self.pending: deque[tuple[JobSpec, int]] = deque()
        self.idle = settings.slots
        self.batched = True                   # False once the server says it has no request-jobs
        self.pools: list[str] | None = settings.pools
        self.node: NodeInfo = probe_node(settings.platform)
        self.jobs_run = 0
        self.credential_lost: str | None = None

    # -- time ----------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def time_left(self) -> float:
        return self.s.lifetime - self.elapsed()

    def cpu_time_left(self) -> int:
        return max(0, int(self.s.cpu_time_left - self.elapsed()))

    # -- server calls ------------------------------------------------------------

    def resolve_pools(self) -> None:
        """Fill ``self.pools`` from the Matcher when not given."""
        if self.pools is not None:
            return
        try:
            self.pools = self.client.submit_pools(self.s.site, self.s.ce, self.s.queue)
        except ClientError as exc:
            log.error("could not get the submit pools (%s); asking with pools=null", exc)
            return
        log.info("submit pools of %s/%s/%s: %s", self.s.site, self.s.ce, self.s.queue,
                 ", ".join(self.pools) if self.pools else "none (only jobs without requirements may come)")

    def request_body(self, free: int) -> dict[str, Any]:
        """The request-job body of the contract, with a fresh load sample."""
        self.node = self.node.sampled()
        return {
            "site": self.s.site,
            "ce": self.s.ce,
            "queue": self.s.queue,
            "pools": self.pools,
            "host": self.node.host,
            "slots": free,
            "load": self.node.load(),
            "platform": self.node.platform,
            "cpu_time_left": self.cpu_time_left(),
            "tags": self.s.tags,
            "pilot_id": self.s.pilot_id,
            **({"owner_only": True} if self.owner_only else {}),
        }

    def declaration(self) -> dict[str, Any]:
        """What the pilot tells the server of itself with each token renewal: its
        slots (the most its token may hold) and how its payloads are isolated."""
        return {"slots": self.s.slots, "isolation": self.isolation.mode,
                **({"isolation_note": self.isolation.note[:200]} if self.isolation.note else {})}

    def reporter(self, attempt: int | None, spec: JobSpec | None = None) -> Reporter:
        """The server calls for one job, quoting the attempt it was handed out in;
        its heartbeats wait for an answer no longer than its lease allows."""
        pid, client = self.s.pilot_id, self.client
        beat_timeout = call_timeout(self.s.http_timeout, spec.lease, spec.run_lease) if spec else None
        return Reporter(
            # Through the slots' shared sender: one call for the reports made together.
            status=lambda job_id, status, minor, code, ended_ago=None, output=None: self.reports.status(
                job_id, pid, status, minor, code, attempt, ended_ago=ended_ago, output=output),
            heartbeat=lambda job_id: bool(client.heartbeat(job_id, pid, attempt, timeout=beat_timeout).get("Kill")),
            sandbox=SandboxCalls(
                manifest=lambda job_id: client.sandbox(job_id, pid, attempt),
                download=lambda job_id, name, target: client.download_input(job_id, pid, name, target, attempt),
                upload=lambda job_id, name, source, digest: client.upload_output(job_id, pid, name, source, digest,
                                                                                 attempt),
            ),
        )

    # -- slot workers --------------------------------------------------------

    def take_job(self, pending_only: bool = False) -> tuple[JobSpec, int] | None | Literal[False]:
        """A job left by another worker's batch, else one match request with the free slots now.

        Returns (job, slots taken), None for an empty answer (or a failed
        call), or False when there is no free slot or the pilot stops.
        ``pending_only``: a left job or None, never a request.
        """
        with self.slots_changed:
            while self.free <= 0 and not self.pending and not self.stop.is_set() and not pending_only:
                self.slots_changed.wait(1.0)
            if self.stop.is_set():
                return False
            if self.pending or pending_only:
                return self._started(self.pending.popleft()) if self.pending else None
        with self.request_lock:
            with self.slots_changed:
                if self.pending:
                    return self._started(self.pending.popleft())
                free, idle = self.free, self.idle
            if free <= 0:
                return False
            jobs = self.ask(free, max(1, min(free, idle, MAX_BATCH)))
            taken: list[tuple[JobSpec, int]] = []
            left = free
            for job in jobs:
                try:
                    spec = JobSpec.from_match(job)
                except (KeyError, TypeError, ValueError) as exc:
                    # Not the whole answer: it holds the payload's job token.
                    log.error("unusable job in the answer (%s): job %r", exc,
                              job.get("JobID") if isinstance(job, dict) else type(job).__name__)
                    continue
                slots = spec.slots
                if slots > left:
                    # The Matcher was told what is free; more is its bug. Run the job
                    # but do not let the counter go below zero and stall the others.
                    log.warning("job %d wants %d slots, only %d free", spec.job_id, slots, left)
                    slots = left
                left -= slots
                taken.append((spec, slots))
            if not taken:
                return None
            with self.slots_changed:
                self.free -= sum(slots for _, slots in taken)
                self.pending.extend(taken[1:])
                self.slots_changed.notify_all()
                return self._started(taken[0])

    def _started(self, job: tuple[JobSpec, int]) -> tuple[JobSpec, int]:
        """A worker takes ``job`` (under ``slots_changed``): it is no longer idle."""
        self.idle -= 1
        return job

    def ask(self, free: int, count: int) -> list[Any]:
        """The jobs of one match request (none for an empty answer or a failed call):
        request-jobs for ``count`` > 1, request-job for one, or when the server
        has no request-jobs (HTTP 404: a server older than the route). As the
        server sent them: each is checked by ``JobSpec.from_match``."""
        body = self.request_body(free)
        try:
            if count > 1 and self.batched:
                try:
                    answer = self.client.request_jobs(body, count)
                except ApiError as exc:
                    if exc.status != 404:
                        raise
                    log.info("the server has no request-jobs (HTTP 404): asking for one job at a time")
                    self.batched = False
                else:
                    if not answer["jobs"]:
                        log.info("no match: %s", answer.get("reason") or "no reason given")
                    return answer["jobs"]
            answer = self.client.request_job(body)
        except ClientError as exc:
            log.error("request-job failed: %s", exc)
            return []
        if not answer.get("match"):
            log.info("no match: %s", answer.get("reason", "no reason given"))
            return []
        return [answer.get("job")]

    def give_back(self, slots: int) -> None:
        with self.slots_changed:
            self.free += slots
            self.idle += 1
            self.slots_changed.notify_all()

    def leave(self) -> bool:
        """Whether a worker may end now: not while a batch's job waits for a worker."""
        with self.slots_changed:
            if self.pending and not self.stop.is_set():
                return False
            self.idle -= 1
            return True

    def pause(self, seconds: float) -> None:
        """The wait after an empty answer, cut short by a batch's job left for this worker or by a stop."""
        deadline = time.monotonic() + seconds
        with self.slots_changed:
            while not self.pending and not self.stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self.slots_changed.wait(min(remaining, 0.2))

    def slot_worker(self, index: int) -> None:
        """Ask, run, repeat; until max-empty, too little lifetime, or stop."""
        empty = 0
        while not self.stop.is_set():
            late = self.time_left() < self.s.min_time_left
            if late and self.leave():
                log.info("slot %d: %.0f s of lifetime left, less than %.0f: no more jobs",
                         index, self.time_left(), self.s.min_time_left)
                break
            if empty >= self.s.max_empty and self.leave():
                log.info("slot %d: %d empty answers in a row, stopping", index, empty)
                break
            got = self.take_job(pending_only=late or empty >= self.s.max_empty)
            if got is False:
                continue
            if got is None:
                if empty >= self.s.max_empty or late:
                    continue                    # a batch's job went to another worker: try to leave again
                empty += 1
                if empty < self.s.max_empty:
                    # Longer after each empty answer in a row, and never in step
                    # with the other pilots (pilot/backoff.py).
                    self.pause(empty_delay(self.s.poll, empty))
                continue
            empty = 0
            spec, taken = got
            log.info("slot %d: matched job %d (%d slot(s))", index, spec.job_id, spec.slots)
            try:
                result = run_job(
                    spec,
                    self.workdir,
                    self.reporter(spec.attempt, spec),
                    heartbeat_interval=self.s.heartbeat,
                    output_limit=self.s.output_limit,
                    grace=self.s.grace,
                    stop=self.stop,
                    patience=self.s.patience,
                    sessions=self.sessions,
                    isolation=self.isolation,
                    base_env=self.job_env,
                )
                log.info("slot %d: job %d %s: %s", index, spec.job_id, result.status, result.minor_status)
            except Exception:  # a bug in one job's handling must not end the pilot
                log.exception("slot %d: job %d crashed the runner", index, spec.job_id)
            finally:
                self.jobs_run += 1
                self.give_back(taken)

    def lose_credential(self, reason: str) -> None:
        """The token is gone for good: stop, leaving running jobs to the server (their reports would be refused)."""
        self.credential_lost = reason
        self.stop.stop(CREDENTIAL_LOST, leave_jobs=True)

    def run(self) -> int:
        """Run the workers until they all end; returns the exit code."""
        log.info("node %s: %d cores, arch %s, platform %s, %d slot(s), lifetime %.0f s",
                 self.node.host, self.node.cores, self.node.arch, self.node.platform, self.s.slots, self.s.lifetime)
        if self.isolation.isolated:
            log.info("payloads run isolated: %s", self.isolation.describe())
        else:
            log.warning("payloads run WITHOUT isolation: %s%s", self.isolation.describe(),
                        "; only this pilot's own user's jobs are taken" if self.owner_only else "")
        keeper = Keeper(self.client, self.s.pilot_id, self.stop, self.lose_credential, declaration=self.declaration())
        if not keeper.start():
            log.error("the server refuses this pilot's token: %s", keeper.failed)
            return EXIT_CREDENTIAL
        self.resolve_pools()
        workers = [
            threading.Thread(target=self.slot_worker, args=(i,), name=f"slot-{i}", daemon=True)
            for i in range(self.s.slots)
        ]
        for w in workers:
            w.start()
        # Join in short steps so the main thread stays free to run signal
        # handlers and to notice the end of the lifetime.
        while alive := [w for w in workers if w.is_alive()]:
            if self.time_left() <= 0:
                self.stop.stop("Pilot lifetime reached")
            alive[0].join(0.2)
        self.stop.set()                     # ends the token keeper
        log.info("pilot ends after %.0f s, %d job(s) run", self.elapsed(), self.jobs_run)
        return EXIT_CREDENTIAL if self.credential_lost else EXIT_OK


def install_signal_handlers(stop: Stop) -> None:
    """SIGTERM/SIGINT stop the pilot gracefully (jobs terminated and reported;
    with ``--on-sigterm leave`` a SIGTERM leaves them to the server)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, _frame: object) -> None:
        log.warning("received %s: stopping", signal.Signals(signum).name)
        stop.stop("Pilot stopped", leave_jobs=signum == signal.SIGTERM and stop.leave_jobs_on_term)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def settle_isolation(settings: Settings, workdir: Path) -> tuple[Isolation, bool]:
    """The isolation this node allows, and whether only the pilot's own user's
    jobs may run: the sandbox is tried once for real; where it fails the pilot
    says so and follows --if-no-isolation."""
    wanted = settings.isolation
    scratch = Path(tempfile.mkdtemp(prefix="probe-", dir=workdir))
    try:
        problem = probe(wanted, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if problem is None:
        return wanted, False
    owner_only = settings.if_no_isolation == "owner"
    log.error("isolation %s does not work on this node: %s; %s", wanted.mode, problem,
              "taking only this pilot's own user's jobs (--if-no-isolation owner)" if owner_only
              else "running every job WITHOUT isolation (--if-no-isolation run)")
    note = f"{wanted.mode} does not work on this node: {problem}"
    return dataclasses.replace(wanted, mode=NONE, note=note), owner_only


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``wms-pilot``; returns the exit code."""
    # First of all: no process of this user may read the pilot's memory or
    # environment (its token) through /proc or ptrace (pilot/credentials.py).
    protect_process()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        settings = resolve(args, parser)
    except SystemExit as exc:  # argparse: usage errors are 2, --help is 0
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    logs.setup(settings.pilot_id, settings.log_level)
    if os.geteuid() == 0:
        log.warning("running as root: a pilot should run as an unprivileged user (a payload that escaped its "
                    "sandbox would hold the whole node)")
    stop = Stop(leave_jobs_on_term=settings.leave_jobs_on_term)
    install_signal_handlers(stop)
    own_workdir = settings.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="wms-pilot-")) if own_workdir else settings.workdir
    assert workdir is not None
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"wms-pilot: cannot create --workdir {workdir}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    client = Client(settings.url, settings.token, timeout=settings.http_timeout, retries=settings.retries)
    log.info("pilot %s starting against %s, workdir %s", settings.pilot_id, client.base, workdir)
    # Payloads die with the pilot, and those of a dead predecessor end now (orphans.py).
    try:
        state_dir = private_dir(settings.state_dir or default_state_dir())
    except OSError as exc:
        print(f"wms-pilot: --state-dir: {exc}", file=sys.stderr)
        return EXIT_USAGE
    ended = end_orphans(state_dir)
    if ended:
        log.warning("ended %d job session(s) left by dead pilots on this node", ended)
    isolation, owner_only = settle_isolation(settings, workdir)
    if settings.token_file and not isolation.isolated:
        forget_token_file(settings.token_file, settings.keep_token_file)
    sessions = Sessions(state_dir, settings.pilot_id)
    sessions.start_watchdog()
    try:
        return Pilot(settings, client, workdir, stop, sessions, isolation, owner_only).run()
    finally:
        sessions.close()
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
