"""`wms bench e2e --against slurm`: the same short jobs as one job array of
a private one-node Slurm (wms/bench/slurm.py) with as many CPUs as the wms
run had slots, tuned for many short jobs as Slurm's High Throughput
Computing Administration Guide advises (docs/benchmarks.md says which
settings and why).

Timed from just before ``sbatch --array`` to the first look at the queue
that finds none of the array's tasks pending, running or completing
(``squeue`` every :data:`POLL` seconds: the resolution of the figure).
Then each task's record must say COMPLETED with exit code 0.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from wms.bench.slurm import PARTITION, SlurmCluster
from wms.core.errors import WmsError

# Seconds between two looks at the queue.
POLL = 0.2
# Seconds between two progress lines.
PROGRESS_EVERY = 1.0
# Seconds without a task ending after which the run is given up.
STALL = 120.0
# munged's threads: the guide's figure for high throughput (two by default).
MUNGE_THREADS = 10


def throughput_settings(jobs: int) -> dict[str, str]:
    """slurm.conf for many short jobs, after the High Throughput Computing
    Administration Guide (docs/benchmarks.md, "Slurm's settings")."""
    return {
        "SchedulerType": "sched/backfill",
        # defer: no scheduling attempt per submitted job; the main loop every
        # second instead of every minute, so that defer does not leave the
        # array waiting for it.
        "SchedulerParameters": "defer,sched_interval=1",
        "PriorityType": "priority/basic",
        "JobAcctGatherType": "jobacct_gather/none",
        "SlurmctldDebug": "error",
        "SlurmdDebug": "error",
        "MessageTimeout": "30",
        # The records of ended tasks are kept until the run is read (default 300 s).
        "MinJobAge": "300",
        "MaxArraySize": str(max(1001, jobs + 1)),
        "MaxJobCount": str(max(10000, 2 * jobs)),
    }


def batch_script(payload: list[str]) -> str:
    return f"#!/bin/sh\nexec {shlex.join(payload)}\n"


def run_against_slurm(jobs: int, cpus: int, payload: list[str]) -> dict[str, Any]:
    """``jobs`` tasks of ``payload`` on a private Slurm of ``cpus`` CPUs (wms.bench.slurm.why_not_runnable
    said it can start here): the rate, and how many tasks ended in each state."""
    cluster = SlurmCluster(cpus, throughput_settings(jobs), name="wmsbench", munge_threads=MUNGE_THREADS)
    print(f"slurm: starting a one-node Slurm with {cpus} CPUs in {cluster.dir}", file=sys.stderr)
    try:
        cluster.start()
        script = cluster.dir / "payload.sh"
        script.write_text(batch_script(payload))
        (cluster.dir / "out").mkdir()
        started = time.time()
        array_id = submit_array(cluster, jobs, script)
        ended = wait_for_array(cluster, array_id, jobs, started)
        states = task_states(cluster, array_id)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        # The whole message (with the daemons' logs) for the reader, one line for the error.
        print(exc, file=sys.stderr)
        raise WmsError(f"the Slurm run failed: {str(exc).splitlines()[0]} (its logs' ends are above)") from exc
    finally:
        cluster.stop()
    seconds = ended - started
    return {"jobs": jobs, "cpus": cpus, "seconds": round(seconds, 3),
            "jobs_per_second": round(jobs / seconds, 2) if seconds > 0 else None,
            "poll_seconds": POLL, "states": dict(sorted(states.items())),
            "completed": states.get("COMPLETED 0:0", 0)}


def submit_array(cluster: SlurmCluster, jobs: int, script: Path) -> str:
    answer = subprocess.run(
        ["sbatch", "--parsable", f"--array=0-{jobs - 1}", "--partition", PARTITION, "--job-name", "wms-bench-e2e",
         "--output", str(cluster.dir / "out" / "%A_%a.out"), "--chdir", str(cluster.dir), str(script)],
        env=cluster.env, capture_output=True, text=True)
    if answer.returncode != 0:
        raise RuntimeError(f"sbatch failed: {answer.stderr.strip() or answer.stdout.strip()}")
    return answer.stdout.strip().split(";")[0]


def wait_for_array(cluster: SlurmCluster, array_id: str, jobs: int, started: float) -> float:
    """Until no task of the array is left in the queue; the time that was seen."""
    shown = started
    last_left, last_change = jobs, time.monotonic()
    while True:
        answer = subprocess.run(["squeue", "-h", "-r", "-j", array_id, "-o", "%T"], env=cluster.env,
                                capture_output=True, text=True)
        now = time.time()
        if answer.returncode != 0:
            raise RuntimeError(f"squeue failed: {answer.stderr.strip()}\n{cluster.logs()}")
        states = Counter(answer.stdout.split())
        left = sum(states.values())
        if left == 0:
            return now
        if left != last_left:
            last_left, last_change = left, time.monotonic()
        elif time.monotonic() - last_change > STALL:
            raise RuntimeError(f"slurm: {left} tasks left and none ended for {STALL:.0f} s\n{cluster.logs()}")
        if now - shown >= PROGRESS_EVERY:
            shown = now
            print(f"  {now - started:6.1f} s  " + "  ".join(f"{state} {count}" for state, count in
                                                               sorted(states.items()))
                  + f"  ended {jobs - left}", file=sys.stderr)
        time.sleep(POLL)


def task_states(cluster: SlurmCluster, array_id: str) -> Counter[str]:
    """How many tasks of the array ended in each state and exit code ("COMPLETED 0:0", ...)."""
    answer = subprocess.run(["scontrol", "-o", "show", "job", array_id], env=cluster.env, capture_output=True,
                            text=True)
    if answer.returncode != 0:
        raise RuntimeError(f"scontrol show job {array_id} failed: {answer.stderr.strip()}")
    return Counter(task_state(line) for line in answer.stdout.splitlines() if line.strip())


def task_state(line: str) -> str:
    """"STATE EXITCODE" of one line of ``scontrol -o show job``."""
    fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
    return f"{fields.get('JobState', '?')} {fields.get('ExitCode', '?')}"
