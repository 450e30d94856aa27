"""`wms bench match`: matching throughput and latency (DESIGN.md budget).

Fills a scratch database with N waiting jobs in M task queues (varied
CPUTime, platforms, sites, Grid Engine requests; some behind SubmitPools),
then K threads play pilots with varied descriptions, as DIRAC's pilots
send them, for a fixed time. Reports matches per second, p50/p99 latency,
errors, and the two numbers that must be zero: jobs handed out twice and
consumables overbooked (checked against the debits afterwards).
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from wms.config import config_dir_from_env, load_config
from wms.core.match import pilot_slots
from wms.core.match.context import PilotRequest
from wms.core.scheduling import SchedulingRequest
from wms.core.task_queues import TaskQueueDefinition
from wms.db import jobs as jobs_db
from wms.db import pools as pools_db
from wms.db import task_queues as tq_db
from wms.db.engine import make_engine, reading
from wms.db.matching import ensure_usage_rows
from wms.db.migrate import upgrade
from wms.db.schema import job_debits, resource_usage
from wms.db.schema import jobs as jobs_table
from wms.db.scratch import scratch_database
from wms.services.matcher import request_job
from wms.services.runtime import Runtime

PLATFORMS = [[], ["x86_64-el9"], ["x86_64-el9", "x86_64-el8"], ["aarch64-el9"]]
CPU_TIMES = [360, 1800, 3600, 21600, 43200, 86400]
REQUESTS: list[dict[str, Any]] = [{}, {}, {"h_rt": 3600}, {"mem_free": 2 * 1024**3}, {"h_rt": 7200, "arch": "lx*-amd64"}, {"compiler_lic": 1}]
JOB_JDL = '[ Executable = "/bin/true"; CPUTime = 300; ]'
SLOTS = 10**9


def bench_config(config_dir: str | None):
    """The default grid with room for every job: queue slots and licences made plentiful."""
    config = load_config(config_dir_from_env(config_dir))
    resources = json.loads(json.dumps(config.resources))
    for site in resources.values():
        for ce in site.get("CEs", {}).values():
            for queue in ce.get("Queues", {}).values():
                values = dict(queue.get("complex_values") or {})
                values["slots"] = SLOTS
                if "compiler_lic" in values:
                    values["compiler_lic"] = SLOTS
                queue["complex_values"] = values
    cluster = config.cluster.model_copy(update={"global_": config.cluster.global_.model_copy(
        update={"complex_values": {"compiler_lic": SLOTS}})})
    return dataclasses.replace(config, resources=resources, cluster=cluster)


def populate(runtime: Runtime, jobs: int, task_queues: int, rng: random.Random) -> None:
    now = datetime.now(timezone.utc)
    queues = runtime.resources_for("lhcb").queues()
    pools = []
    with runtime.engine.begin() as conn:
        for p in range(20):
            pool_id = f"bench{p:011d}"
            chosen = rng.sample(queues, k=rng.randint(2, len(queues)))
            pools_db.upsert_pool(conn, pool_id, json.dumps({"vo": "lhcb", "bench": p}), "lhcb", now)
            pools_db.replace_pool_queues(conn, pool_id, [(q.site, q.ce, q.queue) for q in chosen], now)
            pools.append(pool_id)
        defs = []
        for t in range(task_queues):
            definition = TaskQueueDefinition(
                owner=f"user{t % 50}", owner_group="lhcb_user" if t % 3 else "lhcb_prod", vo="lhcb",
                submit_pool=pools[t % len(pools)] if t % 2 else None,
                request=SchedulingRequest(platforms=tuple(PLATFORMS[t % len(PLATFORMS)]),
                                          cpu_time=CPU_TIMES[t % len(CPU_TIMES)]),
                hard_requests=REQUESTS[t % len(REQUESTS)],
            )
            # One task queue per t, however many share a definition.
            defs.append({"tq_key": f"{definition.key[:24]}{t:08d}", "owner": definition.owner,
                         "owner_group": definition.owner_group, "vo": "lhcb",
                         "submit_pool": definition.submit_pool, "cpu_time": definition.request.cpu_time,
                         "definition": definition.stored(), "priority": 4000 if t % 3 == 0 else 1000})
        tq_ids = list(tq_db.get_or_create_task_queues(conn, defs, now).values())
    chunk = 20_000
    for start in range(0, jobs, chunk):
        insert_waiting(runtime, [tq_ids[i % len(tq_ids)] for i in range(start, min(start + chunk, jobs))], rng, now)
        print(f"\r  filling: {min(start + chunk, jobs):>9}/{jobs} jobs in {task_queues} task queues",
              end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def insert_waiting(runtime: Runtime, tq_ids: list[int], rng: random.Random, now: datetime) -> None:
    """One waiting job in each of ``tq_ids`` (a task queue may come several times)."""
    rows = [{"owner": "roland", "owner_group": "lhcb_user", "vo": "lhcb", "status": "Waiting",
             "task_queue_id": tq_id, "priority": rng.randint(0, 3), "cpu_time": 300,
             "original_jdl": JOB_JDL, "jdl": JOB_JDL} for tq_id in tq_ids]
    if rows:
        with runtime.engine.begin() as conn:
            jobs_db.insert_jobs(conn, rows, now)


def waiting_per_task_queue(runtime: Runtime) -> dict[int, int]:
    with reading(runtime.engine) as conn:
        return dict(conn.execute(select(jobs_table.c.task_queue_id, func.count())
                                 .where(jobs_table.c.status == "Waiting")
                                 .group_by(jobs_table.c.task_queue_id)).all())


def top_up(runtime: Runtime, full: dict[int, int], rng: random.Random) -> int:
    """Waiting jobs put back where matching took them, so that the next step
    of a benchmark meets the population the first one met (a drained task
    queue would turn its pilots' requests into no-matches that look at every
    task queue). Returns how many were added."""
    now = datetime.now(timezone.utc)
    waiting = waiting_per_task_queue(runtime)
    missing = [tq_id for tq_id, count in full.items() for _ in range(count - waiting.get(tq_id, 0))]
    insert_waiting(runtime, missing, rng, now)
    return len(missing)


def settle(engine) -> None:
    """VACUUM ANALYZE after the bulk fill, as autovacuum would have done long
    before a real database held this many waiting jobs: freshly loaded rows
    have no visibility hints and the planner no statistics, which would
    charge the first minutes of matching for the fill, not for matching."""
    statement = {"postgresql": "VACUUM ANALYZE", "mariadb": "ANALYZE TABLE jobs, job_jdls, task_queues",
                 "sqlite": "ANALYZE"}.get(engine.dialect.name)
    if statement is None:
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(statement)


def pilot_request(rng: random.Random, queues, n: int) -> PilotRequest:
    ref = rng.choice(queues)
    platform = "aarch64-el9" if ref.queue == "arm" else rng.choice(["x86_64-el9", "x86_64-el8"])
    return PilotRequest(
        site=ref.site, ce=ref.ce, queue=ref.queue, host=f"wn{rng.randint(1, 500):03d}", pilot_id=f"bench-{n}",
        slots=rng.choice([1, 1, 4, 8]), platform=platform, cpu_time_left=rng.choice([3600, 86400, 172800]),
        load={"num_proc": 8, "mem_total": "32G", "mem_free": rng.choice(["1G", "8G", "16G"]),
              "arch": "lx-arm64" if ref.queue == "arm" else "lx-amd64", "load_avg": 0.5},
    )


def pilots(url: str, threads: int, seconds: float, seed: int, start_at: float,
           declared_slots: int | None = None) -> dict[str, list]:
    """One Matcher process: ``threads`` pilots asking for jobs until the time is up.

    With ``declared_slots``, each thread is one pilot whose token declared
    that many slots (core/match/pilot_slots.py): every claim also debits
    the pilot's own row, so the cost of the cap is measured (it is made
    far above what a run hands out, so it never refuses)."""
    engine = make_engine(url, pool_size=threads + 2)
    runtime = Runtime.create(bench_config(None), engine)
    queues = runtime.resources_for("lhcb").queues()
    declared_ids = [f"bench-{seed}-pilot-{k}" for k in range(threads)] if declared_slots else []
    if declared_ids:
        with engine.begin() as conn:      # made with the declaration, as renewals make them
            ensure_usage_rows(conn, [pilot_slots.usage_key(pilot_id) for pilot_id in declared_ids])
    latencies: list[float] = []
    matched: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    while time.time() < start_at:
        time.sleep(0.01)
    deadline = time.monotonic() + seconds

    def pilot_loop(k: int) -> None:
        local = random.Random(seed * 1000 + k)
        n = 0
        while time.monotonic() < deadline:
            request = pilot_request(local, queues, k * 10**7 + n)
            if declared_ids:
                request = dataclasses.replace(request, pilot_id=declared_ids[k], declared_slots=declared_slots)
            n += 1
            t0 = time.perf_counter()
            try:
                result = request_job(runtime, request, datetime.now(timezone.utc), local)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            elapsed = time.perf_counter() - t0
            with lock:
                latencies.append(elapsed)
                if result.job is not None:
                    matched.append(result.job["JobID"])

    workers = [threading.Thread(target=pilot_loop, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    engine.dispose()
    return {"latencies": latencies, "matched": matched, "errors": errors}


def _pilots_process(url: str, threads: int, seconds: float, seed: int, start_at: float, results,
                    declared_slots: int | None = None) -> None:
    results.put(pilots(url, threads, seconds, seed, start_at, declared_slots))


def quota_rule_sets(count: int) -> str:
    """``count`` enabled rule sets of 10 rules, as a site might write them.

    Nine rules of each set name users, projects, pes, queues or hosts that
    most bench jobs and pilots are not, so a job is tried against most
    rules; some of them (RAL queues, GPU queues, wn9* hosts) are shared
    by many jobs, as real site limits are. The last rule of each set takes
    every other job, in turn per user on slots, per user on licences, and
    per host on slots with a dynamic limit; limits are far above what the
    bench uses, so the cost measured is evaluation and debits, not refusals.
    """
    huge = "1000000000"
    rules = [
        f"limit users user90,user91 to slots={huge}",
        f"limit users {{@staff}} to slots={huge}",
        f"limit projects * to slots={huge}",
        f"limit pes {{mpi}} to slots={huge}",
        f"limit queues LCG.RAL.uk/* to slots={huge}",
        f"limit hosts {{@lx_hosts}} to slots={huge}",
        f"limit users !user0,!user1,!user2 hosts wn9* to compiler_lic={huge}",
        f"limit users @managers to slots={huge}",
        f"limit queues */*/gpu to slots={huge}",
    ]
    last = [f"limit users {{*}} to slots={huge}", f"limit users {{*}} to compiler_lic={huge}",
            f"limit hosts {{*}} to slots=$num_proc*{huge}"]
    return "".join("{\n name bench%d\n enabled true\n" % n + "".join(f" {r}\n" for r in rules)
                   + f" {last[n % len(last)]}\n}}\n" for n in range(count))


def install_quotas(runtime: Runtime, count: int) -> None:
    from wms.core.identity import Identity
    from wms.services import quotas as quotas_service

    manager = Identity(user="bench", group="bench", vo="lhcb", role="manager")
    quotas_service.modify(runtime, manager, quota_rule_sets(count), datetime.now(timezone.utc))


def run_match_once(url: str, args, quotas: int = 0) -> dict[str, Any]:
    engine = make_engine(url)
    upgrade(engine)
    runtime = Runtime.create(bench_config(None), engine)
    populate(runtime, args.jobs, args.task_queues, random.Random(args.seed))
    settle(engine)
    if quotas:
        install_quotas(runtime, quotas)
    start_at = time.time() + (3.0 if args.processes > 1 else 0.0)
    declared = getattr(args, "declared_slots", None)
    if args.processes == 1:
        parts = [pilots(url, args.threads, args.seconds, args.seed, start_at, declared)]
    else:
        # Several Matcher processes, as several `wms server` processes would be.
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        procs = [context.Process(target=_pilots_process,
                                 args=(url, args.threads, args.seconds, args.seed + 7919 * p, start_at, results,
                                       declared))
                 for p in range(args.processes)]
        for proc in procs:
            proc.start()
        parts = [results.get() for _ in procs]
        for proc in procs:
            proc.join()
    wall = args.seconds
    latencies = [x for part in parts for x in part["latencies"]]
    matched = [x for part in parts for x in part["matched"]]
    errors = [x for part in parts for x in part["errors"]]
    with reading(engine) as conn:
        debited = dict(conn.execute(select(job_debits.c.resource, func.sum(job_debits.c.amount))
                                    .group_by(job_debits.c.resource)).all())
        used = dict(conn.execute(select(resource_usage.c.resource, func.sum(resource_usage.c.used))
                                 .group_by(resource_usage.c.resource)).all())
    overbooked = sum(1 for r in set(debited) | set(used) if abs(float(debited.get(r, 0)) - float(used.get(r, 0))) > 1e-6)
    engine.dispose()
    ordered = sorted(latencies)
    return {
        "requests": len(latencies),
        "matches": len(matched),
        "matches_per_second": len(matched) / wall,
        "p50_ms": 1000 * ordered[len(ordered) // 2] if ordered else None,
        "p99_ms": 1000 * ordered[int(len(ordered) * 0.99)] if ordered else None,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "duplicates": len(matched) - len(set(matched)),
        "overbooked": overbooked,
    }


def _median_ms(values) -> float | None:
    """The median latency of the runs that matched anything (None when none did)."""
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 2) if known else None


def run_match(args) -> int:
    kind = args.database if args.database in ("sqlite", "postgresql", "mariadb") else None
    runs = []
    quota_runs = []
    quotas = getattr(args, "quotas", 0) or 0
    for run in range(1, args.runs + 1):
        # With --quotas, each run is measured without and with the rule
        # sets, one after the other, so both see the same machine load.
        for count, into in ([(0, runs), (quotas, quota_runs)] if quotas else [(0, runs)]):
            print(f"run {run}/{args.runs} on {args.database}: {args.jobs} jobs, {args.task_queues} task queues, "
                  f"{args.processes} x {args.threads} pilots for {args.seconds} s, {count} quota sets",
                  file=sys.stderr)
            if kind is None:
                into.append(run_match_once(args.database, args, count))
                continue
            with tempfile.TemporaryDirectory() as tmp, scratch_database(kind, Path(tmp), prefix="wms_bench") as url:
                into.append(run_match_once(url, args, count))
    summary = {
        "benchmark": "match", "database": args.database, "jobs": args.jobs, "task_queues": args.task_queues,
        "processes": args.processes, "threads": args.threads, "seconds": args.seconds,
        "declared_slots": getattr(args, "declared_slots", None),
        "median_matches_per_second": round(statistics.median(r["matches_per_second"] for r in runs), 1),
        "median_p50_ms": _median_ms(r["p50_ms"] for r in runs),
        "median_p99_ms": _median_ms(r["p99_ms"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "duplicates": sum(r["duplicates"] for r in runs),
        "overbooked": sum(r["overbooked"] for r in runs),
        "runs": runs,
    }
    if quota_runs:
        with_quotas = statistics.median(r["matches_per_second"] for r in quota_runs)
        summary.update(
            quotas=quotas,
            median_matches_per_second_with_quotas=round(with_quotas, 1),
            median_p99_ms_with_quotas=_median_ms(r["p99_ms"] for r in quota_runs),
            quota_rate_ratio=round(with_quotas / summary["median_matches_per_second"], 3)
            if summary["median_matches_per_second"] else None,
            errors=summary["errors"] + sum(r["errors"] for r in quota_runs),
            duplicates=summary["duplicates"] + sum(r["duplicates"] for r in quota_runs),
            overbooked=summary["overbooked"] + sum(r["overbooked"] for r in quota_runs),
            quota_runs=quota_runs,
        )
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"match on {args.database}: median {summary['median_matches_per_second']:.0f} matches/s, "
              f"p50 {summary['median_p50_ms']} ms, p99 {summary['median_p99_ms']} ms; "
              f"errors {summary['errors']}, duplicates {summary['duplicates']}, overbooked {summary['overbooked']} "
              f"({args.jobs} jobs, {args.task_queues} task queues, {args.processes} x {args.threads} pilots, "
              f"{args.runs} runs)")
        if quota_runs:
            print(f"with {quotas} quota sets of 10 rules: median {summary['median_matches_per_second_with_quotas']:.0f} "
                  f"matches/s, p99 {summary['median_p99_ms_with_quotas']} ms: "
                  f"{100 * (summary['quota_rate_ratio'] or 0):.0f}% of the rate without quotas")
        if summary["errors"]:
            print(f"first error: {next(r['first_error'] for r in runs + quota_runs if r['first_error'])}")
    return 0 if summary["duplicates"] == 0 and summary["overbooked"] == 0 else 1
