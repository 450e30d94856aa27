"""`wms bench`: the performance budget of DESIGN.md, measured.

``wms bench submit`` pushes jobs through the whole submission path
(JDL parsing, the optimizer chain, the pools, task queues, jobs, JDLs and
history in one transaction per batch) on a scratch database, several runs,
and reports the median rate.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from wms.config import config_dir_from_env, load_config
from wms.core.identity import Identity
from wms.db.engine import make_engine
from wms.db.migrate import upgrade
from wms.db.scratch import scratch_database
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

# A mix of what users submit: plain jobs, RFC #7 requirements, site lists.
TEMPLATES = [
    '[ Executable = "/bin/sh"; Arguments = "-c \'echo {i}\'"; JobName = "plain_{i}"; CPUTime = 3600; ]',
    '[ Executable = "/bin/sh"; JobName = "sw_{i}"; Requirements = [ SoftwareTag = {{"AppVersion1"}}; ]; ]',
    '[ Executable = "/bin/sh"; JobName = "mem_{i}"; CPUTime = 20000; Requirements = [ Memory = 2000; ]; ]',
    '[ Executable = "/bin/sh"; JobName = "site_{i}"; Site = {{"LCG.CERN.ch"}}; Platform = "x86_64-el9"; ]',
    '[ Executable = "/bin/sh"; JobName = "req_{i}"; Requirements = [ SoftwareTag = {{"AppVersion2","AppVersion1"}}; MaxRAM = 4000; ]; ]',
]


def bench_identity() -> Identity:
    return Identity(user="roland", group="lhcb_user", vo="lhcb", role="user")


def run_submit(url: str, config_dir: str | None, jobs: int, batch: int) -> float:
    """One run on a fresh schema at ``url``: jobs per second."""
    config = load_config(config_dir_from_env(config_dir))
    engine = make_engine(url)
    upgrade(engine)
    runtime = Runtime.create(config, engine)
    identity = bench_identity()
    texts = [TEMPLATES[i % len(TEMPLATES)].format(i=i) for i in range(jobs)]
    elapsed = 0.0
    for start in range(0, jobs, batch):
        chunk = [(f"job{start + k}.jdl", t) for k, t in enumerate(texts[start : start + batch])]
        t0 = time.perf_counter()
        submit_jobs(runtime, identity, chunk, SubmitOptions(), datetime.now(timezone.utc))
        elapsed += time.perf_counter() - t0
        print(f"\r  {min(start + batch, jobs):>7}/{jobs} jobs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    engine.dispose()
    return jobs / elapsed


def run_bench(args) -> int:
    if args.bench_command == "match":
        from wms.bench.match import run_match

        return run_match(args)
    if args.bench_command == "http":
        from wms.bench.over_http import run_http

        return run_http(args)
    if args.bench_command == "e2e":
        from wms.bench.e2e import run_e2e

        return run_e2e(args)
    kind = args.database if args.database in ("sqlite", "postgresql", "mariadb") else None
    rates = []
    for run in range(1, args.runs + 1):
        print(f"run {run}/{args.runs} on {args.database}: {args.jobs} jobs in batches of {args.batch}", file=sys.stderr)
        if kind is None:
            rates.append(run_submit(args.database, None, args.jobs, args.batch))
            continue
        with tempfile.TemporaryDirectory() as tmp, scratch_database(kind, Path(tmp), prefix="wms_bench") as url:
            rates.append(run_submit(url, None, args.jobs, args.batch))
    result = {
        "benchmark": "submit",
        "database": args.database,
        "jobs": args.jobs,
        "batch": args.batch,
        "runs": [round(r, 1) for r in rates],
        "median_jobs_per_second": round(statistics.median(rates), 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"submit on {args.database}: median {result['median_jobs_per_second']:.0f} jobs/s "
              f"(runs: {', '.join(f'{r:.0f}' for r in rates)}; {args.jobs} jobs, batches of {args.batch})")
    return 0
