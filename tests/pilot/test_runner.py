"""The runner with real child processes; the server is a recording Reporter."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pilot.client import JobLost, NetworkError
from pilot.isolation import inherited
from pilot.runner import (
    JobResult,
    JobSpec,
    Limits,
    Stop,
    job_directory,
    parse_proc_stat,
    read_tail,
    run_job,
    session_processes,
    signal_tree,
    tree_cpu_seconds,
)
from tests.helpers import patience, wait_until
from tests.pilot.recorder import Recorder

SH = "/bin/sh"
PY = sys.executable


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (zombies may wait for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return parse_proc_stat(stat).state not in ("Z", "X")


def sh(job_id: int, script: str, **kw) -> JobSpec:
    from shlex import quote

    return JobSpec(job_id=job_id, executable=SH, arguments=f"-c {quote(script)}", **kw)


def run(spec: JobSpec, tmp_path: Path, rec: Recorder | None = None, **kw) -> tuple[JobResult, Recorder]:
    rec = rec or Recorder()
    kw.setdefault("grace", 1.0)
    kw.setdefault("poll_interval", 0.1)
    return run_job(spec, tmp_path, rec.reporter(), **kw), rec


def when_started(marker: Path, action) -> threading.Thread:
    """Call ``action()`` in a thread once the job has written ``marker``."""
    thread = threading.Thread(target=lambda: (wait_until(marker.exists, timeout=60, what=f"{marker} written"),
                                              action()), daemon=True)
    thread.start()
    return thread


def result_session(job_dir: Path) -> int:
    """The job's session id, which the job wrote as its first line (``$$``)."""
    return int((job_dir / "leader.pid").read_text())


def test_success_captures_output(tmp_path):
    result, rec = run(sh(1, "echo hello; echo oops >&2"), tmp_path)
    assert (result.status, result.minor_status, result.exit_code) == ("Done", "Execution Complete", 0)
    assert result.reported
    assert rec.kinds == ["Running", "output", "Done"]
    assert rec.statuses[-1] == ("Done", "Execution Complete", 0)
    assert rec.outputs == [("hello\n", "oops\n", False)]
    assert (tmp_path / "1" / "std.out").read_text() == "hello\n"


def test_failure_exit_code(tmp_path):
    result, rec = run(sh(2, "echo bad >&2; exit 3"), tmp_path)
    assert (result.status, result.minor_status, result.exit_code) == ("Failed", "Exit code 3", 3)
    assert rec.statuses[-1] == ("Failed", "Exit code 3", 3)
    assert rec.outputs[0][1] == "bad\n"


def test_killed_by_signal(tmp_path):
    result, rec = run(sh(3, "kill -9 $$"), tmp_path)
    assert (result.status, result.minor_status, result.exit_code) == ("Failed", "Killed by signal 9", 137)


def test_h_rt_kills_the_whole_tree(tmp_path):
    # A background grandchild and a foreground one: both must go.
    spec = sh(4, "echo $$ > leader.pid; sleep 300 & echo $! > bg.pid; sleep 300", limits=Limits(h_rt=1))
    t0 = time.monotonic()
    result, rec = run(spec, tmp_path)
    took = time.monotonic() - t0
    assert result.status == "Failed"
    assert result.minor_status == "Exceeded h_rt (1 s)"
    assert rec.statuses[-1][:2] == ("Failed", "Exceeded h_rt (1 s)")
    assert 1.0 <= took < patience(20)          # ended by h_rt, long before its 300 s
    bg = int((tmp_path / "4" / "bg.pid").read_text())
    assert not alive(bg)
    # Nothing of the job's session survives (its id is the leader's pid).
    assert [p for p in session_processes(result_session(tmp_path / "4")) if p.state != "Z"] == []


def test_h_rt_sigkill_when_sigterm_is_ignored(tmp_path):
    spec = sh(5, "trap '' TERM; sleep 300 & echo $! > bg.pid; sleep 300", limits=Limits(h_rt=1))
    t0 = time.monotonic()
    result, _ = run(spec, tmp_path, grace=1.0)
    assert time.monotonic() - t0 < patience(20)
    assert result.minor_status == "Exceeded h_rt (1 s)"
    assert result.exit_code == 128 + signal.SIGKILL
    assert not alive(int((tmp_path / "5" / "bg.pid").read_text()))


# A busy loop that writes its own CPU time (time.process_time()) to the
# file "cpu" as it goes: what the job itself measured, to compare with.
BUSY_SELF_MEASURED = (
    "import os, time\n"
    "fd = os.open('cpu', os.O_WRONLY | os.O_CREAT, 0o644)\n"
    "while True:\n"
    "    for _ in range(20000): pass\n"
    "    os.pwrite(fd, b'%-20.6f' % time.process_time(), 0)\n"
)


def test_cpu_time_limit(tmp_path):
    # On a loaded machine the kernel's tick-sampled count (RLIMIT_CPU) and the
    # exact one (rusage, /proc) differ by tenths of a second: the test asserts
    # that the limit stopped the job, and that the pilot's figure covers what
    # the job measured of itself, not a number close to the limit.
    from shlex import quote

    spec = JobSpec(job_id=6, executable=PY, arguments=f"-c {quote(BUSY_SELF_MEASURED)}", limits=Limits(cpu_time=1))
    result, rec = run(spec, tmp_path)
    assert result.status == "Failed"
    assert result.minor_status == "Exceeded cpu_time (1 s)"
    assert rec.statuses[-1][:2] == ("Failed", "Exceeded cpu_time (1 s)")
    # Ended by a signal: the watchdog's SIGTERM (then SIGKILL) or the kernel's SIGXCPU (then SIGKILL).
    assert result.exit_code in {128 + signal.SIGTERM, 128 + signal.SIGKILL, 128 + signal.SIGXCPU}, result
    own = float((tmp_path / "6" / "cpu").read_text())
    # The job got near its limit before it was stopped (the pilot counts a
    # signal as the limit only from cpu_time - 0.5 on), and was stopped
    # before the hard limit (cpu_time + grace) let it run on.
    assert 0.5 <= own < 1 + 1.0 + 0.5, own
    # What the pilot reports covers all the job measured (the job wrote its
    # figure shortly before it was stopped; a tick of rounding allowed).
    assert result.cpu_seconds >= own - 0.02, (result.cpu_seconds, own)
    assert result.cpu_seconds < own + 1.0, (result.cpu_seconds, own)
    assert result.wall_seconds >= result.cpu_seconds - 0.05      # one thread: no more CPU than wall time


def test_cpu_time_counts_the_tree(tmp_path):
    # Two busy grandchildren: each alone stays below the limit for a while,
    # the tree's sum reaches it (the watchdog, not only RLIMIT_CPU).
    loop = f"{PY} -c 'while True: pass'"
    spec = sh(7, f"{loop} & {loop} & wait", limits=Limits(cpu_time=2))
    result, _ = run(spec, tmp_path)
    assert result.minor_status == "Exceeded cpu_time (2 s)"


def test_tree_cpu_seconds_measures_a_busy_child(tmp_path):
    import subprocess

    # The child spends 0.6 s of CPU (its own clock, however long that takes on
    # a loaded machine), writes what it measured of itself, and sleeps.
    script = ("import time\nwhile time.process_time() < 0.6: pass\n"
              f"open({str(tmp_path / 'cpu.tmp')!r}, 'w').write(repr(time.process_time()))\n"
              f"__import__('os').rename({str(tmp_path / 'cpu.tmp')!r}, {str(tmp_path / 'cpu')!r})\n"
              "time.sleep(60)")
    child = subprocess.Popen([PY, "-c", script], start_new_session=True)
    try:
        wait_until(lambda: (tmp_path / "cpu").exists(), timeout=60, what="the child has spent 0.6 s of CPU")
        own = float((tmp_path / "cpu").read_text())
        measured = tree_cpu_seconds(child.pid)
        # /proc counts in ticks (utime and stime each rounded down) and the
        # child spent a little more after it wrote its figure.
        assert own - 0.05 <= measured <= own + 0.5, (measured, own)
    finally:
        child.kill()
        child.wait()


def test_a_trees_processes_are_found_below_its_leader_not_by_reading_the_node(tmp_path):
    # A sandbox's processes stay below its leader whatever they do (an
    # orphan goes to the sandbox's init): the pilot walks the kernel's lists
    # of children from the leader, a cost that grows with the job, not with
    # every process on the node. Outside a sandbox an orphan leaves the tree
    # and only the session finds it.
    from pilot.runner import descendants, tree_processes

    script = "sleep 60 & (sleep 60 &) ; echo $! > bg.pid; wait"         # no child comes and goes meanwhile
    leader = subprocess.Popen([SH, "-c", script], cwd=tmp_path, start_new_session=True)
    try:
        pid_file = tmp_path / "bg.pid"
        wait_until(lambda: len(session_processes(leader.pid)) >= 3 and pid_file.exists() and pid_file.read_text(),
                   timeout=60, what="the tree has started")
        below = set(descendants(leader.pid))
        session = {p.pid for p in session_processes(leader.pid)} - {leader.pid}
        orphan = session - below
        assert int((tmp_path / "bg.pid").read_text()) in below and len(orphan) == 1, (below, session)
        assert {p.pid for p in tree_processes(leader.pid, leader.pid)} == {leader.pid, *below}
        assert tree_processes(leader.pid, leader.pid + 1) == []          # not that session: a recycled pid
    finally:
        signal_tree(leader.pid, signal.SIGKILL)
        leader.wait()


def test_s_rt_warns_with_sigusr1_and_the_job_may_finish(tmp_path):
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (print('usr1', flush=True), sys.exit(0)))\n"
        "time.sleep(30)\n"
    )
    spec = JobSpec(job_id=8, executable=PY, arguments=f"-c {__import__('shlex').quote(script)}",
                   limits=Limits(s_rt=1, h_rt=20))
    result, rec = run(spec, tmp_path)
    assert (result.status, result.exit_code) == ("Done", 0)
    assert rec.outputs[0][0] == "usr1\n"


def test_s_rt_then_terminated_after_grace(tmp_path):
    spec = sh(9, "trap '' USR1; sleep 300", limits=Limits(s_rt=1))
    t0 = time.monotonic()
    result, _ = run(spec, tmp_path, grace=1.0)
    assert result.minor_status == "Exceeded s_rt (1 s)"
    assert time.monotonic() - t0 < patience(20)


def test_output_truncated_to_the_tail(tmp_path):
    spec = sh(10, "i=0; while [ $i -lt 500 ]; do echo line-$i; i=$((i+1)); done; echo END; echo short >&2")
    result, rec = run(spec, tmp_path, output_limit=100)
    stdout, stderr, truncated = rec.outputs[0]
    assert truncated and result.truncated
    assert len(stdout.encode()) == 100
    assert stdout.endswith("line-499\nEND\n")
    assert stderr == "short\n"
    assert (tmp_path / "10" / "std.out").stat().st_size > 100  # the file keeps everything


def test_each_job_gets_its_own_directory(tmp_path):
    r1, rec1 = run(sh(11, "pwd; touch mine"), tmp_path)
    r2, rec2 = run(sh(12, "pwd; ls"), tmp_path)
    r3, rec3 = run(sh(11, "pwd; ls"), tmp_path)  # the same job again: a fresh directory
    assert rec1.outputs[0][0].strip() == str(tmp_path / "11") == str(r1.workdir)
    assert rec2.outputs[0][0].split() == [str(tmp_path / "12"), "std.err", "std.out"]
    out3 = rec3.outputs[0][0].split()
    assert out3[0] == str(tmp_path / "11.1") and "mine" not in out3


def test_job_directory_numbering(tmp_path):
    assert job_directory(tmp_path, 5).name == "5"
    assert job_directory(tmp_path, 5).name == "5.1"
    assert job_directory(tmp_path, 5).name == "5.2"


def test_environment(tmp_path, monkeypatch):
    # Of the pilot's environment a job gets PATH, the locale and the terminal
    # only (a pilot's environment may carry the batch system's or the site's
    # secrets), never the pilot's token; its own variables and WMS_* on top,
    # HOME its directory, and its job token when the Matcher gave one.
    monkeypatch.setenv("PILOT_SIDE", "inherited")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("WMS_TOKEN", "secret-pilot-token")
    monkeypatch.setenv("WMS_PILOT_TOKEN", "secret-pilot-token")
    spec = sh(13, 'echo "$WMS_JOB_ID|$FOO|${PILOT_SIDE-unset}|${WMS_TOKEN-unset}|${WMS_PILOT_TOKEN-unset}|$WMS_JOB_DIR'
                  '|$HOME|$LC_TIME|${WMS_JOB_TOKEN-unset}"',
              environment={"FOO": "bar baz", "WMS_JOB_ID": "forged"})
    _, rec = run(spec, tmp_path)
    job_dir = tmp_path / "13"
    assert rec.outputs[0][0] == f"13|bar baz|unset|unset|unset|{job_dir}|{job_dir}|C|unset\n"
    with_token = dataclasses.replace(sh(14, 'echo "$WMS_JOB_TOKEN"'), job_token="wmsj_14.1.abc")
    _, rec = run(with_token, tmp_path)
    assert rec.outputs[0][0] == "wmsj_14.1.abc\n"


def test_a_site_passes_more_of_the_pilots_environment():
    env = {"PATH": "/usr/bin", "X509_CERT_DIR": "/etc/grid-security/certificates", "SLURM_JOB_ID": "7",
           "SSH_AUTH_SOCK": "/tmp/agent", "AWS_SECRET_ACCESS_KEY": "k"}
    assert inherited(env) == {"PATH": "/usr/bin", "SLURM_JOB_ID": "7"}
    assert inherited(env, ["X509_*"]) == {"PATH": "/usr/bin", "X509_CERT_DIR": "/etc/grid-security/certificates",
                                          "SLURM_JOB_ID": "7"}


def test_arguments_split_like_a_shell(tmp_path):
    spec = JobSpec(job_id=14, executable=PY, arguments="-c 'import sys; print(sys.argv[1:])' a 'b c' \"d\"")
    _, rec = run(spec, tmp_path)
    assert rec.outputs[0][0] == "['a', 'b c', 'd']\n"


def test_heartbeats_are_sent(tmp_path):
    # The job runs until the second heartbeat has been sent (h_rt ends it if none comes).
    def release(n: int) -> None:
        if n >= 2:
            (tmp_path / "15" / "release").touch()

    spec = sh(15, "while [ ! -e release ]; do sleep 0.05; done", limits=Limits(h_rt=patience(60)))
    result, rec = run(spec, tmp_path, Recorder(on_heartbeat=release), heartbeat_interval=0.2)
    assert result.status == "Done", result
    assert rec.heartbeats >= 2


def test_kill_from_heartbeat(tmp_path):
    # Killed at the first heartbeat, once the job has started its background child.
    rec = Recorder(kill_after=1, on_heartbeat=lambda n: wait_until((tmp_path / "16" / "bg.pid").exists, timeout=60))
    spec = sh(16, "sleep 300 & echo $! > bg.pid; sleep 300")
    t0 = time.monotonic()
    result, rec = run(spec, tmp_path, rec, heartbeat_interval=0.3)
    assert time.monotonic() - t0 < patience(20)
    assert result.status == "Killed" and not result.reported
    assert rec.kinds == ["Running", "heartbeat"]  # nothing reported after the kill
    assert not alive(int((tmp_path / "16" / "bg.pid").read_text()))


def test_job_lost_on_heartbeat(tmp_path):
    def lost(_n: int) -> None:
        raise JobLost(409, "lease expired")

    result, rec = run(sh(17, "sleep 30"), tmp_path, Recorder(on_heartbeat=lost), heartbeat_interval=0.2)
    assert result.status == "Lost"
    assert rec.kinds == ["Running", "heartbeat"]


def test_a_refused_running_report_starts_nothing(tmp_path):
    def lost(status: str) -> None:
        raise JobLost(409, "not yours")

    result, rec = run(sh(18, "touch started; sleep 30"), tmp_path, Recorder(on_status=lost))
    assert (result.status, result.minor_status) == ("Lost", "No longer this pilot's job")
    assert [c[0] for c in rec.calls] == ["status"]
    time.sleep(0.2)
    assert not (tmp_path / "18" / "started").exists()


def test_an_unconfirmed_running_report_starts_nothing(tmp_path):
    # The Matcher may or may not have recorded it: the lease (or, if it did,
    # the missing heartbeats) brings the job back; running it here could
    # run it twice.
    def down(status: str) -> None:
        raise NetworkError("connection refused")

    result, rec = run(sh(19, "touch started; sleep 30"), tmp_path, Recorder(on_status=down))
    assert (result.status, result.minor_status) == ("Lost", "Running not confirmed")
    time.sleep(0.2)
    assert not (tmp_path / "19" / "started").exists()


def test_network_trouble_does_not_stop_the_job(tmp_path):
    def down(_n: int) -> None:
        raise NetworkError("connection refused")

    def output_fails() -> None:
        raise NetworkError("connection reset")

    rec = Recorder(on_heartbeat=down)
    result, rec = run(sh(19, "sleep 0.7; exit 0"), tmp_path, rec, heartbeat_interval=0.2)
    assert result.status == "Done"
    assert rec.statuses[-1] == ("Done", "Execution Complete", 0)


def test_the_output_upload_outlasts_a_short_outage(tmp_path):
    tries = []

    def down_twice() -> None:
        tries.append(time.monotonic())
        if len(tries) <= 2:
            raise NetworkError("connection refused")

    result, rec = run(sh(22, "echo kept"), tmp_path, Recorder(on_output=down_twice), patience=30)
    assert (result.status, len(tries)) == ("Done", 3)
    assert rec.outputs == [("kept\n", "", False)] and rec.statuses[-1] == ("Done", "Execution Complete", 0)


def test_the_done_report_says_how_long_ago_the_payload_ended(tmp_path):
    """The server was away at the first try, the report (with its output)
    got through a second later: the server is told the payload ended that
    long before the report, and dates the job's end so."""
    tries: list[str] = []

    def away_once(status: str) -> None:
        tries.append(status)
        if tries.count("Done") == 1:
            raise NetworkError("connection refused")

    result, rec = run(sh(24, "echo slow report"), tmp_path, Recorder(on_status=away_once), patience=30)
    assert result.status == "Done" and tries == ["Running", "Done", "Done"]
    assert rec.ended_ago[0] is None                           # Running: nothing has ended
    assert 1.0 <= rec.ended_ago[-1] < 10.0, rec.ended_ago


def test_a_job_whose_output_cannot_be_stored_is_not_done(tmp_path):
    def output_fails() -> None:
        raise NetworkError("connection reset")

    result, rec = run(sh(23, "echo lost"), tmp_path, Recorder(on_output=output_fails), patience=1.5)
    assert result.status == "Failed"
    assert rec.statuses[-1] == ("Failed", "Output not stored: connection reset", 0)
    assert (result.workdir / "std.out").read_text() == "lost\n"     # still on the node


def test_pilot_stop_terminates_and_reports(tmp_path):
    stop = Stop()
    threading.Timer(0.5, stop.stop).start()
    t0 = time.monotonic()
    result, rec = run(sh(20, "sleep 300"), tmp_path, stop=stop)
    assert time.monotonic() - t0 < patience(20)
    assert (result.status, result.minor_status) == ("Failed", "Pilot stopped")
    assert rec.statuses[-1][:2] == ("Failed", "Pilot stopped")
    assert rec.kinds == ["Running", "output", "Failed"]


def test_the_watcher_wakes_at_the_jobs_end_and_at_a_stop_not_at_its_next_poll(tmp_path):
    """A short job is seen ending at once, however long the poll between the
    watcher's looks at its limits; a stop is seen at once too."""
    t0 = time.monotonic()
    result, _ = run(sh(21, "sleep 0.2"), tmp_path, poll_interval=60)
    assert result.status == "Done" and time.monotonic() - t0 < patience(10)
    stop = Stop()
    threading.Timer(0.5, stop.stop).start()
    t0 = time.monotonic()
    result, _ = run(sh(22, "sleep 300"), tmp_path, stop=stop, poll_interval=60)
    assert result.minor_status == "Pilot stopped" and time.monotonic() - t0 < patience(10)


def test_a_batch_system_stop_leaves_the_job_to_the_server(tmp_path):
    stop = Stop(leave_jobs_on_term=True)
    when_started(tmp_path / "23" / "bg.pid", lambda: stop.stop("Pilot stopped", leave_jobs=True))
    result, rec = run(sh(23, "sleep 300 & echo $! > bg.pid; sleep 300"), tmp_path, stop=stop)
    assert result.status == "Left" and not result.reported
    assert rec.kinds == ["Running"]                     # no output, no Failed: the server reschedules it
    assert not alive(int((tmp_path / "23" / "bg.pid").read_text()))


def test_a_job_the_batch_system_killed_first_is_left_too(tmp_path):
    # The batch system signals the job and the pilot at once; the job's end
    # may be seen before the pilot's handler ran.
    stop = Stop(leave_jobs_on_term=True)
    threading.Timer(0.3, lambda: stop.stop("Pilot stopped", leave_jobs=True)).start()
    result, rec = run(sh(24, "kill -TERM $$"), tmp_path, stop=stop)
    assert result.status == "Left" and rec.kinds == ["Running"]
    plain, rec = run(sh(25, "kill -TERM $$"), tmp_path, stop=Stop(leave_jobs_on_term=True))
    assert plain.status == "Failed" and plain.minor_status == "Killed by signal 15"   # no stop: an ordinary failure


def test_cannot_start(tmp_path):
    result, rec = run(JobSpec(job_id=21, executable="/nonexistent/program"), tmp_path)
    assert result.status == "Failed"
    assert result.minor_status == "Cannot start: [Errno 2] No such file or directory: '/nonexistent/program'"
    assert result.exit_code is None
    assert rec.kinds == ["Running", "Failed"]  # confirmed first, then the start failed


def test_a_job_waits_at_the_gate_until_its_pilot_lets_it_go(tmp_path):
    """The job's process is registered before it runs: if its pilot is gone
    before saying go, the job never runs at all; once told, it runs with
    /dev/null for input, not the pipe it waited on. (The shell's gate, for
    unsandboxed jobs and a site's command; bwrap's own: test_isolation.py.)"""
    import os
    import subprocess

    from pilot.runner import GATE, GATE_SHELL

    def gate(said: bytes, marker: Path) -> subprocess.Popen:
        go_read, go_write = os.pipe()
        started = subprocess.Popen([GATE_SHELL, "-c", GATE, "wms-gate", "/bin/sh", "-c", f"cat > {marker}"],
                                   stdin=go_read)
        os.close(go_read)
        os.write(go_write, said)
        os.close(go_write)                   # said, or the pilot died before "go"
        return started

    for said in (b"", b"x\n"):
        marker = tmp_path / f"ran-{said!r}"
        assert gate(said, marker).wait(timeout=60) == 0 and not marker.exists()
    marker = tmp_path / "ran"
    assert gate(b"g\n", marker).wait(timeout=60) == 0 and marker.read_text() == ""


def test_bwrap_is_its_own_gate_and_the_other_modes_wait_in_the_shell(tmp_path):
    from pilot.isolation import APPTAINER, BUBBLEWRAP, NONE, Isolation, Launch
    from pilot.runner import GATE, GATE_SHELL, GO, _gated

    command, stdin, kept, go = _gated(Isolation(BUBBLEWRAP).launch(["prog"], tmp_path, {}, args_fd=5), 5)
    assert command[1:] == ["--args", "5", "--", "prog"] and (stdin, kept) == (subprocess.DEVNULL, (5,))
    assert go.startswith(b"--unshare-all\0--share-net\0--die-with-parent\0") and go.endswith(b"\0")
    for launch in (Launch(["prog"], {}), Isolation(NONE).launch(["prog"], tmp_path, {}, args_fd=5),
                   Isolation(APPTAINER, command="apptainer exec {image}", image="i").launch(["prog"], tmp_path, {}, 5)):
        assert _gated(launch, 5) == ([GATE_SHELL, "-c", GATE, "wms-gate", *launch.argv], 5, (), GO)


def test_letting_a_job_go_never_hangs_on_a_reader_that_is_gone_or_stuck():
    from pilot.runner import _let_go

    def closed(fd: int) -> bool:
        try:
            os.fstat(fd)
        except OSError:
            return True
        return False

    read_end, write_end = os.pipe()
    _let_go(write_end, b"g\n", 1.0)                  # what the pipe holds is written at once
    assert closed(write_end) and os.read(read_end, 10) == b"g\n" and os.read(read_end, 10) == b""
    os.close(read_end)
    read_end, write_end = os.pipe()
    os.close(read_end)
    with pytest.raises(BrokenPipeError):
        _let_go(write_end, b"g\n", 1.0)
    assert closed(write_end)
    read_end, write_end = os.pipe()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        _let_go(write_end, b"x" * (1 << 20), 0.3)     # more than a pipe holds, and nobody reads
    assert 0.3 <= time.monotonic() - t0 < patience(10) and closed(write_end)
    os.close(read_end)


def test_cannot_start_says_why_as_execvp_would(tmp_path):
    from pilot.runner import exec_problem

    (tmp_path / "not-executable").write_text("echo hi\n")
    (tmp_path / "bin").mkdir()
    assert exec_problem("/bin/sh", None, tmp_path) is None
    assert exec_problem("sh", "/nowhere:/bin", tmp_path) is None
    assert exec_problem("./not-executable", "/bin", tmp_path) == "[Errno 13] Permission denied: './not-executable'"
    assert exec_problem("bin", "/nowhere", tmp_path) == "[Errno 2] No such file or directory: 'bin'"
    assert exec_problem("./bin", "/bin", tmp_path) == "[Errno 13] Permission denied: './bin'"   # a directory
    result, _ = run(JobSpec(job_id=27, executable="no-such-program-anywhere"), tmp_path)
    assert result.minor_status == "Cannot start: [Errno 2] No such file or directory: 'no-such-program-anywhere'"


def test_bad_arguments(tmp_path):
    result, rec = run(JobSpec(job_id=22, executable=SH, arguments="-c 'unbalanced"), tmp_path)
    assert result.minor_status.startswith("Bad Arguments")
    assert rec.kinds == ["Failed"]


def test_leftover_processes_are_cleaned_after_a_normal_end(tmp_path):
    spec = sh(23, "sleep 30 & echo $! > bg.pid; exit 0")
    result, _ = run(spec, tmp_path)
    assert result.status == "Done"
    assert not alive(int((tmp_path / "23" / "bg.pid").read_text()))


def test_a_fault_in_the_runner_ends_the_job_and_reports_it_failed(tmp_path):
    # A defect of the pilot's own (here: its heartbeat call raising what no
    # client call raises) while the job runs with a child of its own: the
    # job's whole tree is ended and the job reported Failed at once, rather
    # than left Running with no one watching it.
    def broken(_n: int) -> None:
        raise RuntimeError("a defect")

    spec = sh(26, "echo $$ > leader.pid; sleep 300 & echo $! > bg.pid; sleep 300")
    rec = Recorder(on_heartbeat=lambda n: (wait_until((tmp_path / "26" / "bg.pid").exists, timeout=60), broken(n)))
    t0 = time.monotonic()
    result, rec = run(spec, tmp_path, rec, heartbeat_interval=0.2)
    assert time.monotonic() - t0 < patience(20)
    assert (result.status, result.minor_status) == ("Failed", "Pilot error: RuntimeError: a defect")
    assert result.reported
    assert rec.kinds == ["Running", "heartbeat", "Failed"]
    assert not alive(int((tmp_path / "26" / "bg.pid").read_text()))
    assert not alive(result_session(tmp_path / "26"))


def test_a_fault_before_the_job_started_reports_it_failed(tmp_path):
    def broken(status: str) -> None:
        if status == "Running":
            raise ValueError("a defect")

    result, rec = run(sh(27, "touch started"), tmp_path, Recorder(on_status=broken))
    assert (result.status, result.minor_status) == ("Failed", "Pilot error: ValueError: a defect")
    assert rec.kinds == ["Running", "Failed"]       # the Running call raised: nothing started
    assert not (tmp_path / "27" / "started").exists()


def test_from_match():
    spec = JobSpec.from_match({
        "JobID": 7, "JDL": "[]", "Executable": "/bin/echo", "Arguments": "hi", "Slots": None, "Lease": 300,
        "Limits": {"h_rt": 3600, "s_rt": None, "cpu_time": 7200.5}, "Environment": {"A": 1},
    })
    assert spec.job_id == 7 and spec.slots == 1 and spec.lease == 300.0
    assert spec.limits == Limits(h_rt=3600.0, s_rt=None, cpu_time=7200.5)
    assert spec.environment == {"A": "1"}
    minimal = JobSpec.from_match({"JobID": "8", "Executable": "x"})
    assert minimal.limits == Limits() and minimal.arguments == "" and minimal.slots == 1


def test_read_tail(tmp_path):
    f = tmp_path / "f"
    f.write_bytes("é".encode() * 10)  # 20 bytes, cut in the middle of a character
    text, cut = read_tail(f, 5)
    assert cut and text.endswith("éé") and text.startswith("\ufffd")
    assert read_tail(f, 100) == ("é" * 10, False)
    assert read_tail(tmp_path / "missing", 10) == ("", False)


def test_read_tail_replaces_nul_which_the_server_refuses(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"a\x00b\xff")
    assert read_tail(f, 100) == ("a\ufffdb\ufffd", False)


def test_parse_proc_stat_with_odd_command_names():
    text = "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 10 5 20 0 1 0 100 0 0"
    st = parse_proc_stat(text, clk_tck=100)
    assert (st.pid, st.state, st.pgrp, st.session) == (1234, "S", 1234, 1234)
    assert st.cpu == pytest.approx(3.15)
    own = parse_proc_stat(Path(f"/proc/{os.getpid()}/stat").read_text())
    assert own.pid == os.getpid() and own.session == os.getsid(0)


def test_a_payload_that_links_its_output_elsewhere_uploads_nothing_of_there(tmp_path):
    """A hostile payload replaces std.out with a link to a file outside its
    directory (another job's, the pilot's own): the pilot does not follow it."""
    secret = tmp_path / "other-job-secret"
    secret.write_text("alice-secret-1234\n")
    result, rec = run(sh(31, f"rm -f std.out; ln -s {secret} std.out"), tmp_path / "work")
    assert result.status == "Done"
    assert rec.outputs == [("", "", False)]
    assert "alice-secret" not in repr(rec.calls)


def test_a_payload_that_leaves_a_pipe_for_its_output_does_not_stall_the_pilot(tmp_path):
    result, rec = run(sh(32, "rm -f std.out; mkfifo std.out"), tmp_path)
    assert result.status == "Done" and result.reported
    assert rec.outputs == [("", "", False)]
