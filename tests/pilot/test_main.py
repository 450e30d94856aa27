"""``wms-pilot`` as a real process against a real HTTP server speaking the contract."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pilot.main import build_parser, main, split_list
from tests.pilot.contract_server import TOKEN, ContractServer, job

REPO = Path(__file__).resolve().parents[2]


def pilot_cmd(url: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pilot.main", "--url", url, "--site", "LCG.Test.ch", "--ce", "ce01",
        "--queue", "long", "--workdir", str(tmp_path / "work"), "--poll", "0.1", "--max-empty", "2",
        "--min-time-left", "0", "--grace", "1", "--pilot-id", "pilot-1", *extra,
    ]


def run_pilot(url: str, tmp_path: Path, *extra: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WMS_TOKEN": TOKEN}
    return subprocess.run(pilot_cmd(url, tmp_path, *extra), env=env, cwd=REPO, text=True,
                          capture_output=True, timeout=timeout)


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition never met")


def test_runs_jobs_then_stops_after_empty_answers(tmp_path):
    jobs = [job(1, "echo one; echo $WMS_JOB_ID >&2"), job(2, "exit 3", env={"X": "y"})]
    with ContractServer(jobs, pools=["pool-a"]) as srv:
        proc = run_pilot(srv.url, tmp_path, "--slots", "1", "--tags", "GPU, ssd")
    assert proc.returncode == 0, proc.stderr
    assert srv.statuses(1) == [("Running", "Application", None), ("Done", "Execution Complete", 0)]
    assert srv.statuses(2) == [("Running", "Application", None), ("Failed", "Exit code 3", 3)]
    assert srv.bodies("/jobs/1/output") == [{"pilot_id": "pilot-1", "stdout": "one\n", "stderr": "1\n",
                                              "truncated": False}]
    assert len(srv.bodies("/submit-pools")) == 1
    requests = srv.bodies("/request-job")
    assert len(requests) == 4  # two jobs, then --max-empty 2 empty answers
    body = requests[0]
    assert set(body) == {"site", "ce", "queue", "pools", "host", "slots", "load", "platform",
                         "cpu_time_left", "tags", "pilot_id"}
    assert (body["site"], body["ce"], body["queue"], body["pools"]) == ("LCG.Test.ch", "ce01", "long", ["pool-a"])
    assert body["slots"] == 1 and body["tags"] == ["GPU", "ssd"] and body["pilot_id"] == "pilot-1"
    assert 86300 < body["cpu_time_left"] <= 86400
    assert set(body["load"]) == {"num_proc", "mem_total", "mem_free", "swap_total", "arch", "load_avg",
                                 "np_load_avg"}
    # Log lines carry time, pilot id and job id.
    assert "pilot=pilot-1 job=1 " in proc.stderr
    assert (tmp_path / "work" / "1" / "std.out").read_text() == "one\n"


def test_given_pools_skip_submit_pools(tmp_path):
    with ContractServer() as srv:
        proc = run_pilot(srv.url, tmp_path, "--pools", "p1,p2", "--slots", "1", "--cpu-time-left", "500",
                         "--platform", "x86_64-el9")
    assert proc.returncode == 0, proc.stderr
    assert srv.bodies("/submit-pools") == []
    body = srv.bodies("/request-job")[0]
    assert body["pools"] == ["p1", "p2"] and body["platform"] == "x86_64-el9"
    assert 490 <= body["cpu_time_left"] <= 500


def test_queue_without_pools_ends_at_once(tmp_path):
    with ContractServer(pools=[]) as srv:
        proc = run_pilot(srv.url, tmp_path)
    assert proc.returncode == 0
    assert srv.bodies("/request-job") == []


def test_slots_fill_concurrently_and_are_accounted(tmp_path):
    jobs = [job(1, "sleep 1", slots=1), job(2, "sleep 1.5", slots=1), job(3, "sleep 0.2", slots=2)]
    with ContractServer(jobs) as srv:
        # max-empty high enough that slot 1, asking with one free slot while
        # job 2 still runs, keeps going until job 3 fits.
        proc = run_pilot(srv.url, tmp_path, "--slots", "2", "--max-empty", "20")
    assert proc.returncode == 0, proc.stderr
    requests = srv.bodies("/request-job")
    assert [r["slots"] for r in requests[:2]] == [2, 1]  # the second asks with what is left
    # Jobs 1 and 2 overlapped; job 3 (2 slots) was asked for only once both were free.
    t_run = {j: srv.times(f"/jobs/{j}/pilot-status")[0] for j in (1, 2, 3)}
    t_end = {j: srv.times(f"/jobs/{j}/pilot-status")[-1] for j in (1, 2, 3)}
    assert t_run[2] < t_end[1]
    assert t_run[3] >= max(t_end[1], t_end[2])
    assert srv.matched == [(2, 1), (1, 2), (2, 3)]
    assert [s[0] for s in srv.statuses(3)] == ["Running", "Done"]


def test_sigterm_stops_jobs_and_reports_them(tmp_path):
    with ContractServer([job(1, "sleep 30"), job(2, "sleep 30")]) as srv:
        env = {**os.environ, "WMS_TOKEN": TOKEN}
        proc = subprocess.Popen(pilot_cmd(srv.url, tmp_path, "--slots", "2"), env=env, cwd=REPO,
                                stderr=subprocess.PIPE, text=True)
        wait_for(lambda: len(srv.statuses(1)) == 1 and len(srv.statuses(2)) == 1)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        assert time.monotonic() - t0 < 8
    assert proc.returncode == 0, err
    for j in (1, 2):
        assert srv.statuses(j)[-1][:2] == ("Failed", "Pilot stopped")
    assert "received SIGTERM" in err


def test_kill_from_heartbeat_and_409(tmp_path):
    with ContractServer([job(1, "sleep 30"), job(2, "sleep 30")]) as srv:
        srv.kill.add(1)
        srv.conflict.add(2)  # even the Running report is refused
        proc = run_pilot(srv.url, tmp_path, "--slots", "2", "--heartbeat", "0.3")
    assert proc.returncode == 0, proc.stderr
    assert srv.statuses(1) == [("Running", "Application", None)]
    assert len(srv.bodies("/jobs/1/heartbeat")) == 1
    assert srv.bodies("/jobs/1/output") == []
    assert len(srv.bodies("/jobs/2/pilot-status")) == 1  # the refused Running, nothing after
    assert srv.bodies("/jobs/2/heartbeat") == []


def test_h_rt_from_the_match(tmp_path):
    with ContractServer([job(1, "sleep 30", h_rt=1)]) as srv:
        t0 = time.monotonic()
        proc = run_pilot(srv.url, tmp_path, "--slots", "1")
    assert proc.returncode == 0
    assert time.monotonic() - t0 < 10
    assert srv.statuses(1)[-1] == ("Failed", "Exceeded h_rt (1 s)", 143)


def test_server_down_ends_the_pilot_cleanly(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_pilot(f"http://127.0.0.1:{port}", tmp_path, "--retries", "1", "--slots", "1")
    assert proc.returncode == 0
    assert "could not get the submit pools" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_short_lifetime_asks_for_nothing(tmp_path):
    with ContractServer() as srv:
        proc = run_pilot(srv.url, tmp_path, "--lifetime", "100", "--min-time-left", "300")
    assert proc.returncode == 0
    assert srv.bodies("/request-job") == []


def test_default_workdir_is_temporary_and_removed(tmp_path):
    with ContractServer([job(1, "echo $WMS_JOB_DIR")]) as srv:
        cmd = [c for c in pilot_cmd(srv.url, tmp_path, "--slots", "1")]
        i = cmd.index("--workdir")
        del cmd[i:i + 2]
        proc = subprocess.run(cmd, env={**os.environ, "WMS_TOKEN": TOKEN}, cwd=REPO, text=True,
                              capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    job_dir = Path(srv.bodies("/jobs/1/output")[0]["stdout"].strip())
    assert job_dir.name == "1" and job_dir.parent.name.startswith("wms-pilot-")
    assert not job_dir.parent.exists()


def test_usage_errors_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("WMS_TOKEN", raising=False)
    assert main(["--site", "S", "--ce", "C", "--queue", "Q"]) == 2
    assert "no token" in capsys.readouterr().err
    assert main(["--site", "S"]) == 2
    assert main(["--site", "S", "--ce", "C", "--queue", "Q", "--token", "t", "--slots", "0"]) == 2
    assert main(["--help"]) == 0


def test_the_console_script_exists():
    script = Path(sys.executable).parent / "wms-pilot"
    assert script.exists()
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "--max-empty" in proc.stdout


def test_defaults():
    args = build_parser().parse_args(["--site", "S", "--ce", "C", "--queue", "Q"])
    assert (args.max_empty, args.poll, args.heartbeat, args.output_limit, args.lifetime) == (3, 5.0, 60.0, 1 << 20, 86400.0)
    assert split_list(" a, b,,c ") == ["a", "b", "c"] and split_list(None) == []


def test_end_of_lifetime_stops_running_jobs(tmp_path):
    with ContractServer([job(1, "sleep 30")]) as srv:
        t0 = time.monotonic()
        proc = run_pilot(srv.url, tmp_path, "--slots", "1", "--lifetime", "1.5")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 < 10
    assert srv.statuses(1)[-1][:2] == ("Failed", "Pilot lifetime reached")
    assert srv.bodies("/request-job")[0]["cpu_time_left"] == 1
