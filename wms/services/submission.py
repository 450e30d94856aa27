"""Job submission: JDL in, task-queue entries out, in one transaction.

The flow (DESIGN.md): parse every JDL (parametric ones expand here), run
each job through the optimizer chain in memory, and only when every job
of the request has passed, store pools, pool-to-queue rows, task queues,
jobs, JDLs and status history in one transaction. A request with one bad
job is refused whole and stores nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping

from wms.core import jdl, pools
from wms.core.classad import render_record
from wms.core.errors import InvalidInput, TooLarge, WmsError
from wms.core.limits import DEFAULT as DEFAULT_LIMITS, Limits
from wms.core.optimizers import ChainEnv, Job
from wms.core.identity import Identity
from wms.core.states import JobStatus
from wms.db import jobs as jobs_db
from wms.db import pools as pools_db
from wms.db import task_queues as tq_db
from wms.services.matcher import forget_waiting_task_queues
from wms.services.retry import run_in_transaction
from wms.services import reservations as reservations_service
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
    sites = sorted({ref.site for ref in job.queues or []}) or job.sites
    if len(sites) == 1:
        return sites[0]
    return "Multiple" if sites else "ANY"


def submit_jobs(
    runtime: Runtime,
    identity: Identity,
    sources: list[tuple[str, str]],
    options: SubmitOptions,
    now: datetime,
) -> list[int]:
    """Submit every job of ``sources`` (name, JDL text); returns their ids in order."""
    settings = runtime.config.settings
    parsed = parse_sources(sources, options, settings.max_jobs_per_submission, settings.limits.core())
    env = runtime.chain_env(now)
    jobs = run_chain(runtime, env, identity, parsed)
    check_reservations(runtime, env, identity, jobs, now)

    task_queues = {}
    for job in jobs:
        if job.task_queue is None:
            raise InvalidInput(f"{job.source}: the optimizer chain did not file the job into a task queue")
        task_queues.setdefault(job.task_queue["tq_key"], job.task_queue)
    used_pools = {job.pool.pool_id: job.pool for job in jobs if job.pool is not None}
    tq_rows = [{**tq, "definition": json.dumps(tq["definition"], sort_keys=True)} for tq in task_queues.values()]

    def store(conn) -> list[int]:
        for pool in used_pools.values():
            if pools_db.upsert_pool(conn, pool.pool_id, pools.document_text(pool.requirements), pool.vo, now):
                pools_db.replace_pool_queues(conn, pool.pool_id, [(q.site, q.ce, q.queue) for q in pool.queues], now)
        tq_ids = tq_db.get_or_create_task_queues(conn, tq_rows, now)
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
                "task_queue_id": tq_ids[job.task_queue["tq_key"]],
                "priority": job.description.priority,
                "cpu_time": job.cpu_time,
                "original_jdl": job.description.text,
                "jdl": final_jdl(job),
            }
            for job in jobs
        ]
        ids = jobs_db.insert_jobs(conn, rows, now)
        chain_names = ", ".join(executor.name for executor in runtime.chain)
        history = []
        for job_id, job in zip(ids, jobs):
            history.append(_entry(job_id, JobStatus.RECEIVED, "Job accepted", SOURCE_MANAGER, now))
            history.append(_entry(job_id, JobStatus.CHECKING, chain_names, SOURCE_OPTIMIZERS, now))
            history.append(_entry(job_id, JobStatus.WAITING, job.minor_status, SOURCE_TASK_QUEUE, now))
        jobs_db.add_history(conn, history)
        if used_pools:
            pools_db.touch_pool_used(conn, sorted(used_pools), now)
        return ids

    ids = run_in_transaction(runtime.engine, store)
    # New task queues may have appeared: this process's Matcher looks again.
    forget_waiting_task_queues(runtime)
    return ids


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
        slots = int(job.task_queue["definition"].get("number_of_processors") or 1)
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
