"""`wms bench e2e`: short jobs per second from submission to Done, through a
real `wms server` and real pilots (docs/benchmarks.md).

On a scratch database the bench starts a `wms server` (a child process on
a free port) whose configuration has one queue, Bench.Local.xx/localhost/e2e,
granting K x S slots to pilots of S slots each. It submits N jobs of the
payload as one parametric JDL over HTTP with a user's token, then does what
a SiteDirector cycle does for that queue (wms.services.pilots: the queue's
waiting jobs, K pilots reserved with a pilot token each, started by the
``local`` backend as `wms-pilot` processes). It watches the jobs' states
until every one has ended, printing them once a second, then stops the
pilots (SIGTERM to each, as a batch system ending them would) and reads
what the system recorded (wms/bench/timeline.py).

CPU seconds per job: the server's (its processes, from /proc, over the
run), the pilots' with their payloads' (the bench's children: their
rusage once they have ended, over their whole lives) and the database
server's (wms/bench/cpu.py; SQLite runs inside the server). The server's
request counts come from its /metrics.

With ``--against slurm`` the same jobs then run as one job array of a
private Slurm with as many CPUs as the wms run had slots
(wms/bench/against_slurm.py), and the two rates are compared.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import yaml
from sqlalchemy import func, select

from wms.backends.base import RUNNING
from wms.backends.local import LocalBackend, stop_local_pilots
from wms.bench.cpu import TICKS, ProcessMeter, database_meter, processes
from wms.bench.over_http import Server, set_backpressure
from wms.bench.slurm import why_not_runnable
from wms.bench.submit import bench_identity
from wms.bench.timeline import JobTimes, stage_figures, throughput
from wms.config import config_dir_from_env, load_config
from wms.core.classad import render_record
from wms.core.errors import InvalidInput, WmsError
from wms.core.resources import QueueRef
from wms.core.states import FINAL_STATES, JobStatus
from wms.db.engine import make_engine, reading
from wms.db.jobs import chunked
from wms.db.migrate import upgrade
from wms.db.schema import jobs as jobs_table
from wms.db.schema import status_history
from wms.db.scratch import scratch_database
from wms.services import pilots as pilots_service
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

QUEUE = QueueRef("Bench.Local.xx", "localhost", "e2e")
VO = "lhcb"
# Long enough for any job of the default CPUTime (operations.yaml, 86,400 s).
QUEUE_CPU_TIME = 172800
# Seconds between two looks at the jobs' states (and the database server's CPU).
POLL = 0.25
PROGRESS_EVERY = 1.0
# Seconds without any job changing state after which the run is given up.
STALL = 120.0
# Seconds a pilot has to end after its SIGTERM before it is killed.
PILOT_STOP_GRACE = 30.0


def jdl(payload: list[str], jobs: int) -> str:
    """One parametric JDL for ``jobs`` jobs of ``payload`` (its %n and %s are the parametric placeholders)."""
    record: dict[str, Any] = {"Executable": payload[0], "JobName": "e2e_%n", "Parameters": jobs}
    if len(payload) > 1:
        record["Arguments"] = shlex.join(payload[1:])
    return render_record(record)


def e2e_config_dir(into: Path, pilots: int, slots: int, isolation: str, max_in_flight: int | None = None) -> Path:
    """The default configuration with one queue, the bench's, for ``pilots``
    pilots of ``slots`` slots; ``max_in_flight`` for the server if given."""
    target = into / "config"
    shutil.copytree(config_dir_from_env(None), target)
    queue = {"CPUTime": QUEUE_CPU_TIME, "Backend": "local", "NumberOfProcessors": slots,
             "MaxWaitingPilots": pilots, "MaxTotalPilots": pilots, "Isolation": isolation,
             "complex_values": {"slots": pilots * slots}}
    resources = {"Sites": {QUEUE.site: {"CEs": {QUEUE.ce: {"Queues": {QUEUE.queue: queue}}}}}}
    (target / "resources.yaml").write_text(yaml.safe_dump(resources, sort_keys=False))
    set_backpressure(target, {"max_in_flight": max_in_flight} if max_in_flight else None)
    return target


# ---------------------------------------------------------------- the wms run
def submit(server_url: str, token: str, payload: list[str], jobs: int, per_call: int) -> list[int]:
    """``jobs`` jobs as parametric submissions of at most ``per_call`` jobs
    each (the server's max_jobs_per_submission), one after the other."""
    job_ids: list[int] = []
    while len(job_ids) < jobs:
        count = min(per_call, jobs - len(job_ids))
        answer = httpx.post(f"{server_url}/api/v1/jobs",
                            json={"jdls": [{"source": "e2e.jdl", "text": jdl(payload, count)}]},
                            headers={"Authorization": f"Bearer {token}"}, timeout=600)
        if answer.status_code != 201:
            raise RuntimeError(f"the server refused the submission: HTTP {answer.status_code}: {answer.text[:500]}")
        job_ids += answer.json()["job_ids"]
    return job_ids


def launch_pilots(runtime: Runtime, server_url: str, backend: LocalBackend, state_dir: Path) -> list[str]:
    """What a SiteDirector cycle does for the bench's queue: its waiting jobs,
    pilots reserved within its limits (a token each), started by ``backend``."""
    now = datetime.now(timezone.utc)
    work = pilots_service.waiting_jobs_per_queue(runtime, [QUEUE], now=now)[QUEUE.name]
    waiting = work["by_vo"].get(VO, 0)
    if not waiting:
        raise RuntimeError(f"no waiting job the queue {QUEUE.name} could run: the payload's jobs never match it")
    params = runtime.resources_for(VO).queue_parameter_map(QUEUE)
    limits = pilots_service.QueueLimits.of(params)
    # Each pilot records its job sessions in a directory of the bench's own,
    # not the node's shared one (where a pilot ends what dead ones left).
    launcher = pilots_service.make_launcher(runtime, url=server_url, backends={"local": backend},
                                            pilot_options=("--state-dir", str(state_dir)))
    reserved = pilots_service.reserve_pilots(runtime, QUEUE, "local", VO, waiting, limits, limits, now)
    argv = pilots_service.pilot_argv(QUEUE, work["pools"], params, limits, backend.emulates_queues,
                                     launcher.pilot_options)
    return pilots_service.launch_pilots(runtime, launcher, QUEUE, "local", reserved, argv, now,
                                        pilots_service.backend_options(backend, params))


def status_counts(engine, job_ids: list[int]) -> Counter[str]:
    """How many of ``job_ids`` are in each state. The ids of one parametric
    submission are usually one range, asked as such: the bench asks four
    times a second, and a statement naming thousands of ids cost it a
    tenth of a core on a machine whose cores the run needs."""
    counts: Counter[str] = Counter()
    count = select(jobs_table.c.status, func.count()).group_by(jobs_table.c.status)
    low, high = min(job_ids), max(job_ids)
    with reading(engine) as conn:
        if high - low + 1 == len(set(job_ids)):
            return Counter(dict(conn.execute(count.where(jobs_table.c.job_id.between(low, high))).all()))
        for chunk in chunked(job_ids):
            counts.update(dict(conn.execute(count.where(jobs_table.c.job_id.in_(chunk))).all()))
    return counts


def watch(engine, job_ids: list[int], backend: LocalBackend, refs: list[str], started: float,
          meter: ProcessMeter | None) -> Counter[str]:
    """Until every job has ended; a progress line a second. Fails when nothing
    changes for STALL seconds or the pilots have all ended with jobs left."""
    shown, last, changed = 0.0, Counter[str](), time.monotonic()
    while True:
        counts = status_counts(engine, job_ids)
        ended = sum(counts[state] for state in FINAL_STATES)
        now = time.time()
        if now - shown >= PROGRESS_EVERY or ended == len(job_ids):
            shown = now
            if meter is not None:
                meter.sample()          # all of /proc: once a second, as its docstring asks
            print(f"  {now - started:6.1f} s  " + "  ".join(f"{state} {counts[state]}" for state in sorted(counts)),
                  file=sys.stderr)
        if ended == len(job_ids):
            return counts
        if counts != last:
            last, changed = counts, time.monotonic()
        elif time.monotonic() - changed > STALL:
            raise RuntimeError(f"no job changed state for {STALL:.0f} s ({dict(counts)})")
        if not any(state == RUNNING for state in backend.status(refs).values()):
            raise RuntimeError(f"the pilots have all ended with {len(job_ids) - ended} job(s) not ended "
                               f"({dict(counts)})")
        time.sleep(POLL)


def stop_pilots(backend: LocalBackend, refs: list[str]) -> float:
    """SIGTERM to each pilot itself (not to its wrapper, which then records its
    exit and ends: the pilot's CPU, with its payloads', comes back to the bench),
    then wait until every one has ended. Returns the CPU seconds of the
    payloads (each pilot's children, all ended and reaped by then)."""
    wrappers = {int(ref.split(":")[1]) for ref in refs}
    payloads = 0
    for process in processes():
        if process.ppid in wrappers:
            payloads += process.children_ticks
            try:
                os.kill(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + PILOT_STOP_GRACE
    while any(state == RUNNING for state in backend.status(refs).values()):
        if time.monotonic() > deadline:
            stop_local_pilots(grace=1.0)
            break
        time.sleep(0.1)
    return payloads / TICKS


def read_times(engine, job_ids: list[int]) -> list[JobTimes]:
    """The recorded times of each job (wms/bench/timeline.py)."""
    j = jobs_table.c
    rows: dict[int, dict[str, Any]] = {}
    entries: dict[tuple[int, str], datetime] = {}
    with reading(engine) as conn:
        for chunk in chunked(job_ids):
            for row in conn.execute(select(j.job_id, j.status, j.submission_time, j.matched_time, j.start_time,
                                           j.end_time).where(j.job_id.in_(chunk))).mappings():
                rows[row["job_id"]] = dict(row)
            h = status_history.c
            for job_id, status, at in conn.execute(
                    select(h.job_id, h.status, h.time)
                    .where(h.job_id.in_(chunk), h.status.in_([JobStatus.WAITING.value, JobStatus.DONE.value]))
                    .order_by(h.entry_id)):
                entries.setdefault((job_id, status), at)          # the first Waiting, the first Done
    return [JobTimes(job_id, row["status"], row["submission_time"], entries.get((job_id, JobStatus.WAITING.value)),
                     row["matched_time"], row["start_time"], row["end_time"],
                     entries.get((job_id, JobStatus.DONE.value)))
            for job_id, row in sorted(rows.items())]


def http_requests(server_url: str) -> dict[str, Any]:
    """The server's requests by route and how many it refused (429, 503), from its /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = httpx.get(f"{server_url}/metrics", timeout=30)
    answer.raise_for_status()
    by_route: Counter[str] = Counter()
    refused = 0
    for family in text_string_to_metric_families(answer.text):
        if family.name != "wms_http_requests":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                by_route[f"{sample.labels['method']} {sample.labels['route']}"] += int(sample.value)
                refused += int(sample.value) if sample.labels["status"] in ("429", "503") else 0
    for own in ("GET /metrics", "GET /api/v1/health"):       # the bench's, not the jobs'
        by_route.pop(own, None)
    return {"requests": sum(by_route.values()), "refused": refused, "by_route": dict(by_route.most_common())}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wms(url: str, args, tmp: Path, payload: list[str]) -> dict[str, Any]:
    config_dir = e2e_config_dir(tmp, args.pilots, args.slots, args.isolation, getattr(args, "max_in_flight", None))
    engine = make_engine(url)
    upgrade(engine)
    runtime = Runtime.create(load_config(config_dir), engine)
    token = create_token(engine, bench_identity(), datetime.now(timezone.utc), description="wms bench e2e")
    server = Server(url, config_dir, tmp / "server.log", workers=args.workers)
    server_url = f"http://{server.host}:{server.port}"
    backend = LocalBackend(log_dir=tmp / "pilots")
    meter = database_meter(url)
    try:
        server_before, children = server.cpu_seconds(), children_cpu()
        if meter is not None:
            meter.start()
        started = time.time()
        print(f"wms: submitting {args.jobs} jobs, then {args.pilots} pilots of {args.slots} slots", file=sys.stderr)
        job_ids = submit(server_url, token, payload, args.jobs, runtime.config.settings.max_jobs_per_submission)
        refs = launch_pilots(runtime, server_url, backend, tmp / "pilot-state")
        counts = watch(engine, job_ids, backend, refs, started, meter)
        server_after = server.cpu_seconds()
        requests = http_requests(server_url)
        payloads_cpu = stop_pilots(backend, refs)
        pilots_cpu = children_cpu() - children
    except BaseException as exc:
        stop_local_pilots(grace=5.0)
        if isinstance(exc, Exception):
            print(log_tails(tmp), file=sys.stderr)
            raise WmsError(f"the wms run failed: {exc} (the ends of its logs are above)") from exc
        raise
    finally:
        server.stop()
    times = read_times(engine, job_ids)
    engine.dispose()
    jobs = len(job_ids)
    database_cpu = meter.seconds() if meter is not None else None
    server_cpu = server_after - server_before if server_after is not None and server_before is not None else None
    return {
        **throughput(times, datetime.fromtimestamp(started, timezone.utc)),
        "states": dict(sorted(counts.items())),
        "stages": stage_figures(times),
        "cpu_ms_per_job": {
            "server": round(1000 * server_cpu / jobs, 2) if server_cpu is not None else None,
            "pilots": round(1000 * pilots_cpu / jobs, 2),
            "payloads": round(1000 * payloads_cpu / jobs, 2),       # of the pilots': the jobs' processes
            "database": round(1000 * database_cpu / jobs, 2) if database_cpu is not None else None,
        },
        "http": {**requests, "requests_per_job": round(requests["requests"] / jobs, 2)},
    }


def log_tails(tmp: Path, size: int = 1500) -> str:
    """The ends of the server's log and of the latest pilot logs, for a failure message."""
    logs = [tmp / "server.log", *sorted((tmp / "pilots").glob("*.log"), key=lambda p: p.stat().st_mtime)[-2:]]
    return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-size:]}" for log in logs if log.exists())


def sandbox_problem(isolation: str) -> str | None:
    """Why the pilots could not start a bubblewrap sandbox here, or None. A
    pilot that cannot isolate its payloads takes only its own user's jobs,
    none of the bench's: the run would wait for the pilots to give up."""
    if isolation != "bubblewrap":
        return None
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed (not found on PATH; make test-packages, as root, installs it)"
    try:
        done = subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "--", sys.executable, "-c", ""],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not be started: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap cannot make a sandbox here ({said[-1] if said else f'exit code {done.returncode}'})"
    return None


# ---------------------------------------------------------------- the command
def run_e2e(args) -> int:
    payload: list[str] = args.payload
    if args.against == "slurm":
        # Before the wms run, not after it: a comparison that cannot be made is said at once.
        reason = why_not_runnable()
        if reason is not None:
            raise InvalidInput(f"--against slurm: {reason}")
    problem = sandbox_problem(args.isolation)
    if problem is not None:
        raise InvalidInput(f"--isolation bubblewrap: {problem}; or run the payloads unisolated (--isolation none)")
    kind = args.database if args.database in ("sqlite", "postgresql", "mariadb") else None
    slots = args.pilots * args.slots
    # The machine's load before and after: on a shared machine the figures mean little without it.
    load_before = os.getloadavg()
    print(f"e2e on {args.database}: {args.jobs} jobs of {shlex.join(payload)}, {args.pilots} pilots x "
          f"{args.slots} slots, isolation {args.isolation}", file=sys.stderr)
    slurm = None
    with tempfile.TemporaryDirectory(prefix="wms-bench-e2e-") as tmp:
        if kind is None:
            wms = run_wms(args.database, args, Path(tmp), payload)
        else:
            with scratch_database(kind, Path(tmp), prefix="wms_bench") as url:
                wms = run_wms(url, args, Path(tmp), payload)
        if args.against == "slurm":
            from wms.bench.against_slurm import run_against_slurm

            # The pilots deleted their job directories as they ended. On a file
            # system that looks past recently deleted inodes for a new one (ext4
            # without a journal), thousands of deletions just before would slow
            # every file Slurm makes; the bench's own files wait until the end
            # (docs/benchmarks.md).
            if args.settle:
                print(f"waiting {args.settle:g} s before the Slurm part (--settle)", file=sys.stderr)
                time.sleep(args.settle)
            slurm = run_against_slurm(args.jobs, slots, payload)
    summary = summarise(args, payload, wms, slurm, {"start": list(load_before), "end": list(os.getloadavg())})
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_table(summary)
    return 0 if summary["all_done"] else 1


def summarise(args, payload: list[str], wms: dict[str, Any], slurm: dict[str, Any] | None,
              load_average: dict[str, list[float]]) -> dict[str, Any]:
    rate, slurm_rate = wms["jobs_per_second"], slurm["jobs_per_second"] if slurm else None
    all_done = wms["done"] == args.jobs and (slurm is None or slurm["completed"] == args.jobs)
    return {"benchmark": "e2e", "database": args.database, "jobs": args.jobs, "payload": shlex.join(payload),
            "pilots": args.pilots, "slots_per_pilot": args.slots, "slots": args.pilots * args.slots,
            "isolation": args.isolation, "workers": args.workers,
            "max_in_flight": getattr(args, "max_in_flight", None), "load_average": load_average,
            "wms": wms, "slurm": slurm,
            "wms_over_slurm": round(rate / slurm_rate, 3) if rate and slurm_rate else None,
            "all_done": all_done}


def print_table(summary: dict[str, Any]) -> None:
    def shown(value, fmt="{:.1f}"):
        return "-" if value is None else fmt.format(value)

    wms = summary["wms"]
    print(f"e2e on {summary['database']}: {summary['jobs']} jobs of {summary['payload']}, {summary['pilots']} pilots x "
          f"{summary['slots_per_pilot']} slots ({summary['slots']}), isolation {summary['isolation']}, "
          f"{summary['workers']} server worker(s), max_in_flight {summary.get('max_in_flight') or 'of wms.yaml'}; "
          f"load average (1, 5, 15 min) "
          f"{' '.join(f'{x:.1f}' for x in summary['load_average']['start'])} at the start, "
          f"{' '.join(f'{x:.1f}' for x in summary['load_average']['end'])} at the end")
    print(f"wms: {wms['done']}/{summary['jobs']} Done in {shown(wms['seconds'], '{:.2f}')} s: "
          f"{shown(wms['jobs_per_second'])} jobs/s (first job matched {shown(wms['first_matched_after'], '{:.2f}')} s "
          f"after the submission began); states {wms['states']}")
    table = [("stage", "median ms", "p99 ms", "max ms", "jobs")] + [
        (s["stage"], shown(s["median_ms"]), shown(s["p99_ms"]), shown(s["max_ms"]), str(s["jobs"]))
        for s in wms["stages"]]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))))
    cpu = wms["cpu_ms_per_job"]
    database = "in the server (SQLite)" if cpu["database"] is None else f"{cpu['database']:.2f} ms"
    print(f"CPU per job: server {shown(cpu['server'], '{:.2f} ms')}, pilots {cpu['pilots']:.2f} ms (of which "
          f"the payloads' processes {cpu['payloads']:.2f} ms), database {database}")
    http = wms["http"]
    print(f"HTTP: {http['requests_per_job']:.2f} requests per job, {http['refused']} refused (429/503)")
    slurm = summary["slurm"]
    if slurm is not None:
        print(f"slurm: {slurm['completed']}/{slurm['jobs']} COMPLETED in {slurm['seconds']:.2f} s: "
              f"{shown(slurm['jobs_per_second'])} jobs/s on {slurm['cpus']} CPUs; states {slurm['states']}")
        print(f"wms/slurm: {shown(summary['wms_over_slurm'], '{:.2f}')}")

