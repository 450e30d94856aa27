"""``wms-pilot`` as a real process against a real ``wms server`` (tests/pilot/conftest.py).

Jobs are submitted with ``wms submit`` as roland; the pilot has a pilot
token and serves the local queue DIRAC.Local.ch/localhost/default as an
x86_64-el9 node. What the pilot did is read back from the server: job
states and minor statuses, the state history (with the server's times),
and the uploaded output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from pilot.main import build_parser, main, split_list
from pilot.orphans import processes
from tests.helpers import REPO, patience, wait_until
from tests.pilot.conftest import LOCAL, jdl, status, submit
from tests.servers import ServerHandle, free_port

SITE, CE, QUEUE = LOCAL
QUEUE_NAME = "/".join(LOCAL)
PILOT_ID = "pilot-1"


# -- helpers -------------------------------------------------------------------


def pilot_cmd(server: ServerHandle, tmp_path: Path, *extra: str, site: tuple[str, str, str] = LOCAL) -> list[str]:
    return [
        sys.executable, "-m", "pilot.main", "--url", server.url, "--site", site[0], "--ce", site[1],
        "--queue", site[2], "--workdir", str(tmp_path / "work"), "--poll", "0.2", "--heartbeat", "1",
        "--max-empty", "2", "--min-time-left", "0", "--grace", "1", "--pilot-id", pilot_id_for(extra),
        "--platform", "x86_64-el9", *extra,
    ]


def pilot_id_for(extra: tuple[str, ...] | list[str]) -> str:
    """The tests' pilot of one slot is PILOT_ID; one of another size is
    another pilot (its own id and token): a pilot token keeps the slots its
    pilot first declared and refuses more (docs/security.md)."""
    slots = extra[extra.index("--slots") + 1] if "--slots" in extra else "auto"
    return PILOT_ID if slots == "1" else f"{PILOT_ID}-{slots}-slots"


def pilot_env(tokens: dict, pilot_id: str = PILOT_ID) -> dict[str, str]:
    """The pilot's own token in WMS_PILOT_TOKEN (tokens: the server's, so one per pilot id)."""
    return {**os.environ, "WMS_PILOT_TOKEN": tokens[pilot_id]}


def run_pilot(server: ServerHandle, tokens: dict, tmp_path: Path, *extra: str, timeout: float = 120,
              **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(pilot_cmd(server, tmp_path, *extra, **kw), env=pilot_env(tokens, pilot_id_for(extra)),
                          cwd=REPO, text=True, capture_output=True, timeout=patience(timeout))


def start_pilot(server: ServerHandle, tokens: dict, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(pilot_cmd(server, tmp_path, *extra), env=pilot_env(tokens, pilot_id_for(extra)),
                            cwd=REPO, text=True, stderr=subprocess.PIPE)


def history(server: ServerHandle, tokens: dict, job_id: int) -> list[dict]:
    with server.api(tokens["roland"]) as api:
        return api.get(f"/jobs/{job_id}/history").raise_for_status().json()


def wait_for_status(server: ServerHandle, tokens: dict, job_ids: list[int], wanted: str,
                    process: subprocess.Popen | None = None, timeout: float = 60) -> None:
    with server.api(tokens["roland"]) as api:
        def reached() -> list:
            rows = api.get("/jobs", params={"job_id": job_ids}).raise_for_status().json()
            if process is not None and process.poll() is not None and not all(r["Status"] == wanted for r in rows):
                raise AssertionError(f"the pilot ended before jobs {job_ids} were {wanted}: {rows}")
            return rows if all(r["Status"] == wanted for r in rows) else []

        wait_until(reached, timeout=timeout, what=f"jobs {job_ids} all {wanted}")


def interval(server: ServerHandle, tokens: dict, job_id: int) -> tuple[datetime, datetime]:
    """When the server heard Running and the final status of a job."""
    rows = history(server, tokens, job_id)
    start = next(r["Time"] for r in rows if r["Status"] == "Running")
    end = rows[-1]["Time"]
    return datetime.fromisoformat(start), datetime.fromisoformat(end)


def no_match_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " no match: " in line]


# -- the loop ------------------------------------------------------------------


def test_runs_jobs_then_stops_after_empty_answers(server, tokens, tmp_path):
    done, failed = submit(server, tokens, tmp_path, jdl("echo one; echo $WMS_JOB_ID >&2"), jdl("exit 3"))
    pool = status(server, tokens, done)["SubmitPool"]
    proc = run_pilot(server, tokens, tmp_path, "--slots", "1")
    assert proc.returncode == 0, proc.stderr

    steps = [(h["Status"], h["MinorStatus"], h["Source"]) for h in history(server, tokens, done)][-3:]
    assert steps == [("Matched", f"Assigned to pilot {PILOT_ID} (attempt 1)", "Matcher"),
                     ("Running", "Application", f"Pilot {PILOT_ID}"),
                     ("Done", "Execution Complete", f"Pilot {PILOT_ID}")]
    row = status(server, tokens, done)
    assert (row["Site"], row["Queue"]) == (SITE, QUEUE_NAME)
    assert (status(server, tokens, failed)["Status"], status(server, tokens, failed)["MinorStatus"]) == (
        "Failed", "Exit code 3")
    # The output, through the API as a user reads it.
    assert server.json("output", str(done), token=tokens["roland"]) == {
        "JobID": done, "stdout": "one\n", "stderr": f"{done}\n", "truncated": False}
    assert server.json("output", str(failed), token=tokens["roland"])["stdout"] == ""
    assert (tmp_path / "work" / str(done) / "std.out").read_text() == "one\n"
    # No --pools: looked up once for the queue; then --max-empty 2 empty answers end it.
    [pools_line] = [line for line in proc.stderr.splitlines() if "submit pools of" in line]
    assert f"submit pools of {QUEUE_NAME}: " in pools_line and pool in pools_line
    assert len(no_match_lines(proc.stderr)) == 2
    assert "slot 0: 2 empty answers in a row, stopping" in proc.stderr
    # Log lines carry time, pilot id and job id.
    assert f"pilot={PILOT_ID} job={done} " in proc.stderr


def test_a_pilot_with_default_options_takes_a_job_of_the_default_cpu_time(server, tokens, tmp_path):
    # No CPUTime: operations.yaml's DefaultCPUTime (86,400 s), all the local queue offers.
    [job] = submit(server, tokens, tmp_path, jdl("echo a day").replace("CPUTime = 300; ", ""))
    assert status(server, tokens, job)["Status"] == "Waiting"
    proc = run_pilot(server, tokens, tmp_path, "--slots", "1")
    assert proc.returncode == 0, proc.stderr
    assert status(server, tokens, job)["Status"] == "Done", proc.stderr


def test_given_pools_skip_the_lookup_and_cpu_time_left_is_offered(server, tokens, tmp_path):
    [job] = submit(server, tokens, tmp_path, jdl("echo pooled"))
    pool = status(server, tokens, job)["SubmitPool"]
    assert pool

    other = run_pilot(server, tokens, tmp_path, "--pools", "no-such-pool", "--slots", "1")
    assert other.returncode == 0, other.stderr
    assert "submit pools of" not in other.stderr
    assert "no match: no waiting job for the pools this queue serves" in other.stderr
    assert status(server, tokens, job)["Status"] == "Waiting"

    short = run_pilot(server, tokens, tmp_path, "--pools", pool, "--slots", "1", "--cpu-time-left", "200")
    assert short.returncode == 0, short.stderr
    assert "the pilot has 200 s left" in short.stderr or "the pilot has 199 s left" in short.stderr
    assert status(server, tokens, job)["Status"] == "Waiting"

    enough = run_pilot(server, tokens, tmp_path, "--pools", f"no-such-pool,{pool}", "--slots", "1",
                       "--cpu-time-left", "500")
    assert enough.returncode == 0, enough.stderr
    assert "submit pools of" not in enough.stderr
    assert status(server, tokens, job)["Status"] == "Done"


def test_tags_and_load_reach_the_matcher(server, tokens, tmp_path):
    # A ClassAd expression on the pilot's tags, and a request on a load value the pilot measures.
    # (The Platform term keeps the ARM queue out of the job's pool, see the next test.)
    tagged, loaded = submit(
        server, tokens, tmp_path,
        '[ Executable = "/bin/true"; CPUTime = 300; '
        'Requirements = member("ssd", other.PilotTags) && other.Platform == "x86_64-el9"; ]',
        jdl("true", 'ResourceRequests = [ mem_free = "100M"; ];'))
    gpu = run_pilot(server, tokens, tmp_path, "--slots", "1", "--tags", "GPU")
    assert gpu.returncode == 0, gpu.stderr
    assert "no match: Requirements expression is not true on this pilot" in gpu.stderr
    assert (status(server, tokens, tagged)["Status"], status(server, tokens, loaded)["Status"]) == ("Waiting", "Done")
    ssd = run_pilot(server, tokens, tmp_path, "--slots", "1", "--tags", "GPU, ssd")
    assert ssd.returncode == 0, ssd.stderr
    assert status(server, tokens, tagged)["Status"] == "Done"


def test_a_queue_without_pools_still_asks_for_jobs_without_requirements(server, tokens, tmp_path):
    # The README's pilot: no --pools. No pool serves the ARM queue, but a job
    # without requirements has no pool and may run there: the pilot asks.
    proc = run_pilot(server, tokens, tmp_path, "--slots", "1", site=("LCG.CERN.ch", "ce02.cern.ch", "arm"))
    assert proc.returncode == 0, proc.stderr
    assert "submit pools of LCG.CERN.ch/ce02.cern.ch/arm: none (only jobs without requirements may come)" \
        in proc.stderr
    assert len(no_match_lines(proc.stderr)) == 2                      # --max-empty 2, with the reason
    [plain] = submit(server, tokens, tmp_path, '[ Executable = "/bin/true"; CPUTime = 300; ]')
    local = run_pilot(server, tokens, tmp_path, "--slots", "1")
    assert local.returncode == 0, local.stderr
    assert status(server, tokens, plain)["Status"] == "Done"


def test_max_empty_per_slot(server, tokens, tmp_path):
    proc = run_pilot(server, tokens, tmp_path, "--pools", "no-such-pool", "--slots", "2", "--max-empty", "3")
    assert proc.returncode == 0, proc.stderr
    assert len(no_match_lines(proc.stderr)) == 6
    for slot in (0, 1):
        assert f"slot {slot}: 3 empty answers in a row, stopping" in proc.stderr


def test_slots_fill_concurrently_and_are_accounted(server, tokens, tmp_path):
    # Three one-slot jobs and a two-processor job (the local queue offers
    # NumberOfProcessors 2 in the tests' configuration) on a 3-slot pilot.
    # Each one-slot job waits until all three have started (then ends), so
    # they overlap however slowly a loaded machine starts them; run one
    # after the other, they would fail (exit 1 after a minute). They meet
    # in a directory of the test's, which a sandbox would hide: unisolated.
    started = tmp_path / "started"
    started.mkdir()
    together = (f"touch {started}/$WMS_JOB_ID; n=0; "
                f"while [ $(ls {started} | wc -l) -lt 3 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; "
                f"[ $(ls {started} | wc -l) -ge 3 ]")
    singles = submit(server, tokens, tmp_path, *[jdl(together)] * 3)
    [double] = submit(server, tokens, tmp_path, jdl("sleep 0.3", "NumberOfProcessors = 2;"))
    proc = run_pilot(server, tokens, tmp_path, "--slots", "3", "--max-empty", "5", "--isolation", "none")
    assert proc.returncode == 0, proc.stderr
    assert {status(server, tokens, j)["Status"] for j in [*singles, double]} == {"Done"}, proc.stderr
    assert f"matched job {double} (2 slot(s))" in proc.stderr
    spans = {j: interval(server, tokens, j) for j in [*singles, double]}
    # The three one-slot jobs ran at the same time...
    assert max(spans[j][0] for j in singles) < min(spans[j][1] for j in singles)
    # ...and the pilot never had more than its 3 slots busy.
    slots = {**{j: 1 for j in singles}, double: 2}
    for t, _ in spans.values():
        busy = sum(slots[j] for j, (start, end) in spans.items() if start <= t < end)
        assert busy <= 3, (t, spans)


# -- limits and stops ------------------------------------------------------------


def test_h_rt_from_the_match(server, tokens, tmp_path):
    [job] = submit(server, tokens, tmp_path, jdl("sleep 300", 'ResourceRequests = [ h_rt = "0:0:2"; ];'))
    t0 = time.monotonic()
    proc = run_pilot(server, tokens, tmp_path, "--slots", "1")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 < patience(60)           # ended by h_rt, long before its 300 s
    row = status(server, tokens, job)
    assert (row["Status"], row["MinorStatus"]) == ("Failed", "Exceeded h_rt (2 s)")
    assert "h_rt=2.0" in proc.stderr


def command_lines() -> list[list[str]]:
    """The command line of every process now, as words."""
    found = []
    for pid, _ in processes():
        try:
            found.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1])
        except OSError:
            continue                        # gone meanwhile
    return found


def test_kill_reaches_the_pilot_through_the_heartbeat(server, tokens, tmp_path):
    # The job's program is found by its command line: in its sandbox, its
    # own pid is 2 or so, not the one this test sees.
    mark = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"
    [job] = submit(server, tokens, tmp_path, jdl(f"exec sleep {mark}"))
    proc = start_pilot(server, tokens, tmp_path, "--slots", "1")
    try:
        wait_for_status(server, tokens, [job], "Running", proc)
        t0 = time.monotonic()
        assert server.ok("kill", str(job), token=tokens["roland"]).strip() == (
            f"{job} killed; its pilot stops the payload at its next heartbeat")
        _, err = proc.communicate(timeout=patience(90))
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert time.monotonic() - t0 < patience(60)           # at a heartbeat (every 1 s), not after 300 s
    assert "terminating: Killed" in err
    # The pilot reported nothing after the kill: no output, no final status.
    steps = [(h["Status"], h["Source"]) for h in history(server, tokens, job)]
    assert steps[-2:] == [("Running", f"Pilot {PILOT_ID}"), ("Killed", "User")]
    result = server("output", str(job), token=tokens["roland"])
    assert result.returncode == 1 and "has no output yet" in result.stderr
    # The job's process is gone.
    assert ["sleep", mark] not in command_lines(), "the job's process is still alive"


def test_a_final_report_refused_with_409_is_dropped(server, tokens, tmp_path):
    # Killed while running, between two heartbeats: the job ends on its own
    # (once the test lets it), its Done is refused (HTTP 409, the job is not
    # this pilot's any more) and the pilot goes on.
    # The release comes into the job's own directory, the one place of the
    # node its sandbox shows it.
    [job] = submit(server, tokens, tmp_path, jdl("n=0; while [ ! -e release ] && [ $n -lt 1200 ]; do sleep 0.05; "
                                                 "n=$((n+1)); done"))
    release = tmp_path / "work" / str(job) / "release"
    proc = start_pilot(server, tokens, tmp_path, "--slots", "1", "--heartbeat", "600")
    try:
        wait_for_status(server, tokens, [job], "Running", proc)
        with server.api(tokens["roland"]) as api:
            answer = api.post("/jobs/kill", json={"job_ids": [job]}).json()
        assert answer["killed"] == [job] and answer["stopping"] == [job]     # still on its node: it stops later
        release.touch()
        _, err = proc.communicate(timeout=patience(90))
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "job is no longer ours" in err and "HTTP 409" in err
    assert "Traceback" not in err
    assert [h["Status"] for h in history(server, tokens, job)][-2:] == ["Running", "Killed"]
    assert status(server, tokens, job)["Status"] == "Killed"


def test_sigterm_stops_jobs_and_reports_them(server, tokens, tmp_path):
    jobs = submit(server, tokens, tmp_path, jdl("sleep 300"), jdl("sleep 300"))
    proc = start_pilot(server, tokens, tmp_path, "--slots", "2")
    try:
        wait_for_status(server, tokens, jobs, "Running", proc)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=patience(90))
        assert time.monotonic() - t0 < patience(60)       # stopped, not after 300 s
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    for j in jobs:
        row = status(server, tokens, j)
        assert (row["Status"], row["MinorStatus"]) == ("Failed", "Pilot stopped")
    assert "received SIGTERM" in err


def test_end_of_lifetime_stops_running_jobs(server, tokens, tmp_path):
    [job] = submit(server, tokens, tmp_path, jdl("sleep 300"))
    # The CPU time offered defaults to the lifetime: 1.5 s fits no 300 s job.
    short = run_pilot(server, tokens, tmp_path, "--slots", "1", "--lifetime", "1.5")
    assert short.returncode == 0, short.stderr
    assert "job needs 360 s of CPU time, the pilot has 1 s left" in short.stderr
    assert status(server, tokens, job)["Status"] == "Waiting"

    t0 = time.monotonic()
    proc = run_pilot(server, tokens, tmp_path, "--slots", "1", "--lifetime", "1.5", "--cpu-time-left", "1000")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 < patience(60)           # at the end of its lifetime, not after 300 s
    row = status(server, tokens, job)
    assert (row["Status"], row["MinorStatus"]) == ("Failed", "Pilot lifetime reached")


def test_short_lifetime_asks_for_nothing(server, tokens, tmp_path):
    [job] = submit(server, tokens, tmp_path, jdl("true"))
    proc = run_pilot(server, tokens, tmp_path, "--lifetime", "100", "--min-time-left", "300")
    assert proc.returncode == 0, proc.stderr
    assert "less than 300: no more jobs" in proc.stderr
    assert no_match_lines(proc.stderr) == []
    assert status(server, tokens, job)["Status"] == "Waiting"


def test_server_down_ends_the_pilot_cleanly(tmp_path):
    cmd = [sys.executable, "-m", "pilot.main", "--url", f"http://127.0.0.1:{free_port()}", "--site", SITE,
           "--ce", CE, "--queue", QUEUE, "--workdir", str(tmp_path / "work"), "--poll", "0.2",
           "--max-empty", "1", "--retries", "1", "--slots", "1", "--token", "no-server-to-check-it"]
    proc = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True, timeout=30)
    assert proc.returncode == 0
    assert "could not get the submit pools" in proc.stderr
    assert "request-job failed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_default_workdir_is_temporary_and_removed(server, tokens, tmp_path):
    [job] = submit(server, tokens, tmp_path, jdl("echo $WMS_JOB_DIR"))
    cmd = pilot_cmd(server, tmp_path, "--slots", "1")
    i = cmd.index("--workdir")
    del cmd[i:i + 2]
    proc = subprocess.run(cmd, env=pilot_env(tokens), cwd=REPO, text=True, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    job_dir = Path(server.json("output", str(job), token=tokens["roland"])["stdout"].strip())
    assert job_dir.name == str(job) and job_dir.parent.name.startswith("wms-pilot-")
    assert not job_dir.parent.exists()


# -- without a server ------------------------------------------------------------


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
    assert (args.max_empty, args.poll, args.heartbeat, args.output_limit, args.lifetime) == (3, 5.0, 60.0, 1 << 20, 172800.0)
    assert split_list(" a, b,,c ") == ["a", "b", "c"] and split_list(None) == []
