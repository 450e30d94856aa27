"""A payload never outlives its pilot unnoticed: real pilots, real payloads,
SIGKILL (pilot/orphans.py).

Each payload here would write a marker file five minutes after it starts; a
pilot is killed while it runs, and the payload's whole session must be gone
long before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pilot.orphans import (
    REWRITE_AFTER, SUFFIX, Sessions, end_orphans, private_dir, proc_fields, processes, read_registry, session_members,
    start_time,
)
from tests.pilot.conftest import jdl, submit
from tests.pilot.test_main import pilot_cmd, pilot_env, wait_for_status
from tests.helpers import REPO, patience, wait_until

# Long enough that only a kill ends it within the test (a loaded machine
# may be slow): far longer than any wait below, patience included.
SLOW = "sleep 300; touch {marker}"


def start(server, tokens, tmp_path: Path, state_dir: Path, pilot_id: str, *options: str) -> subprocess.Popen[str]:
    cmd = pilot_cmd(server, tmp_path, "--slots", "1", "--state-dir", str(state_dir), *options)
    cmd[cmd.index("--pilot-id") + 1] = pilot_id
    return subprocess.Popen(cmd, env=pilot_env(tokens, pilot_id), cwd=REPO, text=True, stderr=subprocess.PIPE)


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose parent is ``pid``."""
    out = []
    for child, fields in processes():
        if int(fields[1]) == pid:
            try:
                out.append((child, Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()))
            except OSError:
                continue
    return out


def alive(pid: int) -> bool:
    fields = proc_fields(pid)
    return fields is not None and fields[0] != "Z"


def wait_gone(pid: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + patience(timeout)
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def wait_session_gone(sid: int, timeout: float = 60) -> list[int]:
    """The members of session ``sid`` still alive once the wait is over: a
    SIGKILLed process lives on until the kernel runs it, later on a loaded machine."""
    deadline = time.monotonic() + patience(timeout)
    while (left := [pid for pid in session_members(sid) if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def payload_of(pilot: subprocess.Popen[str]) -> int:
    """The running payload's leader: the pilot's child that is not the watchdog."""
    deadline = time.monotonic() + patience(60)
    while time.monotonic() < deadline:
        found = [pid for pid, cmd in children(pilot.pid) if "pilot.orphans" not in cmd]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no payload started")


def test_the_payload_dies_with_its_pilot(server, tokens, tmp_path):
    marker = tmp_path / "marker"
    [job_id] = submit(server, tokens, tmp_path, jdl(SLOW.format(marker=marker)))
    pilot = start(server, tokens, tmp_path, tmp_path / "state", "killed-pilot")
    wait_for_status(server, tokens, [job_id], "Running", pilot)
    payload = payload_of(pilot)
    pilot.send_signal(signal.SIGKILL)
    pilot.wait()
    assert wait_gone(payload), "the payload outlived its pilot"
    assert not wait_session_gone(payload) and not marker.exists()


def test_a_new_pilot_ends_the_payloads_of_a_dead_predecessor(server, tokens, tmp_path):
    """The pilot and its watchdog both killed: the next pilot on the node cleans up.

    Unisolated: a sandboxed payload dies with its pilot by the kernel's own
    doing (the next test), so only an unisolated one can be left behind."""
    marker = tmp_path / "marker"
    state = tmp_path / "state"
    [job_id] = submit(server, tokens, tmp_path, jdl(SLOW.format(marker=marker)))
    pilot = start(server, tokens, tmp_path, state, "first-pilot", "--isolation", "none")
    wait_for_status(server, tokens, [job_id], "Running", pilot)
    payload = payload_of(pilot)
    [watchdog] = [pid for pid, cmd in children(pilot.pid) if "pilot.orphans" in cmd]
    os.kill(watchdog, signal.SIGKILL)
    pilot.send_signal(signal.SIGKILL)
    pilot.wait()
    assert alive(payload) and (state / f"first-pilot.{pilot.pid}{SUFFIX}").exists()
    successor = start(server, tokens, tmp_path, state, "second-pilot")
    assert wait_gone(payload), "the successor left the orphan running"
    successor.send_signal(signal.SIGTERM)
    _, err = successor.communicate(timeout=patience(90))
    assert "ended 1 job session(s) left by dead pilots on this node" in err
    assert not list(state.glob(f"first-pilot.*{SUFFIX}"))
    assert not wait_session_gone(payload) and not marker.exists()


def test_a_sandboxed_payload_dies_with_its_pilot_even_without_the_watchdog(server, tokens, tmp_path):
    """bwrap --die-with-parent: the kernel ends the sandbox when the pilot dies,
    however it dies, and the sandbox's PID namespace takes every process in it."""
    marker = tmp_path / "marker"
    state = tmp_path / "state"
    [job_id] = submit(server, tokens, tmp_path, jdl(SLOW.format(marker=marker)))
    pilot = start(server, tokens, tmp_path, state, "doomed-pilot")
    wait_for_status(server, tokens, [job_id], "Running", pilot)
    payload = payload_of(pilot)
    # Until the sandbox runs (bwrap, its init, the job's shell and sleep),
    # bwrap may not yet have asked for the parent-death signal: a pilot
    # dying in that moment is the watchdog's and the registry's to handle.
    assert wait_until(lambda: len(session_members(payload)) >= 4, 60)
    [watchdog] = [pid for pid, cmd in children(pilot.pid) if "pilot.orphans" in cmd]
    os.kill(watchdog, signal.SIGKILL)
    pilot.send_signal(signal.SIGKILL)
    pilot.wait()
    assert wait_gone(payload), "the sandbox outlived its pilot"
    assert not wait_session_gone(payload) and not marker.exists()


def test_sessions_of_a_live_pilot_or_a_recycled_pid_are_left_alone(tmp_path):
    state = private_dir(tmp_path / "state")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        mine = {"pilot_pid": os.getpid(), "pilot_start": start_time(os.getpid()),
                "sessions": [[sleeper.pid, start_time(sleeper.pid)]]}
        (state / f"live{SUFFIX}").write_text(json.dumps(mine))
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()
        recycled = {"pilot_pid": int(gone), "pilot_start": 1, "sessions": [[sleeper.pid, 12345]]}
        (state / f"dead{SUFFIX}").write_text(json.dumps(recycled))
        assert end_orphans(state) == 0
        assert sleeper.poll() is None
        assert not (state / f"dead{SUFFIX}").exists() and (state / f"live{SUFFIX}").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_state_directory_others_may_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(OSError, match="must be a directory of this user's alone"):
        private_dir(shared)


def test_two_pilots_with_one_id_on_a_node_keep_registries_of_their_own(tmp_path):
    """A resubmitted pilot, or two test runs, may share an id on one node: each
    process writes its own registry, so neither overwrites nor loses the other's."""
    state = private_dir(tmp_path / "state")
    script = (
        "import os, sys; from pathlib import Path; from pilot.orphans import Sessions\n"
        "s = Sessions(Path(sys.argv[1]), 'same-pilot')\n"
        "for _ in range(300):\n"
        "    s.add(os.getpid()); s.remove(os.getpid())\n"
        "s.add(os.getpid()); print(s.path)\n"
    )
    runs = [subprocess.Popen([sys.executable, "-c", script, str(state)], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    paths = {out.strip() for out, _ in outputs}
    assert len(paths) == 2 and all(Path(p).exists() for p in paths)
    for path in paths:
        assert read_registry(Path(path))["pilot_id"] == "same-pilot"


def sleepers(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
            for _ in range(count)]


def test_a_start_adds_one_line_and_the_registry_is_written_whole_now_and_then(tmp_path):
    state = private_dir(tmp_path / "state")
    sessions = Sessions(state, "p1")
    running = sleepers(2)
    try:
        sessions.add(running[0].pid)                          # the first start writes the file whole
        inode = sessions.path.stat().st_ino
        sessions.add(running[1].pid)
        assert sessions.path.stat().st_ino == inode            # appended, not a new file
        assert len(sessions.path.read_text().splitlines()) == 2
        assert read_registry(sessions.path)["sessions"] == [[p.pid, start_time(p.pid)] for p in running]
        sessions.remove(running[0].pid)
        for _ in range(REWRITE_AFTER):                        # many short jobs: a line each ...
            sessions.add(running[1].pid)
        # ... until the file is written whole again, with the running session alone.
        assert len(sessions.path.read_text().splitlines()) < REWRITE_AFTER
        assert {tuple(s) for s in read_registry(sessions.path)["sessions"]} == {
            (running[1].pid, start_time(running[1].pid))}
        sessions.close()
        assert not sessions.path.exists()
    finally:
        for p in running:
            p.kill()
            p.wait()


def test_a_line_cut_short_by_a_crash_is_skipped_and_the_others_are_ended(tmp_path):
    state = private_dir(tmp_path / "state")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    running = sleepers(2)
    try:
        lines = [json.dumps({"pilot_id": "p1", "pilot_pid": int(gone), "pilot_start": 1, "sessions": []}),
                 json.dumps([running[0].pid, start_time(running[0].pid)]), "[123",
                 json.dumps([running[1].pid, start_time(running[1].pid)])[:-3]]
        (state / f"p1.{gone}{SUFFIX}").write_text("\n".join(lines))
        assert read_registry(state / f"p1.{gone}{SUFFIX}")["sessions"] == [[running[0].pid,
                                                                           start_time(running[0].pid)]]
        assert end_orphans(state) == 1
        assert wait_gone(running[0].pid) and alive(running[1].pid)
    finally:
        for p in running:
            p.kill()
            p.wait()
