"""The parts of `wms bench e2e` that need no server: the stages worked out
from recorded times, the job description, the bench's queue, the CPU meter
of a database server's processes, and the private Slurm's settings."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.helpers import CONFIG_DIR
from wms.bench import cpu
from wms.bench.against_slurm import batch_script, task_state, throughput_settings
from wms.bench.e2e import QUEUE, e2e_config_dir, jdl
from wms.bench.slurm import PARTITION, render_conf
from wms.bench.timeline import JobTimes, stage_figures, throughput
from wms.config import load_config
from wms.core.jdl import parse_jdl
from wms.services.pilots import QueueLimits

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def job(job_id: int, *marks: float | None, status: str = "Done") -> JobTimes:
    """A job whose boundaries (submitted, Waiting, Matched, Running, payload end, Done) come ``marks`` ms after T0."""
    return JobTimes(job_id, status, *(None if m is None else at(m) for m in marks))


def test_each_stage_is_the_span_between_two_recorded_times():
    times = [job(1, 0, 10, 110, 120, 620, 640), job(2, 0, 10, 310, 330, 830, 840)]
    figures = {f["stage"]: f for f in stage_figures(times)}
    assert figures["submitted -> Waiting"] == {"stage": "submitted -> Waiting", "median_ms": 10.0, "p99_ms": 10.0,
                                               "max_ms": 10.0, "jobs": 2, "missing": 0}
    assert figures["Waiting -> Matched"]["max_ms"] == 300.0
    assert figures["Matched -> Running"]["median_ms"] in (10.0, 20.0)
    assert figures["Running -> payload end"]["p99_ms"] == 500.0
    assert figures["payload end -> Done"]["max_ms"] == 20.0


def test_a_stage_a_job_did_not_record_is_counted_missing_not_guessed():
    times = [job(1, 0, 10, 110, 120, 620, 640), job(2, 0, 10, 120, 125, 630, None, status="Failed"),
             job(3, 0, 10, None, None, None, None, status="Killed")]
    figures = {f["stage"]: f for f in stage_figures(times)}
    assert (figures["submitted -> Waiting"]["jobs"], figures["submitted -> Waiting"]["missing"]) == (3, 0)
    assert (figures["Waiting -> Matched"]["jobs"], figures["Waiting -> Matched"]["missing"]) == (2, 1)
    assert (figures["payload end -> Done"]["jobs"], figures["payload end -> Done"]["missing"]) == (1, 2)
    assert stage_figures([])[0] == {"stage": "submitted -> Waiting", "median_ms": None, "p99_ms": None,
                                    "max_ms": None, "jobs": 0, "missing": 0}


def test_the_rate_runs_from_the_submission_to_the_last_done():
    times = [job(1, 100, 110, 500, 510, 900, 1000), job(2, 100, 110, 700, 710, 1900, 2000),
             job(3, 100, 110, 800, 810, 1200, None, status="Failed")]
    assert throughput(times, T0) == {"done": 2, "seconds": 2.0, "jobs_per_second": 1.0, "first_matched_after": 0.5}
    assert throughput([job(1, 0, 1, None, None, None, None, status="Waiting")], T0) == {
        "done": 0, "seconds": None, "jobs_per_second": None, "first_matched_after": None}


def test_the_jobs_are_one_parametric_description_of_the_payload():
    jobs = parse_jdl(jdl(["/bin/sh", "-c", "echo 'a b' %n"], 3))
    assert [j.executable for j in jobs] == ["/bin/sh"] * 3
    assert [j.job_name for j in jobs] == ["e2e_0", "e2e_1", "e2e_2"]
    assert jobs[2].arguments == "-c 'echo '\"'\"'a b'\"'\"' 2'"
    [plain] = parse_jdl(jdl(["/bin/true"], 1))
    assert plain.executable == "/bin/true" and plain.arguments is None


def test_the_bench_queue_grants_each_pilot_its_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("WMS_CONFIG", str(CONFIG_DIR))
    config = load_config(e2e_config_dir(tmp_path, pilots=3, slots=4, isolation="none"))
    resources = config.resources
    queue = resources[QUEUE.site]["CEs"][QUEUE.ce]["Queues"][QUEUE.queue]
    assert queue["Backend"] == "local" and queue["Isolation"] == "none"
    assert QueueLimits.of(queue) == QueueLimits(max_waiting=3, max_total=3, slots=12, slots_per_pilot=4)
    assert len(resources) == 1


def test_the_database_meter_picks_the_servers_processes():
    def process(name: str, command: str) -> cpu.Process:
        return cpu.Process(1, 0, name, command, 0)

    postgres = cpu.database_meter("postgresql://postgres@127.0.0.1:5432/wms_bench_1_ab")
    assert postgres is not None
    assert postgres.chosen(process("postgres", "postgres: 15/main: postgres wms_bench_1_ab 127.0.0.1(3) idle"))
    assert postgres.chosen(process("postgres", "postgres: 15/main: walwriter"))
    assert not postgres.chosen(process("postgres", "postgres: 15/main: postgres test 127.0.0.1(4) idle"))
    assert not postgres.chosen(process("python3", "python3 wms_bench_1_ab"))
    mariadb = cpu.database_meter("mysql://root@127.0.0.1:3306/wms_bench_2_cd")
    assert mariadb is not None and mariadb.chosen(process("mariadbd", "/usr/sbin/mariadbd"))
    assert cpu.database_meter("sqlite:///var/wms.db") is None


def test_the_meter_counts_what_a_process_used_while_it_was_watched():
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.6\n"
                             "while time.process_time() < end: pass\ntime.sleep(30)"])
    try:
        meter = cpu.ProcessMeter(lambda p: p.pid == busy.pid)
        meter.start()
        deadline = time.monotonic() + 30
        while meter.seconds() < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
            meter.sample()
        assert 0.5 <= meter.seconds() < 2.0
    finally:
        busy.kill()
        busy.wait()


def test_the_private_slurm_claims_the_cpus_it_is_given():
    conf = render_conf("wmsbench", "node1", 64, 7001, 7002, Path("/d/munge.sock"), Path("/d"),
                       {"SchedulerType": "sched/backfill", "SchedulerParameters": "defer,sched_interval=1"})
    lines = conf.splitlines()
    assert "SlurmdParameters=config_overrides" in lines and "NodeName=node1 CPUs=64 State=UNKNOWN" in lines
    assert "SchedulerParameters=defer,sched_interval=1" in lines and "SlurmctldPort=7001" in lines
    assert f"PartitionName={PARTITION} Nodes=node1 Default=YES MaxTime=INFINITE State=UP" in lines


@pytest.mark.parametrize("jobs, array, count", [(5, "1001", "10000"), (5000, "5001", "10000"), (8000, "8001", "16000")])
def test_the_slurm_settings_hold_the_whole_array(jobs, array, count):
    settings = throughput_settings(jobs)
    assert (settings["MaxArraySize"], settings["MaxJobCount"]) == (array, count)
    assert settings["SchedulerType"] == "sched/backfill" and "defer" in settings["SchedulerParameters"].split(",")


def test_the_batch_script_runs_the_payload_and_each_task_state_is_read():
    assert batch_script(["/bin/echo", "a b"]) == "#!/bin/sh\nexec /bin/echo 'a b'\n"
    line = "JobId=12 ArrayJobId=10 ArrayTaskId=2 JobName=wms-bench-e2e JobState=COMPLETED Reason=None ExitCode=0:0"
    assert task_state(line) == "COMPLETED 0:0"
    assert task_state("JobId=13 JobState=FAILED ExitCode=1:0") == "FAILED 1:0"
