"""Job submission: JDL in, task-queue entries out, in one transaction.

The flow (DESIGN.md): parse every JDL (parametric ones expand here), run
each job through the optimizer chain in memory, and only when every job
of the request has passed, store pools, pool-to-queue rows, task queues,
jobs, JDLs and status history in one transaction. A request with one bad
job is refused whole and stores nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping, Sequence

from sqlalchemy import Connection

from wms.core import caps, jdl, pools
from wms.core import holds as hold_rules
from wms.core.holds import Hold
from wms.core.classad import render_record
from wms.core.errors import InvalidInput, TooLarge, WmsError
from wms.core.limits import DEFAULT as DEFAULT_LIMITS, Limits
from wms.core.optimizers import ChainEnv, Job
from wms.core.requirements import eligible_sites
from wms.core.identity import Identity
from wms.core.states import HoldType, JobStatus
from wms.core.task_queues import TaskQueueDefinition
from wms.db import caps as caps_db
from wms.db import holds as holds_db
from wms.db import jobs as jobs_db
from wms.db import pools as pools_db
from wms.db import task_queues as tq_db
from wms.db.engine import reading
from wms.services.feasibility import flag_unknown_names, flag_unrunnable
from wms.services.matcher import forget_waiting_task_queues
from wms.services.retry import run_in_transaction
from wms.services import jobs as jobs_service
from wms.services import reservations as reservations_service
from wms.services import sandboxes as sandboxes_service
from wms.services.runtime import Runtime

SOURCE_MANAGER = "JobManager"
SOURCE_OPTIMIZERS = "Optimizers"
SOURCE_TASK_QUEUE = "TaskQueue"


@dataclass(frozen=True)
class SubmitOptions:
    """Command-line overrides applied to every job (``wms submit -l ..`` etc.)."""

    resource_requests: Mapping[str, Any] = field(default_factory=dict)
    soft_resource_requests: Mapping[str, Any] = field(default_factory=dict)
    parallel_environment: tuple[str, int] | None = None
    reservation: int | None = None
    project: str | None = None
    job_name: str | None = None

    def overrides(self) -> dict[str, Any]:
        """The JDL attributes these options set; requests merge with the JDL's own."""
        out: dict[str, Any] = {}
        if self.resource_requests:
            out["ResourceRequests"] = dict(self.resource_requests)
        if self.soft_resource_requests:
            out["SoftResourceRequests"] = dict(self.soft_resource_requests)
        if self.parallel_environment is not None:
            name, slots = self.parallel_environment
            out["ParallelEnvironment"] = name
            out["NumberOfProcessors"] = slots
        if self.reservation is not None:
            out["Reservation"] = self.reservation
        if self.project is not None:
            out["Project"] = self.project
        if self.job_name is not None:
            out["JobName"] = self.job_name
        return out


def parse_sources(
    sources: Iterable[tuple[str, str]], options: SubmitOptions, limit: int, limits: Limits = DEFAULT_LIMITS
) -> list[tuple[str, jdl.JobDescription]]:
    """Every job of every JDL text, with its source name (``file.jdl`` or ``file.jdl[3]``).

    At most *limit* jobs in all (max_jobs_per_submission): a bulk list longer
    than that is refused before any JDL is read, and a parametric JDL before
    its jobs are made. *limits* bound each text (wms.core.limits).
    """
    sources = list(sources)
    if len(sources) > limit:
        raise TooLarge(f"too many jobs in one submission: {len(sources)} JDLs, more than {limit} "
                       "(max_jobs_per_submission)")
    overrides = options.overrides()
    out: list[tuple[str, jdl.JobDescription]] = []
    for n, (source, text) in enumerate(sources):
        # each JDL after this one is at least one more job
        room = limit - len(out) - (len(sources) - n - 1)
        descriptions = jdl.parse_jdl(text, source, overrides=overrides, limits=limits, max_jobs=room)
        if len(descriptions) == 1:
            out.append((source, descriptions[0]))
        else:
            out.extend((f"{source}[{i}]", d) for i, d in enumerate(descriptions))
        if len(out) > limit:
            raise TooLarge(f"too many jobs in one submission: more than {limit} (max_jobs_per_submission)")
    if not out:
        raise InvalidInput("nothing to submit: no job description given")
    return out


def check_retries(parsed: list[tuple[str, jdl.JobDescription]], max_reschedule: int) -> None:
    """A job asking for more retries than max_reschedule allows is refused: it would
    silently get fewer than it asked for (wms/core/retries.py)."""
    for source, description in parsed:
        if description.max_retries > max_reschedule:
            raise InvalidInput(f"{source}: MaxRetries = {description.max_retries} is more than this server allows "
                               f"(max_reschedule: {max_reschedule})")


def run_chain(runtime: Runtime, env: ChainEnv, identity: Identity, parsed: list[tuple[str, jdl.JobDescription]]) -> list[Job]:
    """Every job through every executor; the first refusal refuses the request."""
    jobs = []
    for source, description in parsed:
        job = Job(description=description, source=source, identity=identity)
        for executor in runtime.chain:
            executor.process(job, env)
        jobs.append(job)
    return jobs


def final_jdl(job: Job) -> str:
    """The job's JDL with the chain's updates applied (attribute names match case-insensitively)."""
    attributes = dict(job.description.attributes)
    by_folded = {name.casefold(): name for name in attributes}
    for name, value in job.updates.items():
        attributes.pop(by_folded.get(name.casefold(), name), None)
        attributes[name] = value
    return render_record(attributes)


def site_summary(job: Job) -> str:
    """The jobs table's Site before matching: one site, "Multiple" or "ANY"."""
    sites = eligible_sites(job.queues or []) or job.sites
    if len(sites) == 1:
        return sites[0]
    return "Multiple" if sites else "ANY"


@dataclass(frozen=True)
class Submitted:
    """The new jobs' ids in order, and a line per source whose jobs no configured queue could ever run."""

    job_ids: list[int]
    warnings: list[str]


def submit_jobs(
    runtime: Runtime,
    identity: Identity,
    sources: list[tuple[str, str]],
    options: SubmitOptions,
    now: datetime,
    input_sandboxes: Sequence[Mapping[str, str]] = (),
) -> list[int]:
    """Submit every job of ``sources`` (name, JDL text); returns their ids in order."""
    return submit(runtime, identity, sources, options, now, input_sandboxes=input_sandboxes).job_ids


def submit(
    runtime: Runtime,
    identity: Identity,
    sources: list[tuple[str, str]],
    options: SubmitOptions,
    now: datetime,
    *,
    input_sandboxes: Sequence[Mapping[str, str]] = (),
    strict: bool = False,
    held: bool = False,
    clock: Callable[[], datetime] | None = None,
) -> Submitted:
    """Submit every job of ``sources``; with ``strict``, refuse them all (nothing stored) when
    no configured queue could ever run one of them, or one's Requirements expression reads a
    name no resource describes (services/feasibility.py).

    ``now`` dates the jobs' submission (Received, Checking); ``clock`` is read
    once the optimizer chain has filed them, as they are stored, and dates
    their Waiting entry: a bulk submission's jobs wait from then, not from
    when it arrived (the first stage `wms bench e2e` reports). Without a
    clock (a caller whose time stands still), Waiting is dated ``now`` too.

    ``input_sandboxes``: for each source, ``{InputSandbox entry: sha256}`` of
    the files uploaded for it (services/sandboxes.py).

    ``held`` (qsub -h): the jobs are stored with a user hold on them, in the
    same transaction, so that no pilot takes one before it is held."""
    settings = runtime.config.settings
    parsed = parse_sources(sources, options, settings.max_jobs_per_submission, settings.limits.core())
    check_retries(parsed, settings.max_reschedule)
    with reading(runtime.engine) as conn:
        check_caps(conn, settings.caps.core(), identity.user, Counter({identity.vo: len(parsed)}), lock=False)
    sandbox_plans = sandboxes_service.plan_inputs(runtime, identity, [s for s, _ in sources], input_sandboxes,
                                                  parsed)
    env = runtime.chain_env(now)
    jobs = run_chain(runtime, env, identity, parsed)
    check_reservations(runtime, env, identity, jobs, now)
    warnings = flag_unknown_names(runtime, jobs) + flag_unrunnable(runtime, jobs)
    if strict and warnings:
        raise InvalidInput(f"refused (--strict), nothing submitted: {warnings[0]}"
                           + (f"; and {len(warnings) - 1} more" if len(warnings) > 1 else ""))

    filed: list[TaskQueueDefinition] = []
    for job in jobs:
        if job.task_queue is None:
            raise InvalidInput(f"{job.source}: the optimizer chain did not file the job into a task queue")
        filed.append(job.task_queue)

    def store(conn) -> list[int]:
        waiting_since = clock() if clock is not None else now
        check_caps(conn, settings.caps.core(), identity.user, Counter(job.vo for job in jobs))
        tq_ids = store_pools_and_task_queues(conn, jobs, now)
        rows = [
            {
                "job_name": job.description.job_name or "",
                "owner": job.owner,
                "owner_group": job.owner_group,
                "vo": job.vo,
                "status": JobStatus.WAITING.value,
                "minor_status": job.minor_status,
                "site": site_summary(job),
                "queue": "",
                "submit_pool": job.pool.pool_id if job.pool else None,
                "task_queue_id": tq_ids[tq.key],
                "priority": job.description.priority,
                "cpu_time": job.cpu_time,
                "original_jdl": job.description.text,
                "jdl": final_jdl(job),
            }
            for job, tq in zip(jobs, filed)
        ]
        ids = jobs_db.insert_jobs(conn, rows, now)
        sandboxes_service.attach_inputs(conn, ids, sandbox_plans, now)
        chain_names = ", ".join(executor.name for executor in runtime.chain)
        history = []
        for job_id, job in zip(ids, jobs):
            history.append(_entry(job_id, JobStatus.RECEIVED, "Job accepted", SOURCE_MANAGER, now))
            history.append(_entry(job_id, JobStatus.CHECKING, chain_names, SOURCE_OPTIMIZERS, now))
            history.append(_entry(job_id, JobStatus.WAITING, job.minor_status, SOURCE_TASK_QUEUE, waiting_since))
        jobs_db.add_history(conn, history)
        if held:
            hold = Hold(HoldType.USER, identity.user, "", waiting_since)
            holds_db.add_holds(conn, [(job_id, hold) for job_id in ids])
            jobs_db.set_status(conn, ids, JobStatus.HELD.value, hold_rules.minor_status([hold]),
                               jobs_service.source(identity), waiting_since, expect={JobStatus.WAITING.value},
                               values={"hold_types": hold_rules.write_types([HoldType.USER])})
        return ids

    ids = run_in_transaction(runtime.engine, store)
    # New task queues may have appeared: this process's Matcher looks again.
    forget_waiting_task_queues(runtime)
    return Submitted(ids, warnings)


def store_pools_and_task_queues(conn: Connection, jobs: Iterable[Job], now: datetime) -> dict[str, int]:
    """The SubmitPools and task queues ``jobs`` were filed into, stored (each
    once; a new pool with its queues); the task queues' ids by their key.
    Within the caller's transaction: submission, rescheduling and alter."""
    jobs = list(jobs)
    used_pools = {job.pool.pool_id: job.pool for job in jobs if job.pool is not None}
    for pool in used_pools.values():
        if pools_db.upsert_pool(conn, pool.pool_id, pools.document_text(pool.requirements), pool.vo, now):
            pools_db.replace_pool_queues(conn, pool.pool_id, [(q.site, q.ce, q.queue) for q in pool.queues], now)
    if used_pools:
        pools_db.touch_pool_used(conn, sorted(used_pools), now)
    rows: dict[str, dict[str, Any]] = {}
    for job in jobs:
        tq = job.task_queue
        if tq is not None and tq.key not in rows:
            rows[tq.key] = {"tq_key": tq.key, "owner": tq.owner, "owner_group": tq.owner_group, "vo": tq.vo,
                            "submit_pool": tq.submit_pool, "cpu_time": tq.request.cpu_time,
                            "definition": tq.stored(), "reservation_id": tq.reservation,
                            "priority": job.task_queue_priority}
    return tq_db.get_or_create_task_queues(conn, list(rows.values()), now)


def check_caps(conn: Connection, limits: caps.Caps, user: str, vos: Counter[str], *, lock: bool = True) -> None:
    """Refuse the submission whole when it would take its user, or the VO of some of its jobs
    (``vos``: new jobs per VO), past a cap (wms/core/caps.py).

    With ``lock``, on the submission's own connection: the user's and the VOs'
    submission locks are held until it commits, so a submission of theirs that
    comes meanwhile waits, then counts these jobs. Without, a quick look before
    the optimizer chain, so that a user at the cap costs no more than a count."""
    adding = sum(vos.values())
    scopes = [("user", user, adding)] if limits.user_jobs or limits.user_waiting else []
    if limits.vo_jobs or limits.vo_waiting:
        scopes += [("vo", vo, n) for vo, n in sorted(vos.items())]
    if lock:
        caps_db.lock_submitters(conn, [f"{scope}:{name}" for scope, name, _ in scopes])
    for scope, name, n in scopes:
        column = "owner" if scope == "user" else "vo"
        caps.check(limits, scope, name, caps_db.count_jobs(conn, column, name, caps.NOT_FINAL),
                   caps_db.count_jobs(conn, column, name, caps.WAITING), n)


def check_reservations(runtime: Runtime, env: ChainEnv, identity: Identity, jobs: list[Job], now: datetime) -> None:
    """Jobs asking for an advance reservation (-ar, Reservation) are checked against it (specs/003 5.3.2.1).

    A job that states no h_rt gets the reservation's limit (its duration
    minus duration_offset, specs/003 5.2.2.1.1), so its pilot stops it in
    time; its task queue is filed again with that limit.
    """
    limits: dict[tuple, float] = {}
    refile = next((executor for executor in runtime.chain if getattr(executor, "name", "") == "TaskQueue"), None)
    for job in jobs:
        ar_id = job.description.reservation
        if ar_id is None:
            continue
        hard = dict(job.hard_requests or {})
        slots = job.task_queue.slots if job.task_queue is not None else 1
        key = (ar_id, tuple(sorted(hard.items())), slots)
        if key not in limits:
            try:
                limits[key] = reservations_service.check_job(runtime, identity, ar_id, hard, slots, now)
            except WmsError as exc:
                raise type(exc)(f"{job.source}: {exc}") from None
        if "h_rt" not in hard and refile is not None:
            job.hard_requests = {**hard, "h_rt": limits[key]}
            refile.process(job, env)


def _entry(job_id: int, status: JobStatus, minor: str, source: str, now: datetime) -> dict:
    return {"job_id": job_id, "status": status.value, "minor_status": minor, "source": source, "time": now}
